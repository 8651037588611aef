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

On CUDA, a subject that declares ``no_host_sync`` also gets the ``sync`` check: the call
made once under sync debug mode "error" (``set_sync_debug_mode``), a host
synchronisation inside it a finding. The remap's call (subjects/remap/judge/call.py) uses
``poisoned_empty``, ``synchronize`` and ``set_sync_debug_mode`` from here; its other
CUDA-only checks (outputs ready on the caller's stream, a CUDA-graph capture whose replay
equals an eager call) are not generic yet.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

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
