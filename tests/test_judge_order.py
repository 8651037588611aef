"""The order rule is written once, in two forms (remap_ab/subjects/remap/judge/compare.py): the plain
exhaustive comparison (``compare``) and the fast on-device proof the batch runner
trusts (``proof_of_pass``). This property holds them together:

- ``compare``'s verdict is the rule stated plainly, row by row (exhaustive search for
  the tile order), and whenever the proof says "passes", that rule passes too (the
  proof is sound): on outputs built to pass and on the same outputs broken in one of
  several ways;
- on outputs built to pass (the row's tile segments in a random order, -1 after),
  ``compare`` passes, and the proof finds its witness whenever no segment's values
  are a proper prefix of another's (the one case its greedy walk may miss).

Values come from a tiny alphabet that includes -1, so duplicates within and across
tiles, and -1 as a valid lane's value (a padded block table), are common."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from remap_ab.subjects.remap.judge.compare import (
    OrderContract,
    Output,
    Reference,
    compare,
    is_segment_permutation,
    proof_of_pass,
    tile_segments,
)


class _Cfg:
    def __init__(self, compacts: bool, counts_returned: bool):
        self.compacts, self.counts_returned = compacts, counts_returned


def _prefix_free(segs: list) -> bool:
    return not any(
        len(a) < len(b) and b[: len(a)] == a for a in segs for b in segs
    )


def _plain_rule(out: torch.Tensor, counts: torch.Tensor, ref: Reference, contract: OrderContract) -> bool:
    """SPEC §7 for a compacted output, row by row, with no vectorised shortcut."""
    if not torch.equal(counts, ref.counts):
        return False
    for r in range(out.shape[0]):
        n = int(ref.counts[r])
        row = out[r].tolist()
        if any(v != -1 for v in row[n:]) or sorted(row[:n]) != sorted(ref.out[r, :n].tolist()):
            return False
        if contract.ordered:
            if row[:n] != ref.out[r, :n].tolist():
                return False
        elif not is_segment_permutation(row, ref.lanes[r].tolist(), ref.valid[r].tolist(), contract.segment):
            return False
    return True


BREAKS = ["none", "swap_lanes", "replace_value", "drop_lane", "tail", "count", "duplicate_segment"]


@st.composite
def cases(draw):
    seg = draw(st.sampled_from([1, 2, 3, 4]))
    tiles = draw(st.integers(1, 4))
    rows = draw(st.integers(1, 3))
    k = seg * tiles
    alphabet = st.integers(-1, 3)
    lanes = [[draw(alphabet) for _ in range(k)] for _ in range(rows)]
    valid = [[draw(st.booleans()) for _ in range(k)] for _ in range(rows)]
    orders = [draw(st.permutations(range(tiles))) for _ in range(rows)]
    brk = draw(st.sampled_from(BREAKS))
    where = (draw(st.integers(0, rows - 1)), draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1)))
    ordered = draw(st.booleans())
    counts_returned = draw(st.booleans())
    return seg, lanes, valid, orders, brk, where, ordered, counts_returned


@given(cases())
def test_fast_proof_agrees_with_the_plain_comparison(case):
    seg, lanes, valid, orders, brk, (row, c1, c2), ordered, counts_returned = case
    t, k = len(lanes), len(lanes[0])
    lanes_t = torch.tensor(lanes, dtype=torch.int32)
    lanes_t = torch.where(torch.tensor(valid), lanes_t, -1)
    valid_t = torch.tensor(valid)
    counts = valid_t.sum(1, dtype=torch.int32)
    ref_out = torch.full((t, k), -1, dtype=torch.int32)
    built = torch.full((t, k), -1, dtype=torch.int32)
    for r in range(t):
        vals = lanes_t[r][valid_t[r]]
        ref_out[r, : len(vals)] = vals
        # The tiles' segments, back to back in a drawn order: what a racy tiled
        # allocator may legitimately write.
        per_tile = [[v for v, ok in zip(lanes_t[r, j * seg:(j + 1) * seg].tolist(), valid[r][j * seg:(j + 1) * seg]) if ok]
                    for j in range(k // seg)]
        flat = [v for j in orders[r] for v in per_tile[j]]
        built[r, : len(flat)] = torch.tensor(flat, dtype=torch.int32)
    ref = Reference(lanes=lanes_t, valid=valid_t, out=ref_out, counts=counts)
    contract = OrderContract(ordered, seg, "drawn")
    if ordered:
        built = ref_out.clone()  # a one-program implementation promises column order

    out, got_counts = built.clone(), counts.clone()
    n = int(counts[row])
    if brk == "swap_lanes" and n >= 2:
        i, j = c1 % n, c2 % n
        out[row, i], out[row, j] = int(built[row, j]), int(built[row, i])
    elif brk == "replace_value" and n:
        out[row, c1 % n] = int(out[row, c1 % n]) + 1 if c2 % 2 else 7
    elif brk == "drop_lane" and n:
        out[row, n - 1] = -1
    elif brk == "tail" and n < k:
        out[row, n + c1 % (k - n)] = c2
    elif brk == "count":
        got_counts[row] += 1
    elif brk == "duplicate_segment":
        segs = tile_segments(lanes_t[row].tolist(), valid[row], seg)
        if len(segs) >= 2:
            first = segs[0]
            flat = first + first + [v for s in segs[2:] for v in s]
            flat = (flat + [-1] * k)[: n]
            out[row, :n] = torch.tensor(flat, dtype=torch.int32)

    o = Output("impl", out, got_counts if counts_returned else None, contract)
    cfg = _Cfg(True, counts_returned)
    verdict = compare("c", o, o, ref, compacted=True, counts_returned=counts_returned)
    proved = proof_of_pass(o, ref, cfg)
    assert proved is not None  # the shape is always right here
    plain = _plain_rule(out, got_counts if counts_returned else counts, ref, contract)
    # compare itself settles most rows with the fast proof, so the proof is held to
    # the rule stated plainly (exhaustive search), and compare to both.
    assert verdict.passed == plain, verdict.describe()
    if bool(proved):
        assert plain, (out.tolist(), ref_out.tolist())  # sound: never passes what the rule fails
    if torch.equal(out, built) and torch.equal(got_counts, counts):
        # Built to pass (a break that did not apply leaves the output as built).
        assert verdict.passed, verdict.describe()
        segs_prefix_free = all(
            _prefix_free(tile_segments(lanes_t[r].tolist(), valid[r], seg)) for r in range(t)
        )
        if ordered or segs_prefix_free:
            assert bool(proved), (built.tolist(), ref_out.tolist())
