"""Cold-L2 timing: every call of a graph reads its inputs from another copy, so that by
the time a copy is read again the other copies have pushed it out of L2, as in a real
decode step, where the index tensors were last touched a whole layer ago.

The number of copies is chosen so that their bytes together reach ``FOOTPRINT_OVER_L2``
times the L2 size; one graph replay cycles through all of them. Tiny inputs would need
tens of thousands of copies (and graph nodes); the count is capped at ``MAX_SETS`` and
the row then says how much of L2 the rotation really covered (``footprint / L2``): below
1 the "cold" figure is partly warm, and the page says so.

The copies are bitwise clones of the inputs the agreement gate judged, made with one
allocation per tensor (a stacked copy, each set a view), so the gate covers all of them.

An input set is any subject's: an object whose ``tensors()`` names every tensor the
kernel reads, and whose type is built back from them by keyword.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import torch

H200_L2_BYTES = 60 * 1024 * 1024  # what the brief gives for the H200; the device's own figure wins
FOOTPRINT_OVER_L2 = 2.0  # twice L2: LRU-like replacement has evicted a copy before it is read again
MAX_SETS = 16384



class HasTensors(Protocol):
    def tensors(self) -> dict: ...


InputSet = TypeVar("InputSet", bound=HasTensors)


def l2_bytes(device=None) -> int:
    """The device's L2 size as torch reports it, else the H200 figure."""
    try:
        size = int(getattr(torch.cuda.get_device_properties(device or torch.cuda.current_device()), "L2_cache_size", 0))
    except Exception:
        size = 0
    return size if size > 0 else H200_L2_BYTES


def input_bytes(inputs: HasTensors) -> int:
    """Bytes of one input set (every tensor the kernel reads)."""
    return sum(t.numel() * t.element_size() for t in inputs.tensors().values())


def sets_needed(bytes_per_set: int, l2: int, over: float = FOOTPRINT_OVER_L2, cap: int = MAX_SETS) -> int:
    """Copies whose bytes reach ``over`` x L2; at least 2, at most ``cap``."""
    if bytes_per_set <= 0:
        raise ValueError(f"bytes_per_set={bytes_per_set} must be positive")
    return max(2, min(cap, math.ceil(over * l2 / bytes_per_set)))


def footprint_over_l2(bytes_per_set: int, sets: int, l2: int) -> float:
    return bytes_per_set * sets / l2


def rotating_inputs(inputs: InputSet, sets: int) -> list[InputSet]:
    """``sets`` bitwise copies of ``inputs``, one stacked allocation per tensor."""
    stacked: dict = {name: t.unsqueeze(0).expand(sets, *t.shape).contiguous() for name, t in inputs.tensors().items()}
    rebuild: Any = type(inputs)
    return [rebuild(**{name: s[i] for name, s in stacked.items()}) for i in range(sets)]


def rotating_call(call: Callable[[InputSet], object], copies: list[InputSet]) -> Callable[[], object]:
    """A zero-argument callable whose k-th call uses copy k mod len(copies): captured
    into a graph, call k of every replay reads copy k mod n."""
    state = {"k": 0}

    def fn():
        x = copies[state["k"] % len(copies)]
        state["k"] += 1
        return call(x)

    return fn
