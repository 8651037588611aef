"""The properties vLLM PR #47942 states, as checks that return findings.

Each check reads tensors only (any side's: the oracle's, A's or B's) and returns the
findings for one case: the property's name, how many rows break it and the first such
row, spelt out. A finding is on the property, which both sides share: whether A or B
is *wrong* is the comparison with the oracle's business, not this module's.

Names (``PROPERTIES`` gives each one's statement):

    witness_distinct        every witness is distinct within its row
    witness_absent          no witness occurs anywhere in the learned row
    witness_below_length    every witness is < the row's L
    uncovered_run_pr        the PR's bound: with the learned row, the witnesses leave no
                            uncovered run of [0, L) longer than L / S positions
    uncovered_run_proved    the bound these witnesses guarantee, exactly (docs/topology.md,
                            ``proved_run_bound``): at most 2 ceil(L / E) - 2 positions for a
                            row whose entries are all < L, 2 ceil(L / E) - 1 with entries
                            >= L, E = min(L, S)
    merge_keeps_prefix      merged columns [0, keep) are bit-identical to learned's
    merge_no_new_duplicate  no value >= 0 occurs in a merged row more often than
                            max(1, its count in the learned row)
    fused_equals_pair       the fused kernel's merged output equals the pair's, bit for bit

The PR's bound does not hold (docs/topology.md gives the smallest counterexample):
``uncovered_run_pr`` is reported, and ``uncovered_run_proved`` is what a correct
implementation must meet.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import TopologyInputs

PROPERTIES = {
    "witness_distinct": "every witness is distinct within its row",
    "witness_absent": "every witness is absent from the whole learned row",
    "witness_below_length": "every witness is less than its row's context length L",
    "uncovered_run_pr": "with the learned row, the witnesses bound the uncovered run at context_len / num_segments positions (PR text)",
    "uncovered_run_proved": "with the learned row, the witnesses bound the uncovered run at the longest adjacent pair of "
    "segments minus 2 (L - 1 for one segment), plus one segment's worth more where an entry >= L occupies the last",
    "merge_keeps_prefix": "the merge keeps columns [0, keep) bit-identical",
    "merge_no_new_duplicate": "the merge introduces no duplicate",
    "fused_equals_pair": "the fused kernel equals the torch pair, bit for bit",
}


# The stated properties that do not hold, each with the smallest counterexample
# Hypothesis shrinks to (tests/test_topology_properties.py re-derives them): a grid or
# soak case breaking one of these is a finding on the PR's text, not a failure of A or B.
DOES_NOT_HOLD = {
    "uncovered_run_pr": (
        "entries all < L: L=5, S=2, learned [4] -> witnesses [0, -1], positions 1..3 uncovered (3 > 5/2); "
        "with an entry >= L: L=3, S=2, learned [3] -> it occupies the last segment, witnesses [0, -1], "
        "positions 1..2 uncovered (2 > 3/2)"
    ),
}


@dataclass(frozen=True)
class Finding:
    """A property that does not hold on a case: ``rows`` rows break it, the first
    being ``row``."""

    property: str
    rows: int
    row: int
    detail: str

    def describe(self) -> str:
        return f"{self.property}: {self.rows} row(s), first row {self.row}: {self.detail}"


def _finding(name: str, bad: torch.Tensor, detail) -> list[Finding]:
    """One finding for the rows where ``bad`` [R] holds (none if it never does);
    ``detail(row)`` spells out the first."""
    rows = bad.nonzero().flatten()
    if rows.numel() == 0:
        return []
    row = int(rows[0])
    return [Finding(name, int(rows.numel()), row, detail(row))]


def _row(t: torch.Tensor, row: int) -> list[int]:
    return [int(v) for v in t[row].tolist()]


def uncovered_runs(learned: torch.Tensor, witnesses: torch.Tensor, context_lens: torch.Tensor) -> torch.Tensor:
    """int64 [R]: per row, the longest run of positions in [0, L) that neither a learned
    entry nor a witness covers (0 where L <= 0)."""
    length = context_lens.to(torch.int64)[:, None]
    values = torch.cat([learned.to(torch.int64), witnesses.to(torch.int64)], dim=1)
    inside = (values >= 0) & (values < length)
    points = torch.where(inside, values, length.expand_as(values))
    ends = [torch.full_like(length, -1), points, length]
    ordered = torch.cat(ends, dim=1).sort(dim=1).values
    runs = (ordered[:, 1:] - ordered[:, :-1] - 1).clamp(min=0).amax(dim=1)
    return torch.where(length[:, 0] > 0, runs, torch.zeros_like(runs))


def proved_run_bound(learned: torch.Tensor, context_lens: torch.Tensor, segments: int) -> torch.Tensor:
    """int64 [R]: the longest uncovered run the witnesses allow (docs/topology.md), exact:
    some row of the same L, S and kind reaches it. With len_s the segment lengths
    (E = min(L', S) of them): the longest adjacent pair minus 2, or L - 1 for one
    segment; a row with an entry >= L where E = S may leave the last segment
    uncovered, so it also allows len_{S-2} + len_{S-1} - 1 (L for one segment)."""
    length = context_lens.to(torch.int64)
    length_pos = length.clamp(min=1)
    segs = length_pos.clamp(max=segments)[:, None]
    s = torch.arange(segments + 1, device=length.device, dtype=torch.int64)[None, :]
    edges = torch.where(s <= segs, (s * length_pos[:, None] + segs - 1) // segs, length_pos[:, None])
    seg_len = edges[:, 1:] - edges[:, :-1]  # 0 past segment E - 1
    pairs = seg_len[:, 1:] + seg_len[:, :-1]
    pair_max = pairs.amax(dim=1) if segments > 1 else torch.zeros_like(length)
    one_segment = segs[:, 0] == 1
    legal = torch.where(one_segment, length - 1, pair_max - 2)
    last = (segs[:, 0] - 2).clamp(min=0)
    last_pair = pairs.gather(1, last[:, None].clamp(max=max(segments - 2, 0)))[:, 0] - 1 if segments > 1 else length
    last_pair = torch.where(one_segment, length, last_pair)
    past_end = (learned.to(torch.int64) >= length[:, None]).any(dim=1) & (segs[:, 0] == segments)
    bound = torch.where(past_end, torch.maximum(legal, last_pair), legal)
    return torch.where(length > 0, bound, torch.zeros_like(bound))


def _counts(sorted_values: torch.Tensor, of: torch.Tensor) -> torch.Tensor:
    """How often each element of ``of`` occurs in its row of ``sorted_values``."""
    if sorted_values.shape[1] == 0:
        return torch.zeros_like(of)
    return torch.searchsorted(sorted_values, of, right=True) - torch.searchsorted(sorted_values, of)


def check_witnesses(case: TopologyCase, inputs: TopologyInputs, witnesses: torch.Tensor) -> list[Finding]:
    """The witness properties and both uncovered-run bounds, on one side's witnesses."""
    learned = inputs.learned.to(torch.int64).cpu()
    w = witnesses.to(torch.int64).cpu()
    lens = inputs.context_lens.to(torch.int64).cpu()
    present = w >= 0
    findings: list[Finding] = []

    ordered = torch.where(present, w, torch.full_like(w, -1)).sort(dim=1).values
    repeated = ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(dim=1)
    findings += _finding("witness_distinct", repeated, lambda r: f"witnesses {_row(w, r)}")

    in_learned = (_counts(learned.sort(dim=1).values, w) > 0) & present
    findings += _finding(
        "witness_absent", in_learned.any(dim=1),
        lambda r: f"witness(es) {[int(v) for v in w[r][in_learned[r]]]} occur in learned row {_row(learned, r)}",
    )

    too_big = (present & (w >= lens[:, None])).any(dim=1)
    findings += _finding("witness_below_length", too_big, lambda r: f"L={int(lens[r])}, witnesses {_row(w, r)}")

    runs = uncovered_runs(learned, w, lens)
    pr_broken = (runs * case.segments > lens) & (lens > 0)  # run > L / S, exactly; a row without context has no run
    findings += _finding(
        "uncovered_run_pr", pr_broken,
        lambda r: f"uncovered run {int(runs[r])} > L/S = {int(lens[r])}/{case.segments}; "
        f"learned {_row(learned, r)}, witnesses {_row(w, r)}",
    )
    bound = proved_run_bound(learned, lens, case.segments)
    findings += _finding(
        "uncovered_run_proved", runs > bound,
        lambda r: f"uncovered run {int(runs[r])} > bound {int(bound[r])} (L={int(lens[r])}, S={case.segments}); "
        f"learned {_row(learned, r)}, witnesses {_row(w, r)}",
    )
    return findings


def check_merge(case: TopologyCase, inputs: TopologyInputs, merged: torch.Tensor) -> list[Finding]:
    """The merge properties, on one side's merged output."""
    learned = inputs.learned.cpu()
    out = merged.cpu()
    findings: list[Finding] = []
    keep = case.keep
    changed = (out[:, :keep] != learned[:, :keep]).any(dim=1)
    findings += _finding(
        "merge_keeps_prefix", changed,
        lambda r: f"keep={keep}: learned prefix {_row(learned[:, :keep], r)}, merged prefix {_row(out[:, :keep], r)}",
    )
    sorted_out = out.to(torch.int64).sort(dim=1).values
    in_out = _counts(sorted_out, sorted_out)
    in_learned = _counts(learned.to(torch.int64).sort(dim=1).values, sorted_out)
    extra = (sorted_out >= 0) & (in_out > in_learned.clamp(min=1))
    findings += _finding(
        "merge_no_new_duplicate", extra.any(dim=1),
        lambda r: f"value {int(sorted_out[r][extra[r]][0])} occurs {int(in_out[r][extra[r]][0])} times in merged row "
        f"{_row(out, r)}, {int(in_learned[r][extra[r]][0])} in learned row {_row(learned, r)}",
    )
    return findings


def check_fused_equals_pair(pair: torch.Tensor, fused: torch.Tensor) -> list[Finding]:
    if pair.shape != fused.shape or pair.dtype != fused.dtype:
        return [Finding("fused_equals_pair", -1, -1, f"pair {pair.dtype} {tuple(pair.shape)}, fused {fused.dtype} {tuple(fused.shape)}")]
    differs = pair.cpu() != fused.cpu()

    def detail(r: int) -> str:
        col = int(differs[r].nonzero()[0])
        return f"column {col}: pair {int(pair[r, col])}, fused {int(fused[r, col])}"

    return _finding("fused_equals_pair", differs.any(dim=1), detail)
