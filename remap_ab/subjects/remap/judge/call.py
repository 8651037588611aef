"""Calling an implementation: the one way every path runs A, B or the oracle on a case.

A call
1. gives the implementation its own copy of the case's inputs, in the same layout
   (``PrivateInputs``), so nothing it does reaches the other side's inputs or the
   reference's, and afterwards every byte it was given can be compared with what went in;
2. runs it with ``torch.empty`` poisoned (an unwritten lane reads INT32_MAX instead of
   passing by luck), under an optional program schedule (CPU) and memcheck;
3. times it: CUDA events without a sync when the caller passes a ``CallClock`` (the
   batch engine), else a synchronize on each side and ``perf_counter``;
4. turns an exception, or a return that is no output, into the Output's ``error``;
5. checks the layout of what came back against A's (out_layout.py: row-major
   contiguous, or a caller-owned buffer's), on every call and every device;
6. on CUDA, checks what vLLM's decode path needs beyond the values: no host
   synchronisation inside the call (``sync``: the sweep asks for it on every call), and with
   ``production=True`` (``production_findings``) outputs ready on the caller's stream
   and a CUDA-graph capture whose replay on new inputs equals an eager call.

What a call found goes into the ``Output`` (``guard`` for input writes and aliasing,
``findings`` for the layout and production checks); ``compare`` turns all of it into
the verdict.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Optional

import torch

from remap_ab import runtime
from remap_ab.declare.calls import (
    STREAM_SLEEP_CYCLES,
    captured_into,
    late_launches,
    other_streams_delayed,
    poisoned_empty,
    same_shapes,
    synchronize,
)
from remap_ab.declare.calls import set_sync_debug_mode as _set_sync_debug_mode
from remap_ab.errors import exception_line
from remap_ab.interpreter import batched as interp_batched
from remap_ab.sanitizer import compute as sanitizer
from remap_ab.sanitizer import memcheck as memcheck_module
from remap_ab.status import Check
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, generate_inputs
from remap_ab.subjects.remap.judge.compare import CallFinding, Output
from remap_ab.subjects.remap.judge.out_layout import CallerBuffers, caller_buffers, layout_findings, wrapper_layouts

if TYPE_CHECKING:
    from remap_ab.subjects.remap.judge import registry
class CallClock:
    """Per-call timing: CUDA events on a GPU (no sync), perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        # Named once: Event.record() without a stream looks the current one up per call.
        self.stream = torch.cuda.current_stream(device) if self.cuda else None

    def start(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(self.stream)
            return ev
        return time.perf_counter()

    def elapsed_ms(self, start, end) -> float:
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) * 1e3


# ----------------------------------------------------------------------- private inputs


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """``[first, one past the last)`` storage element a (non-negatively strided) view reaches."""
    start = int(t.storage_offset())
    if t.numel() == 0:
        return start, start
    return start, start + int(sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) + 1


class _CopyPlan:
    """What ``PrivateInputs`` copies of a batch, worked out once for any number of
    copies: per case, per tensor ``(name, tensor, storage address, storage bytes, lo,
    hi, element size, span)``, where ``[lo, hi)`` is the case's part of the storage (in
    elements) and ``span`` what ``writes`` compares when the storage is copied whole
    (None: copied part by part)."""

    def __init__(self, inputs: list[CaseInputs]):
        rows = []
        used: dict[int, int] = {}
        users: dict[int, set] = {}
        for i, x in enumerate(inputs):
            row = []
            for name, t in x.tensors().items():
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                # The case's part of the storage: where a layout placed it (slack too), else the view's extent.
                part = x.owned.get(name)
                lo, hi = part[1:] if part is not None and part[0] == key else _extent(t)
                size = t.element_size()
                used[key] = used.get(key, 0) + (hi - lo) * size
                users.setdefault(key, set()).add(i)
                row.append((name, t, key, nbytes, lo, hi, size))
            rows.append(row)
        self.rows = []
        for row in rows:
            planned = []
            for name, t, key, nbytes, lo, hi, size in row:
                span = None
                if used[key] * 2 >= nbytes and nbytes % size == 0:
                    # A storage of this case alone is compared whole (its slack too); a shared one, the case's part.
                    span = (0, nbytes // size) if len(users[key]) == 1 else (lo, hi)
                planned.append((name, t, key, nbytes, lo, hi, size, span))
            self.rows.append(planned)


class PrivateInputs:
    """One implementation's own copy of a batch of cases' inputs, in their layouts.

    A case's part of a storage is where its layout placed it, slack included
    (``CaseInputs.owned``), else its view's extent. Each distinct storage is copied
    whole when the cases' parts are most of it (the layouts' buffers of a batch), so
    the copies keep the originals' strides and offsets; a storage the cases use little
    of (one case of a larger batch) is copied part by part. The originals are never
    given to anyone, so comparing a copy with its original after the call shows
    every element the implementation wrote, slack between strided rows included.
    Per storage one allocation and two views; all the copying is one
    ``_foreach_copy_`` and the comparison one ``cat`` per side (on a GPU a batch
    costs a few launches, not a few per tensor)."""

    def __init__(self, inputs: list[CaseInputs], plan: Optional[_CopyPlan] = None):
        plan = plan or _CopyPlan(inputs)
        whole: dict[int, tuple] = {}  # storage address -> (original, copy, copy's [first, last) byte)
        # Flat pairs any_changed compares: each whole storage once (not once per case
        # that views it), and each part-by-part copy.
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        # Per case: (name, original flat, copy flat, copy view, [lo, hi) of the flats compared by writes()).
        self._entries: list[list[tuple]] = []
        self._storages: list[dict[str, tuple[int, int]]] = []
        self.cases: list[CaseInputs] = []
        for row in plan.rows:
            views, entries, spans = {}, [], {}
            for name, t, key, nbytes, lo, hi, size, span in row:
                if span is not None:  # the storage copied whole
                    pair = whole.get(key)
                    if pair is None:
                        original = t.as_strided((nbytes // size,), (1,), 0)
                        copy = torch.empty(nbytes // size, dtype=t.dtype, device=t.device)
                        pair = whole[key] = (original, copy, (copy.data_ptr(), copy.data_ptr() + nbytes))
                        self._pairs.append((original, copy))
                    original, copy, spans[name] = pair
                    if copy.dtype != t.dtype:  # one storage viewed as two dtypes: one copy, seen as both
                        original, copy = original.view(t.dtype), copy.view(t.dtype)
                    view = copy.as_strided(t.shape, t.stride(), t.storage_offset())
                else:
                    original = t.as_strided((hi - lo,), (1,), lo)
                    copy = torch.empty(hi - lo, dtype=t.dtype, device=t.device)
                    self._pairs.append((original, copy))
                    view = copy.as_strided(t.shape, t.stride(), t.storage_offset() - lo)
                    span = (0, hi - lo)
                    spans[name] = (copy.data_ptr(), copy.data_ptr() + (hi - lo) * size)
                entries.append((name, original, copy, view, span))
                views[name] = view
            self.cases.append(CaseInputs(**views))
            self._entries.append(entries)
            self._storages.append(spans)
        if self._pairs:
            torch._foreach_copy_([c for _, c in self._pairs], [o for o, _ in self._pairs])

    @classmethod
    def each(cls, inputs: list[CaseInputs], n: int) -> list[PrivateInputs]:
        """``n`` private copies of the same batch (A's and B's), planned once."""
        plan = _CopyPlan(inputs)
        return [cls(inputs, plan) for _ in range(n)]

    def any_changed(self) -> torch.Tensor:
        """A 0-dim bool on the device: did any copied element change? (No host sync.)"""
        if not self._pairs:
            return torch.zeros((), dtype=torch.bool)
        if self._pairs[0][0].device.type == "cpu":
            # A host answer costs no sync here, and torch.equal reads each pair once
            # without the two concatenated copies (a quarter of the time at 4 MB).
            return torch.tensor(any(not torch.equal(o, c) for o, c in self._pairs))
        if len(self._pairs) == 1:
            ((o, c),) = self._pairs
            return (o != c).any()
        return (torch.cat([o for o, _ in self._pairs]) != torch.cat([c for _, c in self._pairs])).any()

    def writes(self, index: int, impl: str) -> list[CallFinding]:
        """What case ``index``'s call changed in its inputs, one finding per tensor;
        its evidence: the count, how many lie in the view and how many in the buffer's
        slack, and the first few elements before and after."""
        found = []
        for name, original, copy, view, (lo, hi) in self._entries[index]:
            changed = torch.nonzero(original[lo:hi] != copy[lo:hi]).flatten()
            if changed.numel() == 0:
                continue
            at = lo + int(changed[0])
            where = _element_name(view, at - view.storage_offset())
            in_view = int(_in_view(view, lo + changed - view.storage_offset()).sum())
            first = []
            for i in (lo + changed[:WRITES_SHOWN]).tolist():
                rel = i - view.storage_offset()
                inside = bool(_in_view(view, torch.tensor([rel]))[0])
                first.append({"at": _element_name(view, rel) if inside else _slack_name(view, rel), "in_view": inside,
                              "before": int(original[i]), "after": int(copy[i])})
            found.append(CallFinding(
                Check.INPUTS_WRITTEN,
                f"{impl} wrote into its input {name}: {changed.numel()} of its elements changed, the first at {where} "
                f"({int(original[at])} -> {int(copy[at])}); an implementation must not modify what it is given",
                {"tensor": name, "changed": int(changed.numel()), "in_view": in_view,
                 "in_slack": int(changed.numel()) - in_view, "shape": list(view.shape), "stride": list(view.stride()),
                 "strided": not view.is_contiguous(), "first": first},
            ))
        return found

    def storages(self, index: int) -> dict[str, tuple[int, int]]:
        """Case ``index``'s input tensors: name -> [first byte, one past the last) of their storage."""
        return self._storages[index]


WRITES_SHOWN = 8  # changed input elements a finding lists, before and after
# What the compute-sanitizer's child runs on a GPU (a "module:function": memcheck.py imports this module).
MEMCHECK_CHILD = "remap_ab.subjects.remap.parts.memcheck:run_cases"


def _in_view(view: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """For storage elements ``rel`` past the view's start: True where the element is
    one of the view's (False: the slack between or after its rows)."""
    if view.dim() == 0 or view.numel() == 0:
        return torch.zeros_like(rel, dtype=torch.bool)
    inside = rel >= 0
    rest = rel.clamp(min=0)
    for n, step in sorted(zip(view.shape, view.stride()), key=lambda d: -d[1]):
        if step == 0:
            continue
        i = rest // step
        inside &= i < n
        rest = rest - i * step
    return inside & (rest == 0)


def _slack_name(view: torch.Tensor, rel: int) -> str:
    """Where storage element ``rel`` past the view's start lies when it is none of the
    view's elements, in a few words (a report's table of changed elements)."""
    if rel < 0:
        return f"{-rel} before the view's first element"
    if view.dim() != 2:
        return f"buffer element {rel} past the view's start"
    (rows, cols), (rs, cs) = view.shape, view.stride()
    r, rem = divmod(rel, rs) if rs else (0, rel)
    last = (cols - 1) * cs
    if r >= rows:
        return f"after the last row, +{rel - ((rows - 1) * rs + last)}"
    if rem > last:
        return f"slack of row {r}, +{rem - last} past its last element"
    return f"row {r}, between its elements (+{rem})"


def _element_name(view: torch.Tensor, rel: int) -> str:
    """``[r, c]`` of the view element at storage element ``rel`` past the view's start,
    or where it lies when no element of the view is there (slack between rows)."""
    if rel < 0:
        return f"buffer element {-rel} before the view's first"
    if view.dim() == 1:
        step = view.stride(0)
        if rel % step == 0 and rel // step < view.shape[0]:
            return f"[{rel // step}]"
        if rel >= view.shape[0] * step:
            return f"buffer element {rel} past the view's start (after its last element)"
        return f"buffer element {rel} past the view's start (between its elements, not one of them)"
    rs, cs = view.stride()
    r, rem = divmod(rel, rs) if rs else (0, rel)
    if rem % cs == 0 and r < view.shape[0] and rem // cs < view.shape[1]:
        return f"[{r}, {rem // cs}]"
    if r >= view.shape[0]:
        return f"buffer element {rel} past the view's start (after its last row)"
    return f"buffer element {rel} past the view's start (slack between its elements, not one of them)"


def aliasing(out: Optional[torch.Tensor], counts: Optional[torch.Tensor], storages: dict, impl: str) -> list[CallFinding]:
    """A finding for each returned tensor whose storage overlaps an input's."""
    found = []
    for what, t in (("out", out), ("valid_counts", counts)):
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        s = t.untyped_storage()
        lo, hi = s.data_ptr(), s.data_ptr() + s.nbytes()
        for name, (a, b) in storages.items():
            if lo < b and a < hi:
                found.append(CallFinding(
                    Check.ALIASED,
                    f"{impl} returned {what} sharing storage with its input {name}; outputs must be new tensors",
                    {"output": what, "input": name, "output_bytes": [0, hi - lo],
                     "input_bytes": [a - lo, b - lo], "shared_bytes": min(hi, b) - max(lo, a)},
                ))
    return found


# ----------------------------------------------------------------------------- the call


@contextlib.contextmanager
def calling(device: torch.device, impl_name: str, watched: Optional[dict] = None, schedule=None, context=None):
    """The block every call of an implementation runs in (``call``, and the rejection
    calls of rejections.py, whose arguments are no case's): ``context`` entered first,
    then ``torch.empty`` poisoned and the program ``schedule`` (CPU); with ``watched``
    (name -> tensor) on the CPU, every memory access checked in the interpreter.
    Yields the memcheck session (None without), whose report outlives an exception."""
    executor: contextlib.AbstractContextManager = contextlib.nullcontext()
    if device.type == "cuda":
        runtime.triton_key_ready()
    elif os.environ.get("TRITON_INTERPRET") == "1":
        # The batched interpreter for this call only: a guest's process keeps Triton's own.
        executor = interp_batched.installed()
    watch: contextlib.AbstractContextManager = contextlib.nullcontext()
    if watched is not None and device.type != "cuda":
        watch = memcheck_module.watching(watched, impl_name)
    with executor, (context() if context else contextlib.nullcontext()), poisoned_empty(), \
            (schedule() if schedule else contextlib.nullcontext()), watch as session:
        yield session


def call(
    impl: registry.Implementation,
    config: CaseConfig,
    inputs: CaseInputs,
    schedule=None,
    memcheck: bool = False,
    *,
    private: Optional[PrivateInputs] = None,
    index: int = 0,
    clock: Optional[CallClock] = None,
    production: bool = False,
    sync: Optional[bool] = None,
    layout: Optional[dict] = None,
    context=None,
    settle: bool = True,
) -> Output:
    """Run ``config`` through ``impl`` the way every remap-ab path does (module docstring).

    ``private``: this implementation's copies of a batch's inputs (``inputs`` is case
    ``index`` of the originals); made here when not given. ``clock``: time with it and
    do not synchronise (the caller does, once per batch). ``memcheck``: every memory
    access checked (CPU: in the interpreter; GPU: compute-sanitizer in a child).
    ``production``: on CUDA, the graph and stream checks as well. ``sync``: on CUDA,
    the host-sync check (default: with ``production``; the sweep's and ``run``'s calls
    of A and B ask for it on every call). ``layout``: the
    strides each returned tensor must have (out_layout.Expected by name; default the
    wrappers' row-major contiguous layout of the case). ``context``: a
    context manager factory entered first, before the poisoning (a contending
    side-stream load is queued there); ``settle=False``: no device synchronisation
    before the call (it would drain that load first)."""
    contract = impl.order_contract(config)
    if private is None:
        private, index = PrivateInputs([inputs]), 0
    own = private.cases[index]
    device = inputs.device
    cuda = device.type == "cuda"
    sync = cuda and (production if sync is None else sync)
    findings: list[CallFinding] = []
    session = None
    span = None
    seconds = 0.0
    buffers = caller_buffers(config, device)
    try:
        with calling(device, impl.name, own.tensors() if memcheck else None, schedule, context) as session:
            if clock is not None:
                out, counts, span = _sync_checked(impl, config, own, sync, findings, clock, buffers)
            else:
                if settle:
                    synchronize(device)
                start = time.perf_counter()
                out, counts, _ = _sync_checked(impl, config, own, sync, findings, buffers=buffers)
                synchronize(device)
                seconds = time.perf_counter() - start
    except Exception as exc:  # a broken implementation is a verdict, not a crash
        report = session.report if session is not None else None
        return Output(impl.name, None, None, contract, error=exception_line(exc)[:500], memcheck=report,
                      guard=(private, index), findings=findings)
    report = session.report if session is not None else None
    if memcheck and cuda:
        report = sanitizer.check_case(impl.name, config, inputs, child=MEMCHECK_CHILD)
    findings += aliasing(out, counts, private.storages(index), impl.name)
    if buffers is not None:  # the buffers given must come back: their layout is theirs
        findings += buffers.findings(config, out, counts, impl.name)
    else:
        findings += layout_findings(out, counts, wrapper_layouts(config) if layout is None else layout, impl.name)
    if production and cuda:
        findings += production_findings(impl, config, inputs, out, counts)
    checks = (("sync",) if sync else ()) + (("stream", "graph") if production and cuda else ())
    o = Output(impl.name, out, counts, contract, seconds=seconds, memcheck=report, guard=(private, index),
               findings=findings, checks=checks)
    o.span = span
    return o


_SYNC_WORDS = "synchronizing"


def _sync_checked(impl, config: CaseConfig, inputs: CaseInputs, check: bool, findings: list,
                  clock: Optional[CallClock] = None, buffers: Optional[CallerBuffers] = None):
    """``(out, counts, span)`` of ``impl(config, inputs, buffers)``; with ``check``
    (CUDA), under sync debug mode "error": a host synchronisation inside the call
    becomes a ``sync`` finding and the call is made again without the mode (on buffers
    poisoned again), so its values are still judged. ``span``: the ``clock``'s marks
    around the call that counts (None without a clock); the mode's switches fall
    outside them."""
    if not check:
        return _timed(impl, config, inputs, clock, buffers)
    previous = torch.cuda.get_sync_debug_mode()
    _set_sync_debug_mode(2)  # "error"
    try:
        return _timed(impl, config, inputs, clock, buffers)
    except RuntimeError as exc:
        if _SYNC_WORDS not in str(exc):
            raise
        frame = sync_frame(exc, impl)
        findings.append(CallFinding(
            Check.SYNC,
            f"{impl.name} synchronises with the host inside the call ({exception_line(exc)[:200]})"
            + (f" at {frame['file']}:{frame['line']} in {frame['function']}" if frame else "")
            + "; vLLM runs it inside CUDA graphs, where a host sync fails the capture",
            {"error": exception_line(exc)[:300], **({"frame": frame} if frame else {})},
        ))
    finally:
        _set_sync_debug_mode(previous)
    if buffers is not None:
        buffers.poison()
    return _timed(impl, config, inputs, clock, buffers)


def _timed(impl, config: CaseConfig, inputs: CaseInputs, clock: Optional[CallClock], buffers=None):
    if clock is None:
        return (*impl(config, inputs, buffers), None)
    start = clock.start()
    out, counts = impl(config, inputs, buffers)
    return out, counts, (start, clock.start())




def sync_frame(exc: BaseException, impl) -> Optional[dict]:
    """The innermost frame of ``exc``'s traceback in the implementation's own code
    (its module's file or package folder; else the innermost outside torch and
    remap-ab): where the host sync was asked for."""
    import os
    import traceback

    file = getattr(getattr(impl, "module", None), "__file__", None) or ""
    home = os.path.dirname(os.path.abspath(file)) if file.endswith("__init__.py") else os.path.abspath(file)
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if home and os.path.abspath(f.filename).startswith(home)]
    torch_home = os.path.dirname(os.path.abspath(torch.__file__))
    mine = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the remap's package, not only judge/
    others = [f for f in frames if not os.path.abspath(f.filename).startswith((torch_home, mine))]
    if not (own or others):
        return None
    pick = (own or others)[-1]
    return {"file": pick.filename, "line": pick.lineno or 0, "function": pick.name, "code": (pick.line or "").strip()}


# ------------------------------------------------------------------ production checks

def _rows_sorted(t: torch.Tensor) -> torch.Tensor:
    return torch.sort(t, dim=-1).values if t.dim() == 2 else t


def _same(x, y, ordered: bool) -> bool:
    if x is None or y is None:
        return x is y
    if x.shape != y.shape:
        return False
    if not ordered:
        x, y = _rows_sorted(x), _rows_sorted(y)
    return bool(torch.equal(x, y))


def _first_difference(x: torch.Tensor, y: torch.Tensor) -> str:
    d = _difference(x, y, "x", "y")
    if not d:
        return ""
    return f" (first at {d['at']}: {d['x']} vs {d['y']}; {d['differing']} elements differ)"


def _difference(x, y, x_is: str, y_is: str) -> dict:
    """The first element where ``x`` and ``y`` differ, as evidence: ``at``, both
    values under their names, and how many elements differ ({} when none does)."""
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.shape != y.shape:
        return {}
    bad = torch.nonzero(x != y)
    if bad.numel() == 0:
        return {}
    at = tuple(int(i) for i in bad[0])
    return {"at": list(at), x_is: int(x[at]), y_is: int(y[at]), "differing": int(bad.shape[0])}


def production_findings(impl, config: CaseConfig, inputs: CaseInputs, out, counts) -> list[CallFinding]:
    """The stream and graph checks of one call on CUDA (the sync check runs inside the
    primary call); ``out``/``counts`` are that eager call's outputs."""
    ordered = not config.compacts or impl.order_contract(config).ordered
    found = []
    found += _stream_check(impl, config, inputs, out, counts, ordered)
    found += _graph_check(impl, config, inputs, ordered)
    return found


def _stream_check(impl, config, inputs, out, counts, ordered) -> list[CallFinding]:
    """The call made on a stream of the caller's own that stays busy past the call's
    return, read there twice: a snapshot of its outputs queued right after the call,
    and an event at the return, which must not complete before any kernel the call
    launched on another stream (``declare.calls.other_streams_delayed``'s events). The event needs
    no memory to differ: a snapshot alone misses work left on another stream when the
    memory it reads already holds the same values (a cached block that an earlier,
    correct output was freed from)."""
    own = PrivateInputs([inputs]).cases[0]
    caller = torch.cuda.Stream(inputs.device)
    caller.wait_stream(torch.cuda.current_stream(inputs.device))
    try:
        with poisoned_empty(), torch.cuda.stream(caller), other_streams_delayed(caller) as elsewhere:
            buffers = caller_buffers(config, inputs.device)
            torch.cuda._sleep(STREAM_SLEEP_CYCLES)  # keeps the caller's stream busy past the call's return
            got, got_counts = impl(config, own, buffers)
            returned = torch.cuda.Event(enable_timing=True)
            returned.record(caller)
            snap = got.clone()
            snap_counts = got_counts.clone() if got_counts is not None else None
        caller.synchronize()  # the caller's stream only: what a caller reading there would see
    except Exception as exc:
        return [CallFinding(Check.STREAM, f"{impl.name} raised when called on a non-default stream: "
                                          f"{exception_line(exc)[:200]}", {"raised": exception_line(exc)[:300]})]
    torch.cuda.synchronize(inputs.device)
    problems = []
    late = [returned.elapsed_time(e) for e in elsewhere]
    if not (_same(snap, got, ordered) and _same(snap_counts, got_counts, True)):
        evidence = _stream_evidence(snap, got, snap_counts, got_counts, ordered, "on the caller's stream", "after a synchronize")
        problems.append(("outputs read on the caller's stream right after the call differ from the same outputs "
                         "after a device-wide synchronize" + (_first_difference(snap, got) if ordered else ""), evidence))
    elif any(ms > 0 for ms in late):
        problems.append(late_launches(late))
    elif not (_same(got, out, ordered) and _same(got_counts, counts, True)):
        evidence = _stream_evidence(got, out, got_counts, counts, ordered, "on a side stream", "on the default stream")
        problems.append(("outputs of a call on a non-default stream differ from the same call on the default stream"
                         + (_first_difference(got, out) if ordered else ""), evidence))
    return [CallFinding(Check.STREAM, f"{impl.name}: {p}; the call leaves work on another stream without making the "
                                      f"caller's stream wait", e) for p, e in problems]


def _stream_evidence(x, y, x_counts, y_counts, ordered: bool, x_is: str, y_is: str) -> dict:
    """Evidence of a stream or graph finding: what the two readings are, and the first
    element where the outputs (else the counts) differ; in an unordered compaction
    only the counts are compared element by element."""
    evidence: dict = {"compared": [x_is, y_is]}
    out = _difference(x, y, x_is, y_is) if ordered else {}
    if out:
        evidence["out"] = out
    counts = _difference(x_counts, y_counts, x_is, y_is)
    if counts:
        evidence["valid_counts"] = counts
    return evidence


_FRESH: dict = {}  # (config, device) -> the fresh inputs its graph checks use (A's and then B's)


def fresh_configs(configs: list) -> list:
    """The cases whose inputs the graph checks of ``configs`` replay on: the next seed."""
    return [c.replace(seed=c.seed + 1) for c in configs]


def remember_fresh_inputs(configs: list, made: list) -> None:
    """Hand ``made`` (the inputs of ``fresh_configs(configs)``, generated with a batch's
    own: a few launches more, not a few dozen per case) to ``fresh_inputs``."""
    _FRESH.clear()
    _FRESH.update({(c, str(x.device)): x for c, x in zip(configs, made)})  # the device as a case's inputs name it


def fresh_inputs(config: CaseConfig, device) -> CaseInputs:
    """Another case's inputs of the same shapes (the next seed), in the same layout.
    Nobody writes into them (the graph check copies them, the eager call gets its own)."""

    key = (config, str(device))
    if key not in _FRESH:
        _FRESH.clear()
        _FRESH[key] = generate_inputs(config.replace(seed=config.seed + 1), device=device)
    return _FRESH[key]


def _graph_check(impl, config, inputs, ordered) -> list[CallFinding]:
    dev = inputs.device
    static = PrivateInputs([inputs]).cases[0]
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    graph = torch.cuda.CUDAGraph()
    # Caller-owned outputs (SPEC §10): one set of buffers for the warm-up, the capture
    # and the replay, as a caller keeping graph addresses stable holds them.
    buffers = caller_buffers(config, dev)
    try:
        with poisoned_empty():
            with torch.cuda.stream(side):
                impl(config, static, buffers)  # warm-up: compiles and caches outside the capture
            captured, captured_counts = captured_into(graph, side, lambda: impl(config, static, buffers))
    except Exception as exc:
        torch.cuda.synchronize(dev)
        return [CallFinding(Check.GRAPH, f"{impl.name} cannot be captured in a CUDA graph: {exception_line(exc)[:240]}; "
                                         f"vLLM's decode path runs this call inside CUDA graphs",
                            {"capture_failed": exception_line(exc)[:300],
                             **({"frame": f} if (f := sync_frame(exc, impl)) else {})})]
    fresh = fresh_inputs(config, dev)
    if not same_shapes(fresh.tensors(), inputs.tensors()):  # recorded inputs (a trace) the generator does not remake
        fresh = inputs
    for name, t in static.tensors().items():
        t.copy_(getattr(fresh, name))
    if buffers is not None:
        buffers.poison()  # the replay must fill them again (and zero stale counts where it accumulates)
    graph.replay()
    torch.cuda.synchronize(dev)
    with poisoned_empty():
        eager, eager_counts = impl(config, PrivateInputs([fresh]).cases[0])
    torch.cuda.synchronize(dev)
    found = []
    if buffers is not None:
        found = [CallFinding(Check.GRAPH, f"{f.message} (in the CUDA graph's replay)")
                 for f in buffers.findings(config, captured, captured_counts, impl.name)]
    if _same(captured, eager, ordered) and _same(captured_counts, eager_counts, True):
        return found
    detail = _first_difference(captured, eager) if ordered and captured.shape == eager.shape else ""
    evidence = _stream_evidence(captured, eager, captured_counts, eager_counts, ordered, "graph replay", "eager call")
    on = "the inputs it was captured with" if fresh is inputs else "new inputs"
    return found + [CallFinding(Check.GRAPH, f"{impl.name}: replaying its captured CUDA graph on {on} gives other outputs "
                                     f"than an eager call on them{detail}; the call bakes in something of the "
                                     f"inputs it was captured with", evidence)]
