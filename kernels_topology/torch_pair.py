"""The topology-witness merge as two vectorised torch functions (side A of the A/B).

Written from the description in issue 42 (the contract is docs/topology.md):

- ``topology_witnesses(learned, context_lens, num_segments)`` -> int32 ``[R, S]``: for
  each row, the left edge (rounded up) of every segment that exists and that no
  learned entry falls into, -1 elsewhere.
- ``merge_topology_witnesses(learned, witnesses, learned_keep, max_replacements)`` ->
  a new ``[R, topk]``: the present witnesses, in segment order, written over columns
  ``learned_keep, learned_keep + 1, ...``, at most ``budget`` of them.
- ``fused_topology_witness_merge(...)``: the two in one call, with the fused entry
  point's contract (it also rejects ``num_segments > 64``), so the A/B calls both
  sides the same way.

All index arithmetic is int64: ``t * E`` and ``s * L'`` overflow int32 once a context
length or an entry passes 2**31 / 64.
"""

from __future__ import annotations

import torch

MAX_FUSED_SEGMENTS = 64  # the fused kernel folds occupancy into one int64 bitmask

__all__ = ["MAX_FUSED_SEGMENTS", "fused_topology_witness_merge", "merge_topology_witnesses", "topology_witnesses"]


def _check_rows(learned: torch.Tensor, context_lens: torch.Tensor, num_segments: int) -> None:
    if learned.dim() != 2:
        raise ValueError(f"learned must be 2-D [rows, topk], got shape {tuple(learned.shape)}; pass one row per query token")
    if context_lens.dim() != 1 or context_lens.shape[0] != learned.shape[0]:
        raise ValueError(
            f"context_lens must be 1-D with one length per learned row ({learned.shape[0]}), "
            f"got shape {tuple(context_lens.shape)}; pass one context length per row"
        )
    if num_segments <= 0:
        raise ValueError(f"num_segments must be at least 1, got {num_segments}; pass a positive segment count")


def _check_merge(topk: int, learned_keep: int, max_replacements: int) -> None:
    if not 0 <= learned_keep <= topk:
        raise ValueError(f"learned_keep must lie in [0, topk={topk}], got {learned_keep}; keep at most the whole row")
    if max_replacements < 0:
        raise ValueError(f"max_replacements must be at least 0, got {max_replacements}; pass 0 to merge nothing")


def topology_witnesses(learned: torch.Tensor, context_lens: torch.Tensor, num_segments: int) -> torch.Tensor:
    """int32 ``[R, num_segments]``: segment s's witness ceil(s * L' / E) where the
    segment exists (s < E and L > 0) and no entry t >= 0 of the whole learned row
    falls into it, -1 elsewhere. L' = max(L, 1), E = min(L', S); entry t falls into
    segment min(max(t * E // L', 0), S - 1)."""
    _check_rows(learned, context_lens, num_segments)
    rows = learned.shape[0]
    device = learned.device
    length = context_lens.to(torch.int64)
    length_pos = length.clamp(min=1)
    segs = length_pos.clamp(max=num_segments)  # E, per row
    s = torch.arange(num_segments, device=device, dtype=torch.int64)
    exists = (s[None, :] < segs[:, None]) & (length[:, None] > 0)
    edge = (s[None, :] * length_pos[:, None] + segs[:, None] - 1) // segs[:, None]

    t = learned.to(torch.int64)
    seg_of_t = torch.div(t * segs[:, None], length_pos[:, None], rounding_mode="floor").clamp(0, num_segments - 1)
    # Padding (t < 0) is sent to an extra column that is dropped afterwards.
    target = torch.where(t >= 0, seg_of_t, torch.full_like(seg_of_t, num_segments))
    occupied = torch.zeros(rows, num_segments + 1, dtype=torch.bool, device=device)
    occupied.scatter_(1, target, True)
    free = exists & ~occupied[:, :num_segments]
    return torch.where(free, edge, torch.full_like(edge, -1)).to(torch.int32)


def merge_topology_witnesses(
    learned: torch.Tensor, witnesses: torch.Tensor, learned_keep: int, max_replacements: int
) -> torch.Tensor:
    """A copy of ``learned`` with the present witnesses (>= 0), in segment order,
    over columns ``learned_keep ...``: at most min(max_replacements, topk - keep)."""
    if learned.dim() != 2:
        raise ValueError(f"learned must be 2-D [rows, topk], got shape {tuple(learned.shape)}; pass one row per query token")
    if witnesses.dim() != 2 or witnesses.shape[0] != learned.shape[0]:
        raise ValueError(
            f"witnesses must be 2-D with one row per learned row ({learned.shape[0]}), got shape "
            f"{tuple(witnesses.shape)}; pass topology_witnesses' result"
        )
    topk = learned.shape[1]
    _check_merge(topk, learned_keep, max_replacements)
    out = learned.clone()
    budget = min(max_replacements, topk - learned_keep)
    if budget == 0:
        return out
    present = witnesses >= 0
    rank = torch.cumsum(present.to(torch.int64), dim=1) - 1  # order among the present ones
    write = present & (rank < budget)
    row_idx, seg_idx = torch.nonzero(write, as_tuple=True)
    out[row_idx, learned_keep + rank[row_idx, seg_idx]] = witnesses[row_idx, seg_idx].to(out.dtype)
    return out


def fused_topology_witness_merge(
    learned: torch.Tensor, context_lens: torch.Tensor, num_segments: int, learned_keep: int, max_replacements: int
) -> torch.Tensor:
    """``merge_topology_witnesses(learned, topology_witnesses(...), ...)`` with the
    fused entry point's checks: every rejection is raised before any work."""
    _check_rows(learned, context_lens, num_segments)
    if num_segments > MAX_FUSED_SEGMENTS:
        raise ValueError(
            f"num_segments must be at most {MAX_FUSED_SEGMENTS} for the fused merge (one int64 occupancy mask), "
            f"got {num_segments}; use at most {MAX_FUSED_SEGMENTS} segments"
        )
    _check_merge(learned.shape[1], learned_keep, max_replacements)
    witnesses = topology_witnesses(learned, context_lens, num_segments)
    return merge_topology_witnesses(learned, witnesses, learned_keep, max_replacements)
