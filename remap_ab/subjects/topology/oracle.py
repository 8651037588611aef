"""The oracle: the topology-witness merge one row at a time, in plain Python ints.

Independent of both implementations: no torch arithmetic, and a different route to
each rule. A segment's positions are found from the list of its edges (``bisect``)
rather than from ``t * E // L'``; the two agree for 0 <= t < L' because
floor(t * E / L') = s exactly when ceil(s * L' / E) <= t < ceil((s + 1) * L' / E)
(docs/topology.md). Only an entry past the end (t >= L') needs the clamping formula,
which is the contract itself: it puts such an entry in segment min(t * E // L', S - 1).
"""

from __future__ import annotations

import bisect

import torch


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def row_edges(length: int, segments: int) -> list[int]:
    """Left edges of the row's E segments, then L' (the end): ``E + 1`` ints."""
    length_pos = max(length, 1)
    count = min(length_pos, segments)
    return [_ceil_div(s * length_pos, count) for s in range(count)] + [length_pos]


def row_segment(entry: int, length: int, segments: int, edges: list[int]) -> int | None:
    """The segment a learned entry marks occupied, or None for padding."""
    if entry < 0:
        return None
    length_pos = max(length, 1)
    if entry < length_pos:
        return bisect.bisect_right(edges, entry) - 1
    return min(entry * min(length_pos, segments) // length_pos, segments - 1)


def row_witnesses(learned_row: list[int], length: int, segments: int) -> list[int]:
    """One row of ``topology_witnesses``: ``segments`` ints."""
    edges = row_edges(length, segments)
    occupied = set()
    for entry in learned_row:
        seg = row_segment(entry, length, segments, edges)
        if seg is not None:
            occupied.add(seg)
    out = [-1] * segments
    if length > 0:
        for s in range(len(edges) - 1):
            if s not in occupied:
                out[s] = edges[s]
    return out


def row_merge(learned_row: list[int], witness_row: list[int], keep: int, max_replacements: int) -> list[int]:
    """One row of ``merge_topology_witnesses``."""
    merged = list(learned_row)
    budget = min(max_replacements, len(learned_row) - keep)
    column = keep
    for w in witness_row:
        if column - keep >= budget:
            break
        if w >= 0:
            merged[column] = w
            column += 1
    return merged


def witnesses(learned: torch.Tensor, context_lens: torch.Tensor, segments: int) -> torch.Tensor:
    rows = learned.tolist()
    lens = context_lens.tolist()
    out = [row_witnesses(r, n, segments) for r, n in zip(rows, lens)]
    return torch.tensor(out, dtype=torch.int32).view(len(rows), segments)


def merge(learned: torch.Tensor, witness: torch.Tensor, keep: int, max_replacements: int) -> torch.Tensor:
    rows = learned.tolist()
    out = [row_merge(r, w, keep, max_replacements) for r, w in zip(rows, witness.tolist())]
    return torch.tensor(out, dtype=torch.int32).view(tuple(learned.shape))
