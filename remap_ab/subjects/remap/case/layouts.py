"""Memory layouts of a case's inputs: the same values, laid out as callers may pass them.

The wrappers accept any strided int32 tensor (SPEC §6 makes the inputs contiguous
before the launch), so an implementation that skips that step and assumes a row stride
equal to the row width computes garbage on a view. A layout places each input inside a
larger buffer whose slack holds *filler* values that differ from the real ones, so a
kernel that reads past a view's elements reads wrong-but-plausible values instead of
passing by luck. The values seen through the views are the case's values exactly: the
oracle judges them unchanged.

Prefill tensors stay contiguous in every layout (the wrapper asserts it: a strided one is
a rejection, see rejections.py), but they too may start at a storage offset.

Output buffers are not part of a layout: the SPEC §1 API has no ``out=`` parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config.py imports this table: no torch at import time
    import torch


@dataclass(frozen=True)
class Layout:
    """How one layout places each input. Every field describes a view of a fresh buffer."""

    name: str
    doc: str
    token_row_pad: int = 0  # token_indices rows live in rows of K + pad elements
    token_col_step: int = 1  # token_indices columns are every step-th element of a row
    table_col_pad: int = 0  # block_table is the first W columns of a [Rq, W + pad] table
    req_step: int = 1  # req_id is every step-th element of a buffer
    offset: int = 0  # every tensor starts this many elements into its buffer
    spare_rows: int = 0  # the buffer holds this many more rows (1-D: elements) after the view
    fillers: tuple = ()  # ((input name, filler), ...) overriding _FILLER for this layout


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout("contiguous", "every input contiguous at offset 0 (what remap-ab made before layouts)"),
        # Each layout alone keeps 16-byte alignment (pads and offsets of whole 16-byte
        # units), so it compiles the variant a contiguous case does; "mixed" breaks it
        # (Triton specialises on it), so every path and K also meets unaligned rows and
        # pointers without a variant per layout to load.
        Layout("token_rows", "token_indices rows 48 elements wider than K (a row slice of a wider buffer)",
               token_row_pad=48),
        Layout("token_cols", "token_indices a column-strided view (every other column of a [T, 2K] buffer)",
               token_col_step=2),
        Layout("table_slice", "block_table the first W columns of a table 32 columns wider", table_col_pad=32),
        Layout("req_strided", "req_id every third element of a buffer", req_step=3),
        Layout("offset", "every input contiguous but 4 elements (16 bytes) into its storage", offset=4),
        Layout("mixed", "all of the above at once, with row strides and offsets that break 16-byte alignment "
               "(rows 8 wider, a table 24 wider, 5 elements in)", token_row_pad=8, token_col_step=2,
               table_col_pad=24, req_step=3, offset=5),
        # The attention backends' persistent buffers (issue 24): what lies past each view
        # is what the caller's buffer holds there.
        Layout("persistent", "as the attention backends pass them: token_indices the first T rows of a buffer the "
               "indexer pre-filled with -1, req_id the first T entries of a zero-filled buffer, block_table the "
               "first Rq rows of a persistent table whose other rows hold other requests' blocks",
               spare_rows=16, fillers=(("token_indices", -1), ("req_id", 0))),
    )
}
LAYOUT_NAMES = tuple(LAYOUTS)

# Filler for the slack around each view: values a kernel that ignores strides would pick
# up instead of the real ones (valid token ids and block ids, so they change outputs).
_FILLER = {"token_indices": 3, "block_table": 0x51DE, "req_id": 0, "prefill_request_ids": -1, "prefill_starts": 7}


_REGION_ALIGN = 32  # elements: each case's part of a shared buffer starts 128 bytes aligned


def _geometry(t: torch.Tensor, rows_pad: int, col_step: int, step: int, offset: int, spare: int):
    """Where ``t``'s values go in a buffer: ``(buffer length, strides, offset)``
    (``spare`` more rows, or elements, after the view)."""
    if t.dim() == 2:
        rows, cols = t.shape
        row_len = cols * col_step + rows_pad
        return offset + (rows + spare) * row_len, (row_len, col_step), offset
    (n,) = t.shape
    return offset + (n + spare) * step, (step,), offset


def _plan(name: str, tensors: Mapping[str, torch.Tensor]) -> dict:
    """Input name -> ``(values, filler, buffer length, strides, offset)`` in layout ``name``."""
    layout = LAYOUTS[name]
    fillers = {**_FILLER, **dict(layout.fillers)}
    spare = layout.spare_rows
    plan = {}
    for field_name, t in tensors.items():
        if field_name == "token_indices":
            geometry = _geometry(t, layout.token_row_pad, layout.token_col_step, 1, layout.offset, spare)
        elif field_name == "block_table":
            geometry = _geometry(t, layout.table_col_pad, 1, 1, layout.offset, spare)
        elif field_name == "req_id":
            geometry = _geometry(t, 0, 1, layout.req_step, layout.offset, spare)
        else:  # prefill tensors: the wrapper requires them contiguous
            geometry = _geometry(t, 0, 1, 1, layout.offset, spare)
        plan[field_name] = (t, fillers[field_name], *geometry)
    return plan


def place_all(cases: list[tuple[str, Mapping[str, torch.Tensor]]]) -> list[tuple[dict, dict]]:
    """Each ``(layout name, tensors by input name)``'s values in that layout
    (``contiguous``: a contiguous copy), as ``(views by input name, owned)`` pairs. One
    filler-filled buffer per input name holds every case's part, 128-byte aligned, and
    one ``_foreach_copy_`` fills the views: on a GPU a batch costs a few launches, not a
    few per tensor. Each case records its part of each buffer in ``owned`` (what ``call.PrivateInputs`` copies and compares for its
    writes, slack included). One case alone gets a buffer per input, as a caller would pass
    them (an access past one input is then outside every allocation)."""
    import torch

    plans = [_plan(name, x) for name, x in cases]
    regions: dict[str, list] = {}  # input name -> [(case index, start, length, filler)]
    for field_name in dict.fromkeys(name for plan in plans for name in plan):
        members = [(i, plan[field_name][2], plan[field_name][1]) for i, plan in enumerate(plans) if field_name in plan]
        # Parts of one filler side by side (one fill each); each rounded up to whole
        # alignment units, so the next starts aligned (the last is not rounded).
        fillers = list(dict.fromkeys(filler for *_, filler in members))
        members.sort(key=lambda m: fillers.index(m[2]))
        parts, start = [], 0
        for k, (i, length, filler) in enumerate(members):
            rounded = length if k == len(members) - 1 else -(-length // _REGION_ALIGN) * _REGION_ALIGN
            parts.append((i, start, rounded, filler))
            start += rounded
        regions[field_name] = parts
    placed: list[dict] = [{} for _ in cases]
    owned: list[dict] = [{} for _ in cases]
    sources, views = [], []
    for field_name, parts in regions.items():
        first = plans[parts[0][0]][field_name][0]
        total = parts[-1][1] + parts[-1][2]
        buf = torch.full((total,), parts[0][3], dtype=first.dtype, device=first.device)
        for filler in dict.fromkeys(f for *_, f in parts[1:] if f != parts[0][3]):  # a layout's own filler
            spans = [(start, start + length) for _, start, length, f in parts if f == filler]
            buf[spans[0][0] : spans[-1][1]].fill_(filler)
        address = buf.untyped_storage().data_ptr()
        for i, start, length, _ in parts:
            t, _, _, strides, offset = plans[i][field_name]
            view = buf.as_strided(t.shape, strides, start + offset)
            placed[i][field_name], owned[i][field_name] = view, (address, start, start + length)
            sources.append(t)
            views.append(view)
    copy_all(views, sources)
    return list(zip(placed, owned))


def copy_all(destinations: list, sources: list) -> None:
    """Each source into its destination in a few launches: the pairs both contiguous in
    one ``_foreach_copy_`` (a strided pair in the same list sends every pair down its
    one-launch-each path), the strided ones one launch each."""
    import torch

    plain = [d.is_contiguous() and s.is_contiguous() for d, s in zip(destinations, sources)]
    for wanted in (True, False):
        chosen = [k for k, p in enumerate(plain) if p == wanted]
        if chosen:
            torch._foreach_copy_([destinations[k] for k in chosen], [sources[k] for k in chosen])


def describe(t: torch.Tensor) -> str:
    """A view's geometry in a few words, for reports: shape, strides, offset."""
    return f"shape {tuple(t.shape)}, strides {tuple(t.stride())}, offset {t.storage_offset()}"
