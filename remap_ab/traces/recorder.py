"""Record the calls a process really makes: ``with remap_ab.record(DIR):`` wraps the
subject's functions (its ``traced.FUNCTIONS``) on the module they are looked up in (its
``traced.DEFAULT_MODULE``, where vLLM looks them up, or any module named), and puts the
originals back on exit. ``hook.py`` starts one from
``REMAP_AB_RECORD=DIR`` in a process one does not control.

Each call is counted under its signature (the function, every argument it is given:
a tensor's shape, dtype and strides, any other value itself; a sample also records
each tensor's device and storage offset). A call is sampled when its signature is new, and then every
``every``-th call of that signature; only a sampled call costs more than the count:

- its inputs are copied, on the caller's stream and before the call, into fresh
  device tensors (a device-to-device copy, ordered with the caller's work, no host
  sync); a writer thread takes them to the host on a stream of its own (its CUDA calls
  allowed beside another thread's graph capture: ``leave_other_threads_captures_alone``), compresses
  them (``trace_file``) and writes one file per sample. Caller buffers (the
  subject's ``traced.BUFFERS``) are outputs: their shape, strides and dtype are recorded,
  never their values;
- a call made while its stream captures a CUDA graph is counted, not sampled (its
  inputs hold nothing yet); calls a graph replays never reach Python at all;
- a forked child records on its own, into ``<its pid>-*`` files (a child that leaves
  through ``os._exit``, as multiprocessing's do, keeps the samples written so far).

What the call returns, and the stream it runs on, are the original's: the wrapper
passes the arguments through untouched and returns the result as it came.

Bounded on disk: identical samples of a signature are written once; past ``cap_mb``
a later sample of a signature already on disk is dropped (the oldest are kept), and a
new signature's first sample makes room by removing the newest later samples of the
signature with the most. A writer that falls behind drops samples rather than hold
device memory (``MAX_PENDING`` samples, ``MAX_PENDING_BYTES`` of copies). ``calls-<pid>.json`` keeps every count.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import importlib
import importlib.abc
import inspect
import json
import os
import queue
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from remap_ab import subjects
from remap_ab.errors import UsageError
from remap_ab.traces import trace_file

DEFAULT_EVERY = 100
DEFAULT_CAP_MB = 256.0
MAX_PENDING = 32  # sampled calls waiting for the writer; more are dropped (counted)
MAX_PENDING_BYTES = 512 << 20  # and the bytes of their copies (a 16384-row prefill call's inputs are 128 MiB)
_SCALARS = (bool, int, float, str, type(None))


def leave_other_threads_captures_alone() -> int:
    """Make this thread's CUDA calls (event queries, pinned allocations) allowed while
    another thread captures a CUDA graph in global mode, torch's default and vLLM's:
    otherwise the first such call invalidates that capture. CUDA's driver keeps this
    mode per thread (``cuThreadExchangeStreamCaptureMode``, relaxed). Returns the
    driver's result (0: done); -1 where there is no CUDA driver to ask."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return -1
    mode = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
    return int(driver.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)))


@dataclass
class _Pending:
    function: str
    module: str
    key: tuple
    call: int
    tensors: dict  # name -> a private copy (device or host)
    strides: dict
    buffers: dict
    params: dict
    event: Any = None  # a CUDA event after the copies, on the caller's stream


def _traced(subject: str):
    """The subject's ``traced`` module: the functions a recorder wraps, their inputs and caller buffers."""
    try:
        return importlib.import_module(f"remap_ab.subjects.{subject}.traced")
    except ModuleNotFoundError:
        raise UsageError(f"record: subject {subject!r} declares no recordable functions "
                         f"(no remap_ab.subjects.{subject}.traced module)") from None


class Recorder:
    """Records the calls of ``subject``'s functions on ``module`` (a module object, a
    dotted name or a list of them; default the subject's ``DEFAULT_MODULE``) into
    ``directory``. A context manager; ``start`` / ``stop`` for the hook."""

    def __init__(self, directory, *, module: Any = None, every: int = DEFAULT_EVERY, cap_mb: float = DEFAULT_CAP_MB,
                 subject: str = subjects.DEFAULT):
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise UsageError(f"every={every!r}: sample every N-th call of a signature, N a positive int "
                             "(1: every call)")
        if not isinstance(cap_mb, (int, float)) or isinstance(cap_mb, bool) or cap_mb <= 0:
            raise UsageError(f"cap_mb={cap_mb!r}: the trace's size cap in MB, a positive number")
        self.folder = Path(directory)
        self.every, self.cap = every, int(cap_mb * 1e6)
        self.subject = subject
        traced = _traced(subject)
        self.functions, self.inputs, self.buffer_names = tuple(traced.FUNCTIONS), set(traced.INPUTS), set(traced.BUFFERS)
        modules = module if isinstance(module, (list, tuple)) else [module or traced.DEFAULT_MODULE]
        self.modules = list(modules)
        self.patched: list[tuple[ModuleType, str, Any, Any]] = []  # (module, name, original, wrapper)
        self.calls: dict[tuple, int] = {}
        self.signatures: dict[tuple, str] = {}  # key -> its hex digest (sampled keys)
        self.stats: dict[str, Any] = {"sampled": 0, "written": 0, "duplicates": 0, "dropped_cap": 0, "evicted": 0,
                      "dropped_busy": 0, "in_graph_capture": 0, "bytes": 0, "errors": []}
        self._files: dict[str, list[tuple[Path, int]]] = {}
        self._digests: dict[str, set] = {}
        self._queue: queue.Queue = queue.Queue()
        self._writer: Optional[threading.Thread] = None
        self._finder: Optional[_PatchOnImport] = None
        self._pid = os.getpid()
        self._seq = 0
        self._streams: dict = {}
        self._relaxed = False  # whether the writer thread's CUDA calls leave other threads' captures alone
        self._pending_bytes = 0  # of the copies waiting for the writer
        self._pending_lock = threading.Lock()
        self._stopped = False

    # -- starting and stopping
    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, lazy: bool = False) -> Recorder:
        """Wrap the functions on every module. ``lazy``: a module not imported yet is
        wrapped the moment it is (the hook's way: nothing is imported early); otherwise
        each is imported now, and a module holding none of the functions is a
        UsageError."""
        self.folder.mkdir(parents=True, exist_ok=True)
        waiting = []
        for m in self.modules:
            if isinstance(m, ModuleType):
                self._patch(m, strict=True)
            elif lazy and m not in sys.modules:
                waiting.append(m)
            else:
                try:
                    mod = importlib.import_module(m)
                except ImportError as exc:
                    self._restore()
                    raise UsageError(f"record: cannot import module {m!r} ({exc}); name the module the calls look "
                                     "the functions up in (module=...)") from None
                self._patch(mod, strict=not lazy)
        if waiting:
            self._finder = _PatchOnImport(set(waiting), lambda mod: self._patch(mod, strict=False))
            sys.meta_path.insert(0, self._finder)
        self._start_writer()
        # The fork hook stays registered for the process's life; the recorder need not.
        os.register_at_fork(after_in_child=functools.partial(_in_forked_child, weakref.ref(self)))
        return self

    def _start_writer(self) -> None:
        self._writer = threading.Thread(target=self._write_loop, name="remap-ab-record", daemon=True)
        self._writer.start()

    def _after_fork(self) -> None:
        """A forked child records on its own: no thread survives a fork, and its counts,
        files and cap are its own (``calls-<its pid>.json``)."""
        if self._stopped:
            return
        self._pid, self._seq = os.getpid(), 0
        self.calls.clear()
        self.signatures.clear()
        self.stats.update({k: 0 for k in self.stats if k != "errors"}, errors=[])
        self._files, self._digests, self._streams, self._relaxed, self._pending_bytes = {}, {}, {}, False, 0
        self._pending_lock = threading.Lock()
        self._queue = queue.Queue()
        self._start_writer()
        atexit.register(self.stop)

    def stop(self) -> dict:
        """Put the original functions back, write what is pending and the counts; the stats."""
        if self._stopped:
            return self.stats
        self._stopped = True
        self._restore()
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
        self._write_manifest()
        return self.stats

    def _restore(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for module, name, original, wrapper in reversed(self.patched):
            if getattr(module, name, None) is wrapper:  # another patch on top of ours stays its owner's
                setattr(module, name, original)
        self.patched.clear()

    def _patch(self, module: ModuleType, strict: bool) -> None:
        found = [n for n in self.functions if callable(getattr(module, n, None))]
        if not found and strict:
            self._restore()
            raise UsageError(f"record: module {module.__name__} has none of {', '.join(self.functions)}; name the "
                             "module the calls look them up in")
        for name in found:
            original = getattr(module, name)
            wrapper = self._wrap(module.__name__, name, original)
            setattr(module, name, wrapper)
            self.patched.append((module, name, original, wrapper))

    # -- the call
    def _wrap(self, module_name: str, name: str, fn):
        params = list(inspect.signature(fn).parameters.values())
        names = [p.name for p in params]
        defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        import torch  # here, not at start: the hook's process has imported torch once a module is wrapped

        self._torch = torch
        tensor_type = torch.Tensor
        calls, every = self.calls, self.every

        def describe(v):
            # A tensor by its shape, dtype and strides (its device and storage offset go
            # into a sample, not the key: each attribute read costs every call); a scalar as itself.
            if isinstance(v, tensor_type):
                return (v.shape, v.dtype, v.stride())
            return v if isinstance(v, _SCALARS) else type(v).__name__

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            # The signature of the call as made (a parameter left at its default is not
            # described: the same call site makes the same key).
            pending = None
            try:  # the recorder's own failure never reaches the caller: the call is made as it came
                key = (name, tuple(map(describe, args)), tuple([(k, describe(v)) for k, v in kwargs.items()]))
                count = calls.get(key, 0) + 1
                calls[key] = count
                if count == 1 or (count - 1) % every == 0:
                    bound = dict(defaults)
                    bound.update(zip(names, args))
                    bound.update(kwargs)
                    pending = self._snapshot(module_name, name, key, count, bound)
            except Exception as exc:
                self._note(exc)
            result = fn(*args, **kwargs)
            if pending is not None:
                self._submit(pending)
            return result

        recorded.__remap_ab_recorded__ = fn  # type: ignore[attr-defined]
        return recorded

    def _snapshot(self, module_name: str, name: str, key: tuple, count: int, bound: dict) -> Optional[_Pending]:
        torch = self._torch
        tensors, strides, buffers, params = {}, {}, {}, {}
        cuda = False
        for k, v in bound.items():
            if isinstance(v, torch.Tensor):
                meta = {"shape": list(v.shape), "stride": list(v.stride()), "offset": int(v.storage_offset()),
                        "dtype": str(v.dtype).replace("torch.", ""), "device": str(v.device)}
                cuda = cuda or v.is_cuda
                if k in self.buffer_names:
                    buffers[k] = meta
                else:
                    strides[k] = meta
            elif isinstance(v, _SCALARS):
                params[k] = v
            else:
                params[k] = repr(v)[:200]
        if cuda and torch.cuda.is_current_stream_capturing():
            self.stats["in_graph_capture"] += 1
            return None
        size = sum(bound[k].numel() * bound[k].element_size() for k in strides)
        with self._pending_lock:
            # One call larger than the bound alone is still taken when nothing waits.
            busy = self._pending_bytes and self._pending_bytes + size > MAX_PENDING_BYTES
            if self._queue.qsize() >= MAX_PENDING or busy:
                self.stats["dropped_busy"] += 1
                return None
            self._pending_bytes += size
        for k in strides:
            tensors[k] = bound[k].detach().clone(memory_format=torch.contiguous_format)
        event = None
        if cuda:
            event = torch.cuda.Event()
            event.record()  # the caller's current stream: after the copies, before the call
        self.stats["sampled"] += 1
        return _Pending(name, module_name, key, count, tensors, strides, buffers, params, event)

    def _submit(self, pending: _Pending) -> None:
        self._queue.put(pending)

    def _note(self, exc: BaseException) -> None:
        if len(self.stats["errors"]) < 100:
            self.stats["errors"].append(f"{type(exc).__name__}: {exc}"[:300])

    # -- the writer thread
    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._write(item)
            except Exception as exc:  # a sample lost is counted; the caller's process goes on
                self._note(exc)

    def _host(self, item: _Pending) -> dict:
        if item.event is None:
            return item.tensors
        torch = self._torch
        device = next(iter(item.tensors.values())).device
        if not self._relaxed:  # the writer thread's first CUDA work (it alone calls this)
            self._relaxed = True
            said = leave_other_threads_captures_alone()
            if said > 0:
                self._note(RuntimeError(f"the writer thread may break a CUDA-graph capture on another thread "
                                        f"(cuThreadExchangeStreamCaptureMode returned {said})"))
        side = self._streams.get(device)
        if side is None:
            side = self._streams[device] = torch.cuda.Stream(device=device)
        with torch.cuda.stream(side):  # this thread's current stream only
            side.wait_event(item.event)
            host = {k: torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for k, t in item.tensors.items()}
            for k, t in item.tensors.items():
                host[k].copy_(t, non_blocking=True)
            done = torch.cuda.Event()
            done.record(side)
        while not done.query():  # this thread waits for its own copies, polling: no sync a sync check could see
            time.sleep(0.0005)
        return host

    def _write(self, item: _Pending) -> None:
        try:
            host = self._host(item)
        finally:
            with self._pending_lock:
                self._pending_bytes -= sum(t.numel() * t.element_size() for t in item.tensors.values())
            item.tensors = {}  # the device copies go back to the caching allocator
        sig = self.signatures.get(item.key)
        if sig is None:
            sig = self.signatures[item.key] = signature_digest(item.key)
        h = hashlib.sha256()
        for k in sorted(host):
            h.update(k.encode())
            h.update(host[k].numpy().tobytes())
        digest = h.hexdigest()
        seen = self._digests.setdefault(sig, set())
        if digest in seen:
            self.stats["duplicates"] += 1
            return
        sample = trace_file.Sample(subject=self.subject, function=item.function, signature=sig, params=item.params,
                                   tensors=host, strides=item.strides, buffers=item.buffers, call=item.call,
                                   module=item.module, pid=self._pid)
        data = trace_file.dumps(sample)
        kept = self._files.setdefault(sig, [])
        if self.stats["bytes"] + len(data) > self.cap:
            if kept:
                self.stats["dropped_cap"] += 1
                return
            self._make_room(len(data))
            if self.stats["bytes"] + len(data) > self.cap:
                self.stats["dropped_cap"] += 1
                return
        self._seq += 1
        path = self.folder / f"{self._pid}-{self._seq:07d}-{sig}{trace_file.SUFFIX}"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        kept.append((path, len(data)))
        seen.add(digest)
        self.stats["bytes"] += len(data)
        self.stats["written"] += 1
        self._write_manifest()

    def _make_room(self, size: int) -> None:
        """Remove the newest later samples of the signature with the most until ``size`` fits."""
        while self.stats["bytes"] + size > self.cap:
            crowded = [s for s, kept in self._files.items() if len(kept) > 1]
            if not crowded:
                return
            victim = max(crowded, key=lambda s: len(self._files[s]))
            path, n = self._files[victim].pop()
            path.unlink(missing_ok=True)
            self.stats["bytes"] -= n
            self.stats["evicted"] += 1

    def _write_manifest(self) -> None:
        counts = list(self.calls.items())
        data = {
            "format": trace_file.FORMAT, "version": trace_file.VERSION, "subject": self.subject, "pid": self._pid,
            "every": self.every, "cap_mb": self.cap / 1e6, "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "stats": {k: v for k, v in self.stats.items() if k != "errors"}, "errors": self.stats["errors"][:10],
            "signatures": [{"signature": self.signatures.get(k) or signature_digest(k), "function": k[0], "calls": n,
                            "samples": len(self._files.get(self.signatures.get(k, ""), []))} for k, n in counts],
        }
        path = self.folder / f"calls-{self._pid}.json"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(path)


def _in_forked_child(recorder: weakref.ref) -> None:
    alive = recorder()
    if alive is not None:
        alive._after_fork()


def signature_digest(key: tuple) -> str:
    """The 12-hex-digit name of a signature (the same in every process)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:12]


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Wraps a module's functions the moment it is first imported, so that a later
    ``from MODULE import f`` already gets the wrapper."""

    def __init__(self, names: set, patch):
        self.names, self.patch = names, patch

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self.patch)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner, after):
        self.inner, self.after = inner, after

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.after(module)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def record(directory, *, module: Any = None, every: int = DEFAULT_EVERY, cap_mb: float = DEFAULT_CAP_MB,
           subject: str = subjects.DEFAULT) -> Recorder:
    """``with remap_ab.record(DIR):`` records the calls of ``subject``'s functions
    looked up on ``module`` (default: where vLLM's sparse-MLA backends look them up)
    into ``DIR``: every new signature's first call, then every ``every``-th call of
    it, at most ``cap_mb`` MB on disk. The functions are put back on exit."""
    return Recorder(directory, module=module, every=every, cap_mb=cap_mb, subject=subject)


ENV_DIR, ENV_EVERY, ENV_MB, ENV_MODULE = ("REMAP_AB_RECORD", "REMAP_AB_RECORD_EVERY", "REMAP_AB_RECORD_MB",
                                          "REMAP_AB_RECORD_MODULE")


def from_environment(env) -> Optional[Recorder]:
    """The recorder ``REMAP_AB_RECORD=DIR`` asks for (None: unset), started lazily on
    ``REMAP_AB_RECORD_MODULE`` (comma-separated; default the subject's module), stopped
    at exit. A bad setting is one line on stderr and no recording: the process runs on."""
    folder = env.get(ENV_DIR)
    if not folder:
        return None
    try:
        every = int(env.get(ENV_EVERY, DEFAULT_EVERY))
        cap = float(env.get(ENV_MB, DEFAULT_CAP_MB))
        modules = [m.strip() for m in env.get(ENV_MODULE, "").split(",") if m.strip()] or None
        rec = Recorder(folder, module=modules, every=every, cap_mb=cap).start(lazy=True)
    except (ValueError, UsageError, OSError) as exc:
        print(f"remap-ab: {ENV_DIR}={folder}: not recording: {exc}", file=sys.stderr)
        return None
    atexit.register(rec.stop)
    return rec
