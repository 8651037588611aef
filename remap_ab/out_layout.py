"""The outputs' layout: the strides a caller reads ``out`` and ``valid_counts`` with.

A caller does not read the result through torch's indexing: the attention kernels
take its data pointer and walk it with the strides of A's layout. Today's wrappers
allocate row-major contiguous outputs (``empty_like`` of a contiguous
``token_indices``), so ``out[r, c]`` sits at ``r * K + c``; an output with the right
values in other strides (say column-major) is read as other rows' slots. Where a call
hands over its own buffer, that buffer's strides are the layout instead.

The expected strides are data (``Expected``, per tensor name): the wrappers' layout
comes from the case (``wrapper_layouts``), a caller-owned buffer's from the buffer
(``caller_buffer``). ``layout_findings`` compares what came back with them; call.py
runs it on every call, on every device, and ``compare`` makes each finding a
``layout`` failure of the side that returned it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab.compare import CallFinding
from remap_ab.status import Check

WRAPPER_LAYOUT = "row-major contiguous, as the wrappers allocate it"


@dataclass(frozen=True)
class Expected:
    """The layout a returned tensor must have: its shape and strides (in elements),
    and where that layout comes from, in words."""

    shape: tuple
    strides: tuple
    why: str = WRAPPER_LAYOUT


def row_major(shape) -> tuple:
    """The strides of a row-major contiguous tensor of ``shape``."""
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def wrapper_layouts(config) -> dict[str, Expected]:
    """What today's wrappers return for ``config`` (a ``CaseConfig``): ``out`` [T, K]
    and ``valid_counts`` [T], both row-major contiguous."""
    t, k = config.tokens, config.topk
    return {"out": Expected((t, k), row_major((t, k))), "valid_counts": Expected((t,), (1,))}


def caller_buffer(name: str, buffer: torch.Tensor) -> Expected:
    """The layout of a buffer the caller hands over for ``name`` (``out=``,
    ``valid_counts_out=``): what comes back must be laid out as it is."""
    return Expected(tuple(buffer.shape), tuple(buffer.stride()), f"the caller's own {name} buffer")


def same_layout(shape: tuple, got: tuple, want: tuple) -> bool:
    """Whether strides ``got`` address a tensor of ``shape`` as ``want`` do: a
    dimension of size 1 is never stepped along, so its stride is free."""
    return all(n <= 1 or g == w for n, g, w in zip(shape, got, want))


def layout_findings(out, counts, expected: dict[str, Expected], impl: str) -> list[CallFinding]:
    """A ``layout`` finding per returned tensor (``out``, ``valid_counts``) whose strides
    differ from ``expected``'s. A tensor of another shape is left to the shape check,
    an empty one has no layout to get wrong."""
    found = []
    for name, t in (("out", out), ("valid_counts", counts)):
        want: Optional[Expected] = expected.get(name)
        if want is None or not isinstance(t, torch.Tensor) or t.numel() == 0 or tuple(t.shape) != want.shape:
            continue
        got = tuple(t.stride())
        if same_layout(want.shape, got, want.strides):
            continue
        found.append(CallFinding(
            Check.LAYOUT,
            f"{name} comes back with strides {got}; A's layout ({want.why}) has strides {want.strides}: a caller "
            f"reading {name} through its data pointer with A's strides reads other lanes",
        ))
    return found
