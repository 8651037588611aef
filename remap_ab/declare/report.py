"""A declared subject's report folder for a failing case: ``report.md`` (the verdict, the
case, the first mismatching elements of each output with A's, B's and the oracle's
values, the call checks' findings, each input's sha256, the replay line), rendered from
``templates/case.md.j2``; ``case.json`` (the case, its row, A and B: what replay reads);
and ``inputs.pt`` (the inputs as the implementations got them)."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from remap_ab.declare.compare import value_at

REPORT_FILE = "report.md"
CASE_FILE = "case.json"  # the case and its row, as replay reads them back


@functools.cache  # one per process: compiling the template costs more than rendering it
def _template():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("remap_ab.declare", "templates"), autoescape=False,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("case.md.j2")


def sha256(value: Any) -> str:
    """The sha256 of an input's bytes (a tensor's elements in row-major order, else its repr)."""
    import torch

    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b""
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha256(repr(value).encode()).hexdigest()


def _input_rows(inputs: dict) -> list[dict]:
    import torch

    return [{"name": k, "shape": list(v.shape) if isinstance(v, torch.Tensor) else "-",
             "dtype": str(v.dtype).removeprefix("torch.") if isinstance(v, torch.Tensor) else type(v).__name__,
             "sha256": sha256(v)} for k, v in inputs.items()]


def write(folder: Path, *, subject: Any, case: dict, case_id: str, row: dict, judged: Any, settings: Any,
          replay: str) -> Path:
    """The report folder ``folder/case_id`` (its path)."""
    import torch

    out = Path(folder) / case_id
    out.mkdir(parents=True, exist_ok=True)
    sides = judged.outputs
    reference = "the oracle" if judged.has_oracle else "A (the subject has no oracle)"
    equality = {o.name: o.equality() for o in subject.outputs}
    mismatches = []
    for m in judged.mismatches:
        rows = [{"index": list(i), **{k: value_at(sides.get(k, {}).get(m.output), i) for k in ("a", "b", "oracle")}}
                for i in m.first]
        against = ("against the oracle" if judged.has_oracle else "against A") + f" ({m.side.upper()}'s)"
        mismatches.append({"output": m.output, "against": against, "problem": m.problem, "count": m.count,
                           "total": m.total, "equality": equality.get(m.output, ""), "rows": rows})
    text = _template().render(
        subject=subject.title, case_id=case_id, status=str(row["status"]), check=str(row.get("check", "")),
        first_mismatch=row.get("first_mismatch", ""), a=settings.a, b=settings.b, reference=reference,
        device=settings.device, case_json=json.dumps(case, sort_keys=True), replay=replay, error=judged.error,
        findings=judged.findings, mismatches=mismatches, inputs=_input_rows(judged.inputs),
        properties=judged.properties, sections=subject.report_sections(case, judged))
    (out / REPORT_FILE).write_text(text)
    (out / CASE_FILE).write_text(json.dumps({"case": case, "row": {k: str(v) for k, v in row.items()}, "a": settings.a,
                                             "b": settings.b}, indent=2, sort_keys=True) + "\n")
    torch.save({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in judged.inputs.items()}, out / "inputs.pt")
    return out
