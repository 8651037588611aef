"""What each sparse-MLA attention backend reads of the remap's outputs, declared once.

The wrapper-level verdict (compare.py) judges the outputs against SPEC §7. A backend
does not read all of an output: FA3 attends to the first ``count`` entries of a row,
FlashInfer SM100 to the set of them, SM120 / FlashMLA fp8 without counts / XPU to the
entries >= 0. So two outputs the SPEC tells apart may look the same to a backend, and
an output the SPEC allows may make a backend read other KV rows than the kernel marked
valid. This module turns each side's output into the backend's *view* of it, and
compares views:

- A's view against B's: a row where they differ means the backend would attend to
  other KV rows with B than with A (``RemapCheck.BACKEND_VIEW``, checks.py);
- each side's view against the *intended* one (the lanes SPEC §3 calls valid, from the
  oracle): a row where BOTH sides' views miss it is a caller hazard — the backend's
  rule and the kernel's contract disagree whatever the implementation — reported as
  information, never as an A/B failure.

The models (facts from vLLM at the #50365 merge, 9e6be4a7):

- FA3 SM90: the output is a page-size-1 block table with ``seqused_k = counts``: the
  first ``count`` entries of a row, in order.
- FlashInfer SM100: the (compacted) rows are block tables with ``seq_lens = counts``:
  the *set* of the first ``count`` entries (order irrelevant; an all-(-1) row is empty).
- FlashMLA bf16, and FlashMLA fp8 when it passes counts: ``(indices, topk_length)``,
  the whole row and its count, bitwise; for the hazard check it reads the first
  ``topk_length`` entries.
- FlashInfer SM120, FlashMLA fp8 without counts, XPU: no counts; entries < 0 are
  skipped (XPU masks ``idx >= 0``). Our rule: the entries >= 0 *in column order* —
  these kernels accumulate attention in index order, so a permuted row rounds
  differently; in their call pattern (C, in place) the order is column order in old
  and new alike, so the stricter rule costs nothing.

Needs torch only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab.subjects.remap.case.config import BACKEND_NAMES

FIRST_COUNT = "first_count"  # out[r, :count[r]]
NON_NEGATIVE = "non_negative"  # the entries >= 0
ROW_AND_COUNT = "row_and_count"  # (out[r], count[r]) bitwise


@dataclass(frozen=True)
class ViewModel:
    """One backend's consumption of the outputs."""

    backend: str  # the CaseConfig.backend word
    name: str  # as reports say it
    reads: str  # FIRST_COUNT, NON_NEGATIVE or ROW_AND_COUNT
    ordered: bool  # order-sensitive (compared bitwise) or a set
    rule: str  # one phrase for reports


MODELS = {
    "fa3": ViewModel("fa3", BACKEND_NAMES["fa3"], FIRST_COUNT, True,
                     "reads the first count entries of each row, in order (seqused_k = counts)"),
    "flashinfer-sm100": ViewModel("flashinfer-sm100", BACKEND_NAMES["flashinfer-sm100"], FIRST_COUNT, False,
                                  "reads the set of the first count entries of each row (seq_lens = counts)"),
    "flashmla-bf16": ViewModel("flashmla-bf16", BACKEND_NAMES["flashmla-bf16"], ROW_AND_COUNT, True,
                               "reads (indices, topk_length): the row and its count"),
    "flashinfer-sm120": ViewModel("flashinfer-sm120", BACKEND_NAMES["flashinfer-sm120"], NON_NEGATIVE, True,
                                  "reads the entries >= 0 of each row, in column order (no counts)"),
    "xpu": ViewModel("xpu", BACKEND_NAMES["xpu"], NON_NEGATIVE, True,
                     "reads the entries >= 0 of each row (masks idx >= 0), in column order"),
}
# vLLM main's further callers (docs/callers-main.md): each reads as its closest sibling above.
for _backend, _sibling in (("flashinfer-sm90", "flashinfer-sm100"), ("cutlass-fa3", "fa3"), ("hisparse", "flashmla-bf16")):
    MODELS[_backend] = dataclasses.replace(MODELS[_sibling], backend=_backend, name=BACKEND_NAMES[_backend])
_FLASHMLA_FP8 = {
    True: ViewModel("flashmla-fp8", BACKEND_NAMES["flashmla-fp8"], ROW_AND_COUNT, True,
                    "reads (indices, topk_length): the row and its count"),
    False: ViewModel("flashmla-fp8", BACKEND_NAMES["flashmla-fp8"], NON_NEGATIVE, True,
                     "reads the entries >= 0 of each row, in column order (no counts)"),
}


_INDEX_GROUP = {
    True: ViewModel("index-group", BACKEND_NAMES["index-group"], ROW_AND_COUNT, True,
                    "reads its out= buffer and its valid_counts_out= buffer: the row and its count"),
    False: ViewModel("index-group", BACKEND_NAMES["index-group"], NON_NEGATIVE, True,
                     "reads the entries >= 0 of its out= buffer, in column order (no counts)"),
}


def model_for(config) -> Optional[ViewModel]:
    """The view model of the case's backend (None when it names none)."""
    if config.backend == "none":
        return None
    if config.backend == "flashmla-fp8":
        return _FLASHMLA_FP8[bool(config.counts_returned)]
    if config.backend == "index-group":
        return _INDEX_GROUP[bool(config.counts_returned)]
    return MODELS[config.backend]


@dataclass
class Views:
    """The views of one case, as ``compare`` takes them (all tensors on one device)."""

    model: ViewModel
    differs: torch.Tensor  # [T] bool: A's view of the row differs from B's
    hazard: torch.Tensor  # [T] bool: both sides' views miss the intended KV rows
    hazard_why: str  # what the hazard rows show, in words ("" when none)
    a_name: str
    b_name: str


def _canonical(seq: torch.Tensor, length: torch.Tensor, ordered: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(length, the first ``length`` entries of ``seq`` front-packed and 0 after; sorted
    when the view is a set): two rows are the same view exactly when both agree."""
    k = seq.shape[1]
    inside = torch.arange(k, device=seq.device).view(1, -1) < length.view(-1, 1)
    if not ordered:
        big = torch.iinfo(seq.dtype).max
        seq = torch.sort(torch.where(inside, seq, big), dim=1).values
    return length.to(torch.int64), torch.where(inside, seq, 0)


def _front(values: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kept entries of each row moved to its front in column order, and how many."""
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
    return values.gather(1, order), keep.sum(dim=1)


def _seen(model: ViewModel, out: torch.Tensor, counts: Optional[torch.Tensor], for_hazard: bool):
    """The canonical view of one output (``counts``: what the side returned)."""
    reads = model.reads
    if reads == ROW_AND_COUNT and for_hazard:
        reads = FIRST_COUNT  # FlashMLA attends to indices[:topk_length]
    if reads == FIRST_COUNT:
        assert counts is not None
        return _canonical(out, counts, model.ordered)
    if reads == NON_NEGATIVE:
        seq, n = _front(out, out >= 0)
        return _canonical(seq, n, model.ordered)
    assert counts is not None
    return counts.to(torch.int64), out  # the row bitwise, with its count


def _differ(x: tuple, y: tuple) -> torch.Tensor:
    return (x[0] != y[0]) | (x[1] != y[1]).any(dim=1)


def backend_views(config, a, b, ref) -> Optional[Views]:
    """The case's backend views of outputs ``a`` and ``b`` (compare.Output) against
    the oracle's ``ref`` (compare.Reference); None when the case names no backend or
    an output cannot be read (the wrapper-level verdict says why)."""
    model = model_for(config)
    if model is None:
        return None
    needs_counts = model.reads != NON_NEGATIVE
    for o in (a, b):
        if o.error is not None or not isinstance(o.out, torch.Tensor) or o.out.shape != ref.out.shape:
            return None
        if needs_counts and (not isinstance(o.counts, torch.Tensor) or o.counts.shape != ref.counts.shape):
            return None
    view_a = _seen(model, a.out, a.counts, False)
    view_b = _seen(model, b.out, b.counts, False)
    # The intended KV rows: the lanes SPEC §3 calls valid, in column order.
    intended_seq, intended_n = _front(ref.lanes, ref.valid)
    intended = _canonical(intended_seq, intended_n, model.ordered)
    miss_a = _differ(_seen(model, a.out, a.counts, True), intended)
    miss_b = _differ(_seen(model, b.out, b.counts, True), intended)
    hazard = miss_a & miss_b
    return Views(model, _differ(view_a, view_b), hazard, _hazard_why(model, ref, hazard) if bool(hazard.any()) else "",
                 a.name, b.name)


VIEW_SHOWN = 12  # entries of a row's view a report shows per side


def row_evidence(model: ViewModel, a, b, row: int) -> dict:
    """What ``model``'s backend reads of row ``row`` from A's and from B's outputs
    (compare.Output): the backend, its rule, and per side the count it reads and the
    entries around the first place the two views part (plain data for a report)."""
    sides = []
    for o in (a, b):
        counts = o.counts[row : row + 1] if isinstance(o.counts, torch.Tensor) else None
        length, seq = _seen(model, o.out[row : row + 1], counts, False)
        n = int(length[0])
        shown = seq[0] if model.reads == ROW_AND_COUNT else seq[0, :n]
        sides.append((o.name, n, [int(v) for v in shown.tolist()]))
    (_, _, x), (_, _, y) = sides
    part = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    start = max(0, part - 2)
    return {
        "backend": model.name, "rule": model.rule, "row": row, "reads": model.reads, "ordered": model.ordered,
        "first_difference": part, "from": start,
        "sides": [{"name": name, "count": n, "length": len(v), "entries": v[start : start + VIEW_SHOWN]}
                  for name, n, v in sides],
    }


def _hazard_why(model: ViewModel, ref, hazard: torch.Tensor) -> str:
    """What the first hazard row shows, in words."""
    row = int(torch.nonzero(hazard)[0, 0])
    valid = ref.valid[row]
    count = int(valid.sum())
    if model.reads == NON_NEGATIVE:
        negative = int((valid & (ref.lanes[row] < 0)).sum())
        return (f"row {row}: {negative} of its {count} valid lanes hold a negative id (a -1 block-table entry or "
                f"an int32 wrap), which {model.name} skips")
    k = valid.numel()
    first_count = torch.arange(k, device=valid.device) < count
    holes = int((first_count & ~valid).sum())
    return (f"row {row}: {holes} invalid lanes lie inside its first {count} columns (its valid lanes are not all at "
            f"its front), so {model.name} reads -1 ids there and misses {holes} valid lanes past the count")
