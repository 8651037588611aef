"""The one call primitive of a declared subject, and the checks every tensor kernel's
call gets.

``call(fn, inputs, names, device)``:
1. gives ``fn`` its own copy of every input tensor, in the same layout (shape, strides,
   offset), so nothing it does reaches the other side's or the oracle's inputs and
   afterwards every element it was given can be compared with what went in;
2. runs it with ``torch.empty`` poisoned (``poisoned_empty``: an unwritten element reads a
   sentinel instead of passing by luck), synchronising with the device around it on a
   GPU, timed;
3. turns an exception, or a return that is not the declared outputs, into ``error``;
4. finds, per output tensor, storage shared with an input (``aliased``) and, per input,
   elements it changed (``inputs_written``), with the first changed element as evidence.
``layout_findings(a, b)`` is the third check: B's output strides against A's.

On CUDA two more checks run on the calls a subject samples (``stream_findings``,
``graph_findings``): the call made on a busy stream of the caller's own, its outputs read
there at once (and every kernel it launched elsewhere finished by then); and, for a side
the subject declares ``no_host_sync``, the call captured in a CUDA graph whose replay on
other inputs of the same shapes equals an eager call on them. The sync check (every call
of such a side): the call made once under sync debug mode "error"
(``set_sync_debug_mode``), a host synchronisation inside it a finding. The remap's call
(subjects/remap/judge/call.py) uses these pieces with its own buffers and evidence.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from remap_ab import runtime
from remap_ab.declare.compare import bit_for_bit
from remap_ab.errors import exception_line
from remap_ab.status import Check


@contextlib.contextmanager
def poisoned_empty():
    """torch.empty and friends return sentinel-filled memory inside this block."""
    import torch

    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    _set_deterministic(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        _set_deterministic(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # torch.use_deterministic_algorithms also mirrors the flag into inductor's config,
    # importing torch._inductor to do so: seconds per process, for a compiler remap-ab
    # never uses. The C-level switch is all the poisoning reads.
    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def synchronize(device: Any) -> None:
    """Wait for ``device``'s queued work (a no-op on the CPU)."""
    import torch

    if (device.type if isinstance(device, torch.device) else torch.device(device).type) == "cuda":
        torch.cuda.synchronize(device)


SYNC_WORDS = "synchronizing"  # in the RuntimeError sync debug mode "error" raises
_switch: Any = None  # torch's C switch of the sync debug mode, found on first use
_switched = False


def set_sync_debug_mode(mode: int) -> None:
    """CUDA's sync debug mode (2: a host synchronisation raises), through the C switch:
    torch.cuda's wrapper re-checks its lazy init on every call. The switch warns that
    the mode is a prototype on its first use in a process only (silenced here); a call
    check switches twice a call, so later switches skip the filter."""
    global _switch, _switched
    if _switched:
        _switch(mode)
        return
    import warnings

    import torch

    _switch = getattr(torch._C, "_cuda_set_sync_debug_mode", None) or torch.cuda.set_sync_debug_mode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _switch(mode)
    _switched = True


@dataclass
class Finding:
    """What a call check found: its check (``status.Check``), one line, and the side
    whose call it is ("a", "b"; set by the judge)."""

    check: str
    line: str
    side: str = ""


@dataclass
class Called:
    """One call's outcome: its outputs by name (None when it raised or returned no
    outputs, ``error`` then saying why), its milliseconds, and the call checks' findings."""

    outputs: Optional[dict]
    error: str = ""
    ms: float = 0.0
    findings: list = field(default_factory=list)


def private_copy(t: Any) -> Any:
    """A copy of tensor ``t`` in its layout: the same shape, strides and offset within
    its own storage (a non-tensor as it is)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    nbytes = t.untyped_storage().nbytes()
    if nbytes % t.element_size():
        return t.clone()
    whole = t.as_strided((nbytes // t.element_size(),), (1,), 0)
    return whole.clone().as_strided(t.shape, t.stride(), t.storage_offset())


def as_outputs(value: Any, names: Sequence[str]) -> dict:
    """What an implementation returned as ``{name: value}``: one value for one output, a
    tuple or list in ``names``' order, or a dict with exactly those keys; TypeError otherwise."""
    if isinstance(value, dict):
        if set(value) != set(names):
            raise TypeError(f"returned a dict of {sorted(value)}, not the outputs {', '.join(names)}")
        return {n: value[n] for n in names}
    if len(names) == 1 and not isinstance(value, (tuple, list)):
        return {names[0]: value}
    if isinstance(value, (tuple, list)) and len(value) == len(names):
        return dict(zip(names, value))
    raise TypeError(f"returned {type(value).__name__}, not the {len(names)} outputs {', '.join(names)}")


def _first_change(before: Any, after: Any) -> str:
    import torch

    changed = torch.nonzero((before != after).reshape(before.shape))
    at = tuple(int(i) for i in changed[0].tolist()) if len(changed) else ()
    return (f"{len(changed)} of its {before.numel()} elements changed, the first at {list(at)} "
            f"({before[at].item()} -> {after[at].item()})")


def call(fn: Callable, inputs: dict, names: Sequence[str], device: Any, who: str, checks: bool = True,
         no_host_sync: bool = False) -> Called:
    """``fn(**inputs)`` on private copies, as the module docstring says; ``who`` names
    the side in the findings ("A", "B", "the oracle"); ``checks``: run the call checks;
    ``no_host_sync`` (with ``checks``, on CUDA): the call runs under sync debug mode
    "error", a host synchronisation inside it is a ``sync`` finding, and the call is
    made again without the mode (on fresh copies) so its values are still judged."""
    import torch

    found = []
    if checks and no_host_sync and torch.device(device).type == "cuda":
        sync_error = _sync_raised(fn, inputs, device)
        if sync_error:
            found.append(Finding(Check.SYNC, f"{who} synchronises with the host inside the call ({sync_error[:200]}); "
                                 "a call captured in a CUDA graph cannot"))
    given = {k: private_copy(v) for k, v in inputs.items()}
    synchronize(device)
    start = time.perf_counter()
    try:
        with poisoned_empty():
            value = fn(**given)
        synchronize(device)
        ms = (time.perf_counter() - start) * 1e3
        outputs = as_outputs(value, names)
    except Exception as exc:
        return Called(None, f"{who} raised {exception_line(exc)}"[:400], (time.perf_counter() - start) * 1e3)
    if checks:
        for name, t in inputs.items():
            if not isinstance(t, torch.Tensor):
                continue
            if not _bits_equal(t, given[name]):
                found.append(Finding(Check.INPUTS_WRITTEN, f"{who} wrote into its input {name}: "
                                     f"{_first_change(t, given[name])}; an implementation must not modify what it is given"))
            elif not _bits_equal(_storage(t), _storage(given[name])):
                found.append(Finding(Check.INPUTS_WRITTEN, f"{who} wrote into the storage of its input {name} outside "
                                     "the view it was given (between or around its strided elements)"))
        storages = {k: v.untyped_storage().data_ptr() for k, v in given.items()
                    if isinstance(v, torch.Tensor) and v.untyped_storage().nbytes()}
        for name, out in outputs.items():
            if isinstance(out, torch.Tensor) and out.untyped_storage().nbytes():
                shared = [k for k, ptr in storages.items() if ptr == out.untyped_storage().data_ptr()]
                if shared:
                    found.append(Finding(Check.ALIASED, f"{who}'s output {name} shares storage with its input "
                                         f"{shared[0]}: a caller that reuses the input overwrites the output"))
    return Called(outputs, "", ms, found)


def _sync_raised(fn: Callable, inputs: dict, device: Any) -> str:
    """The error of a host synchronisation inside ``fn`` (on its own copies), "" none.
    Anything else it raises is left to the judged call that follows."""
    import torch

    given = {k: private_copy(v) for k, v in inputs.items()}
    synchronize(device)
    previous = torch.cuda.get_sync_debug_mode()
    set_sync_debug_mode(2)
    try:
        with poisoned_empty():
            fn(**given)
    except RuntimeError as exc:
        if SYNC_WORDS in str(exc):
            return exception_line(exc)
    except Exception:
        pass
    finally:
        set_sync_debug_mode(previous)
    return ""


def _storage(t: Any) -> Any:
    """Every element of ``t``'s storage, flat (its view's slack included)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def _bits_equal(x: Any, y: Any) -> bool:

    return not bool(bit_for_bit(x, y).any()) if x.numel() else True


def layout_findings(a: Called, b: Called, who: str = "B") -> list[Finding]:
    """B's output tensors whose strides differ from A's (of the same shape): a caller
    written for A's layout reads B's wrong."""
    import torch

    found = []
    for name, ref in (a.outputs or {}).items():
        got = (b.outputs or {}).get(name)
        if isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor) and got.shape == ref.shape \
                and got.numel() > 1 and got.stride() != ref.stride():
            found.append(Finding(Check.LAYOUT, f"{who}'s output {name} has strides {list(got.stride())}, A's "
                                 f"{list(ref.stride())}: a caller written for A's layout reads it wrong", "b"))
    return found


# Long enough that a kernel left on another stream is still queued when the caller's
# stream reads the outputs; short enough to cost little per sampled case.
STREAM_SLEEP_CYCLES = 1_000_000  # about 0.5 ms on an H200


@contextlib.contextmanager
def other_streams_delayed(caller: Any):
    """Every Triton launch made on a stream other than ``caller`` waits behind a sleep
    queued there first, twice as long as the caller's: a kernel the caller's stream was
    not made to wait for is then still pending when the caller reads, whatever the
    GPU's scheduling. Yields a list that gets a timing event recorded right after each
    such launch, on its stream."""
    import torch

    launched: list = []

    def delayed(launch, fn, *args, grid, warmup, **kwargs):
        if warmup or torch.cuda.current_stream(caller.device) == caller:
            return launch(fn, *args, grid=grid, warmup=warmup, **kwargs)
        torch.cuda._sleep(2 * STREAM_SLEEP_CYCLES)
        kernel = launch(fn, *args, grid=grid, warmup=warmup, **kwargs)
        done = torch.cuda.Event(enable_timing=True)
        done.record()
        launched.append(done)
        return kernel

    with runtime.jit_launches_through(delayed):
        yield launched


def late_launches(late: list) -> tuple[str, dict]:
    """The stream finding's words and evidence when launches on other streams finished
    ``late`` ms after the call's return (some > 0) while the outputs agreed."""
    return (f"a kernel it launched on another stream finished {max(late):.3f} ms after the call returned on the "
            f"caller's stream (the outputs read there happened to hold the final values already)",
            {"finished_after_ms": round(max(late), 3), "launches_on_other_streams": len(late),
             "finished_after_the_return": sum(ms > 0 for ms in late)})


def captured_into(graph: Any, stream: Any, fn: Callable) -> Any:
    """``fn()`` captured into ``graph`` on ``stream``. Not ``torch.cuda.graph``: that
    empties the caching allocator before each capture, so every sampled case would make
    the next allocations cudaMalloc again. "thread_local": a call this thread makes that
    a capture forbids fails it; other threads' copies on other streams do not."""
    import torch

    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            result = fn()
        except BaseException:
            with contextlib.suppress(Exception):  # the capture is invalid already: end it, keep fn's error
                graph.capture_end()
            _recover_from_a_failed_capture(stream.device)
            raise
        graph.capture_end()
    torch.cuda.current_stream(stream.device).wait_stream(stream)
    return result


def _recover_from_a_failed_capture(device: Any) -> None:
    """A capture that fails ends without torch's epilogue: the device's random generator
    stays marked as capturing and every later draw raises "Offset increment outside
    graph capture". One small capture that succeeds runs the epilogue."""
    import torch

    with contextlib.suppress(Exception):
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            scratch = torch.zeros(1, device=device)
            graph.capture_begin(capture_error_mode="thread_local")
            scratch.add_(1)
            graph.capture_end()
        torch.cuda.synchronize(device)


def _tensors(outputs: dict) -> dict:
    import torch

    return {k: v for k, v in outputs.items() if isinstance(v, torch.Tensor)}


def first_difference(x: dict, y: dict) -> str:
    """Where two readings of the same outputs first differ ("" where they agree bit for
    bit): the output, the element, both values and how many elements differ."""
    import torch

    for name, t in _tensors(x).items():
        other = y.get(name)
        if not isinstance(other, torch.Tensor) or other.shape != t.shape or other.dtype != t.dtype:
            return f"output {name} is {tuple(t.shape)} {t.dtype} in one reading and not in the other"
        if not t.numel():
            continue
        bad = torch.nonzero(bit_for_bit(t, other).reshape(t.shape))
        if len(bad):
            at = tuple(int(i) for i in bad[0].tolist())
            return f"output {name} at {list(at)}: {t[at].item()} vs {other[at].item()} ({len(bad)} elements differ)"
    return ""


def stream_findings(fn: Callable, inputs: dict, names: Sequence[str], device: Any, who: str, eager: dict) -> list[Finding]:
    """The stream check (CUDA): ``fn`` called on a stream of the caller's own that stays
    busy past the call's return; its outputs read there at once must equal the same
    outputs after a device-wide synchronize, no kernel it launched on another stream may
    finish after its return, and the outputs must equal ``eager`` (the same call on the
    default stream)."""
    import torch

    own = {k: private_copy(v) for k, v in inputs.items()}
    caller = torch.cuda.Stream(device)
    caller.wait_stream(torch.cuda.current_stream(device))
    try:
        with poisoned_empty(), torch.cuda.stream(caller), other_streams_delayed(caller) as elsewhere:
            torch.cuda._sleep(STREAM_SLEEP_CYCLES)  # keeps the caller's stream busy past the call's return
            got = as_outputs(fn(**own), names)
            returned = torch.cuda.Event(enable_timing=True)
            returned.record(caller)
            snap = {k: v.clone() for k, v in _tensors(got).items()}
        caller.synchronize()  # the caller's stream only: what a caller reading there sees
    except Exception as exc:
        return [Finding(Check.STREAM, f"{who} raised when called on a non-default stream: {exception_line(exc)[:200]}")]
    torch.cuda.synchronize(device)
    late = [returned.elapsed_time(e) for e in elsewhere]
    tail = "; the call leaves work on another stream without making the caller's stream wait"
    if first_difference(snap, got):
        return [Finding(Check.STREAM, f"{who}: outputs read on the caller's stream right after the call differ from the "
                                      f"same outputs after a device-wide synchronize ({first_difference(snap, got)}){tail}")]
    if any(ms > 0 for ms in late):
        return [Finding(Check.STREAM, f"{who}: {late_launches(late)[0]}{tail}")]
    if first_difference(_tensors(got), eager):
        return [Finding(Check.STREAM, f"{who}: outputs of a call on a non-default stream differ from the same call on "
                                      f"the default stream ({first_difference(_tensors(got), eager)}){tail}")]
    return []


def same_shapes(x: dict, y: dict) -> bool:
    """Whether two sets of inputs could feed one captured graph: the same names, tensors
    of the same shapes, strides and dtypes, every other argument equal."""
    import torch

    if set(x) != set(y):
        return False
    for k, v in x.items():
        w = y[k]
        if isinstance(v, torch.Tensor):
            if not isinstance(w, torch.Tensor) or (v.shape, v.stride(), v.dtype) != (w.shape, w.stride(), w.dtype):
                return False
        elif v != w:
            return False
    return True


def graph_findings(fn: Callable, inputs: dict, fresh: Optional[dict], names: Sequence[str], device: Any,
                   who: str) -> list[Finding]:
    """The graph check (CUDA): ``fn`` warmed up, captured in a CUDA graph on private copies
    of ``inputs``, the copies then overwritten with ``fresh`` (other inputs of the same
    shapes; None or of other shapes: the same values again) and its outputs with a
    sentinel, and the graph replayed: the replay must equal an eager call on those inputs.
    A capture that fails is a finding too: vLLM runs such calls inside CUDA graphs."""
    import torch

    static = {k: private_copy(v) for k, v in inputs.items()}
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    graph = torch.cuda.CUDAGraph()
    try:
        with poisoned_empty():
            with torch.cuda.stream(side):
                fn(**static)  # warm-up: compiles and caches outside the capture
            got = as_outputs(captured_into(graph, side, lambda: fn(**static)), names)
    except Exception as exc:
        torch.cuda.synchronize(device)
        return [Finding(Check.GRAPH, f"{who} cannot be captured in a CUDA graph: {exception_line(exc)[:240]}; "
                                     "a call vLLM captures in a graph must not synchronise with the host or allocate on it")]
    replayed_on = fresh if fresh is not None and same_shapes(fresh, inputs) else inputs
    for k, t in static.items():
        if isinstance(t, torch.Tensor):
            t.copy_(replayed_on[k])
    for t in _tensors(got).values():
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.dtype != torch.bool:
            t.fill_(torch.iinfo(t.dtype).min)
    graph.replay()
    torch.cuda.synchronize(device)
    got = {k: v.clone() for k, v in _tensors(got).items()}  # the eager call may hand back the same tensors
    with poisoned_empty():
        eager = as_outputs(fn(**{k: private_copy(v) for k, v in replayed_on.items()}), names)
    torch.cuda.synchronize(device)
    differs = first_difference(got, _tensors(eager))
    if not differs:
        return []
    on = "new inputs of the same shapes" if replayed_on is not inputs else "the inputs it was captured with"
    return [Finding(Check.GRAPH, f"{who}: replaying its captured CUDA graph on {on} gives other outputs than an eager "
                                 f"call on them ({differs}); the call bakes in something of the inputs it was captured "
                                 "with, or leaves outputs unwritten on a replay")]
