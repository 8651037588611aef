"""One recorded call on disk: a gzip-compressed ``torch.save`` of a plain dict (the
subject, the function, its signature, its scalar parameters, its input tensors' values
on the host, their recorded shapes, strides and offsets, and the caller buffers'
shapes and strides). A trace is a folder of these (``*.pt.gz``) beside one
``calls-<pid>.json`` per recording process (every call counted per signature).

Reading checks the file whole: a truncated or corrupt file, or one of another format
or subject, is one ``InputError`` naming the file. Knows no kernel.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from remap_ab.errors import InputError

FORMAT = "remap-ab trace"
VERSION = 1
SUFFIX = ".pt.gz"
MANIFEST_GLOB = "calls-*.json"


@dataclass
class Sample:
    """One recorded call, as read back."""

    subject: str
    function: str
    signature: str
    params: dict  # scalar parameters by name (defaults included)
    tensors: dict  # input name -> host tensor holding its values (contiguous)
    strides: dict  # input name -> {"shape", "stride", "offset", "dtype", "device"} as the caller passed it
    buffers: dict = field(default_factory=dict)  # caller buffer name -> {"shape", "stride", "offset", "dtype"}
    call: int = 0  # the call's number among its signature's calls in the recording process
    module: str = ""  # the module the function was looked up in
    pid: int = 0

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "subject": self.subject, "function": self.function,
                "signature": self.signature, "params": self.params, "tensors": self.tensors,
                "strides": self.strides, "buffers": self.buffers, "call": self.call, "module": self.module,
                "pid": self.pid}


def dumps(sample: Sample, level: int = 6) -> bytes:
    """The file's bytes: ``torch.save`` of ``sample.to_dict()``, gzip-compressed."""
    import torch

    raw = io.BytesIO()
    torch.save(sample.to_dict(), raw)
    return gzip.compress(raw.getvalue(), compresslevel=level)


def read(path, subject: Optional[str] = None) -> Sample:
    """The sample in ``path``; InputError naming the file when it cannot be one (of
    ``subject``, when given)."""
    import torch

    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes())
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"trace file {path}: not a complete gzip file ({_why(exc)}); it was cut short or is "
                         "corrupt: record the calls again or delete it") from None
    try:
        data: Any = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(f"trace file {path}: its contents are not a remap-ab trace sample ({_why(exc)}); "
                         "delete it or record again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"trace file {path}: not a remap-ab trace sample (no format {FORMAT!r}); "
                         "give a folder written by remap_ab.record")
    if data.get("version") != VERSION:
        raise InputError(f"trace file {path}: trace format version {data.get('version')!r}, this remap-ab reads "
                         f"version {VERSION}; record again with this version")
    if subject is not None and data.get("subject") != subject:
        raise InputError(f"trace file {path}: records subject {data.get('subject')!r}, not {subject!r}; "
                         f"replay it with that subject, or move it out of the trace")
    try:
        return Sample(subject=str(data["subject"]), function=str(data["function"]), signature=str(data["signature"]),
                      params=dict(data["params"]), tensors=dict(data["tensors"]), strides=dict(data["strides"]),
                      buffers=dict(data.get("buffers") or {}), call=int(data.get("call", 0)),
                      module=str(data.get("module", "")), pid=int(data.get("pid", 0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"trace file {path}: a trace sample missing a part ({_why(exc)}); record again") from None


def files(folder) -> list[Path]:
    """The trace's sample files, in name order (a process's calls in the order recorded)."""
    return sorted(Path(folder).glob(f"*{SUFFIX}"))


def manifests(folder) -> list[dict]:
    """The per-process call counts (``calls-<pid>.json``); an unreadable one is skipped
    (the samples are the trace; the counts only describe it)."""
    out = []
    for path in sorted(Path(folder).glob(MANIFEST_GLOB)):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("format") == FORMAT:
            out.append(data)
    return out


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")[:160]
