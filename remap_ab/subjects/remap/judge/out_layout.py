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

from remap_ab.status import Check
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.compare import CallFinding

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


# ---------------------------------------------------------------- caller-owned outputs

# What a caller's buffers hold before the call (SPEC §10): ``out`` a value no lane of a
# correct output takes unwritten-looking (-1 would read as "invalid"), the counts
# garbage as a buffer reused from the last step holds, and the guard elements around
# each view a third value, so a write outside the view shows.
_OUT_POISON = -123_456_789
_GUARD = 64
_GUARD_VALUE = 0x5EAD5EAD


class CallerBuffers:
    """The ``out`` / ``valid_counts_out`` a case with ``out_buffers`` hands its wrapper:
    views into larger buffers with ``_GUARD`` elements on each side."""

    def __init__(self, config: CaseConfig, device: torch.device):
        rows, k = config.tokens, config.topk
        self._out_base = torch.full((rows * k + 2 * _GUARD,), _GUARD_VALUE, dtype=torch.int32, device=device)
        self.out = self._out_base[_GUARD:_GUARD + rows * k].view(rows, k)
        self._counts_base = torch.full((rows + 2 * _GUARD,), _GUARD_VALUE, dtype=torch.int32, device=device)
        self.counts = self._counts_base[_GUARD:_GUARD + rows]
        self.poison()

    def poison(self) -> None:
        """Fill the views again, as the caller's buffers are before each step."""
        self.out.fill_(_OUT_POISON)
        rows = self.counts.shape[0]
        # Plausible stale counts (the tiled path adds to whatever is there).
        torch.remainder(torch.arange(rows, dtype=torch.int32, device=self.counts.device) * 7919 + 1237, 4099,
                        out=self.counts)

    def findings(self, config: CaseConfig, out, counts, impl: str) -> list[CallFinding]:
        """What breaks SPEC §10: a returned tensor that is not the buffer given, or a
        write outside the views."""
        found = []
        given = [("out", out, self.out)] + ([("valid_counts", counts, self.counts)] if config.counts and config.counts_out else [])
        for what, got, mine in given:
            if not (isinstance(got, torch.Tensor) and got.data_ptr() == mine.data_ptr()
                    and got.shape == mine.shape and got.stride() == mine.stride()):
                found.append(CallFinding(Check.BUFFERS, f"{impl} returned {what} that is not the caller's buffer "
                                                        f"it was given; a caller reads the buffer"))
        for what, base, n in (("out", self._out_base, self.out.numel()),
                              ("valid_counts_out", self._counts_base, self.counts.numel())):
            outside = torch.cat([base[:_GUARD], base[_GUARD + n:]])
            changed = int((outside != _GUARD_VALUE).sum())
            if changed:
                found.append(CallFinding(Check.BUFFERS, f"{impl} wrote {changed} elements outside the caller's "
                                                        f"{what} buffer (the {_GUARD} elements around it)"))
        return found


def caller_buffers(config: CaseConfig, device: torch.device) -> Optional[CallerBuffers]:
    """The buffers a call of ``config`` is handed (None: it passes none)."""
    return CallerBuffers(config, device) if config.out_buffers else None
