"""The judge judged: the comparators fed hand-made outputs (plain torch tensors, no
kernels), each broken in one way, with every field of the mismatch asserted.

These tests are the fast selection that mutation testing of remap_ab/subjects/remap/judge/compare.py runs
(docs/judge-mutation.md): each one pins a behaviour that a mutant of the judge would
change."""

from __future__ import annotations

import json
import sys
import textwrap
import time

import pytest
import torch

from remap_ab.errors import ReportError
from remap_ab.status import Check, Status
from remap_ab.subjects.remap.case.checks import RemapCheck
from remap_ab.subjects.remap.judge.compare import (
    Mismatch,
    OrderContract,
    Output,
    Reference,
    Verdict,
    compare,
    is_segment_permutation,
    note_order_differs,
    proof_of_pass,
    rows_witnessed,
    segment_witness,
    shape_ok,
    tile_segments,
)

I32 = torch.int32
TILED2 = OrderContract(False, 2, "tiles of 2")
ORDERED = OrderContract(True, 4, "single tile")


def t32(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=I32)


def compacted_ref(lanes_rows, valid_rows=None) -> Reference:
    """The oracle's view of a compacted case built from per-lane values: valid lanes
    are those given as ``valid_rows`` (default: value != -1)."""
    lanes = t32(lanes_rows)
    valid = lanes != -1 if valid_rows is None else torch.tensor(valid_rows, dtype=torch.bool)
    out = torch.full_like(lanes, -1)
    for r in range(lanes.shape[0]):
        vals = lanes[r][valid[r]]
        out[r, : len(vals)] = vals
    return Reference(lanes=lanes, valid=valid, out=out, counts=valid.sum(1, dtype=I32))


def in_place_ref(lanes_rows) -> Reference:
    lanes = t32(lanes_rows)
    valid = lanes != -1
    return Reference(lanes=lanes, valid=valid, out=lanes.clone(), counts=valid.sum(1, dtype=I32))


def out(name, rows, counts=None, contract=TILED2, **kw) -> Output:
    return Output(name, t32(rows) if isinstance(rows, list) else rows,
                  t32(counts) if isinstance(counts, list) else counts, contract, **kw)


def judge(a: Output, b: Output, ref: Reference, compacted=True, counts_returned=True) -> Verdict:
    return compare("case", a, b, ref, compacted=compacted, counts_returned=counts_returned)


def good(ref: Reference, name="a", contract=TILED2) -> Output:
    return Output(name, ref.out.clone(), ref.counts.clone(), contract)


# ---------------------------------------------------------------- shape and error


def test_error_mismatch_fields_and_status():
    ref = in_place_ref([[1, 2]])
    v = judge(good(ref), out("b", None, None, error="RuntimeError: boom"), ref, compacted=False)
    assert v.status is Status.ERROR and not v.passed
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.values, m.lanes, m.rows, m.message) == (
        Check.ERROR, "b", -1, -1, {}, 0, 0, "RuntimeError: boom")
    assert len(v.failures) == 1


def test_error_wins_over_failures_of_the_other_side():
    ref = in_place_ref([[1, 2]])
    v = judge(out("a", [[1, 3]], [2]), out("b", None, None, error="E"), ref, compacted=False)
    assert v.status is Status.ERROR
    assert [m.check for m in v.failures] == [Check.OUT, Check.ERROR]


@pytest.mark.parametrize("bad_out,expected", [
    (None, "returned nothing, expected int32 (1, 2) on cpu"),
    ([1, 2], "returned list, expected int32 (1, 2) on cpu"),
    (torch.tensor([[1, 2]], dtype=torch.int64), "returned torch.int64 (1, 2) on cpu, expected int32 (1, 2) on cpu"),
    (t32([[1, 2, 3]]), "returned torch.int32 (1, 3) on cpu, expected int32 (1, 2) on cpu"),
    (t32([1, 2]), "returned torch.int32 (2,) on cpu, expected int32 (1, 2) on cpu"),
])
@pytest.mark.parametrize("compacted", [False, True])
def test_output_of_the_wrong_kind_is_a_shape_failure(bad_out, expected, compacted):
    ref = (compacted_ref if compacted else in_place_ref)([[1, 2]])
    bad = Output("b", bad_out, ref.counts.clone(), TILED2)
    v = judge(good(ref), bad, ref, compacted=compacted)
    assert v.status is Status.FAIL
    assert len(v.failures) == 1  # nothing else is compared once the output is unusable
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.values, m.lanes, m.rows) == (Check.SHAPE, "b", -1, -1, {}, 0, 0)
    assert m.message == expected
    assert not shape_ok(bad, ref, counts_returned=True)
    assert proof_of_pass(bad, ref, _Cfg(compacted, True)) is None


@pytest.mark.parametrize("bad_counts,expected", [
    (None, "returned counts nothing, expected int32 (2,) on cpu"),
    ((2, 1), "returned counts tuple, expected int32 (2,) on cpu"),
    (torch.tensor([2, 1], dtype=torch.int64), "returned counts torch.int64 (2,) on cpu, expected int32 (2,) on cpu"),
    (t32([[2, 1]]), "returned counts torch.int32 (1, 2) on cpu, expected int32 (2,) on cpu"),
    (t32([2, 1, 0]), "returned counts torch.int32 (3,) on cpu, expected int32 (2,) on cpu"),
])
def test_counts_of_the_wrong_kind_are_a_shape_failure(bad_counts, expected):
    # The values are right (int64 [2, 1] equals the oracle's): only the kind is wrong.
    ref = compacted_ref([[5, 6], [7, -1]])
    bad = Output("b", ref.out.clone(), bad_counts, TILED2)
    v = judge(good(ref), bad, ref)
    assert v.status is Status.FAIL
    assert [(m.check, m.impl, m.row, m.col, m.values, m.lanes, m.rows, m.message) for m in v.failures] == [
        (Check.SHAPE, "b", -1, -1, {}, 0, 0, expected)]
    assert not shape_ok(bad, ref, counts_returned=True)
    assert shape_ok(bad, ref, counts_returned=False)  # counts not asked for: not looked at
    assert proof_of_pass(bad, ref, _Cfg(True, True)) is None


def test_counts_not_returned_are_not_judged():
    ref = compacted_ref([[5, 6]])
    v = judge(out("a", ref.out.clone(), None), out("b", ref.out.clone(), t32([99])), ref, counts_returned=False)
    assert v.passed and v.status is Status.PASS and v.failures == []


def test_shape_failure_of_the_counts_still_judges_the_output():
    ref = compacted_ref([[5, 6]])
    v = judge(good(ref), out("b", [[6, 6]], None, contract=ORDERED), ref)
    assert [m.check for m in v.failures] == [Check.SHAPE, Check.PREFIX_SET]


def test_shape_ok_on_a_good_output_and_an_error():
    ref = compacted_ref([[5, 6]])
    assert shape_ok(good(ref), ref, True) and shape_ok(good(ref), ref, False)
    errored = Output("b", ref.out.clone(), ref.counts.clone(), TILED2, error="E")
    assert not shape_ok(errored, ref, False)


# ---------------------------------------------------------------- in place and counts


def test_in_place_lanes_fields():
    ref = in_place_ref([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    bad = ref.out.clone()
    bad[1, 2] = 70
    bad[1, 3] = 80
    bad[2, 0] = 90
    v = judge(good(ref, "a"), out("b", bad, ref.counts.clone()), ref, compacted=False)
    assert v.status is Status.FAIL and len(v.failures) == 1
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.OUT, "b", 1, 2, 3, 2)
    assert m.values == {"a": 7, "b": 70, "oracle": 7}
    assert m.message == "output differs from the oracle"
    assert v.mismatch_lanes == 3 and v.mismatch_rows == 2


def test_counts_fields():
    ref = in_place_ref([[1, -1], [-1, -1], [3, 4]])
    v = judge(good(ref, "a"), out("b", ref.out.clone(), [1, 1, 1]), ref, compacted=False)
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.COUNTS, "b", 1, -1, 2, 2)
    assert m.values == {"a": 0, "b": 1, "oracle": 0}
    assert m.message == "valid count differs from the oracle"
    assert m.line() == ("[counts] b: valid count differs from the oracle at row 1 (a=0, b=1, oracle=0); "
                        "2 rows whose count differs")
    # A count failure differs in rows, not lanes: the results table's lane count says so.
    assert v.mismatch_lanes == 0 and v.mismatch_rows == 2


def test_both_sides_failing_are_both_reported_in_order():
    ref = in_place_ref([[1, 2]])
    v = judge(out("a", [[1, 3]], [2]), out("b", [[0, 2]], [2]), ref, compacted=False)
    assert [(m.impl, m.col) for m in v.failures] == [("a", 1), ("b", 0)]
    assert v.summary() == (
        "case: FAIL — [out] a: output differs from the oracle at row 0, col 1 (a=3, b=2, oracle=2); "
        "1 lane in 1 row differs (+1 more)")


# ---------------------------------------------------------------- compaction: tail and set


def test_tail_fields():
    ref = compacted_ref([[5, -1, 6, -1], [-1, -1, -1, -1]])
    bad = ref.out.clone()
    bad[0, 3] = 9
    bad[1, 0] = 9
    bad[1, 1] = 9
    v = judge(good(ref), out("b", bad, ref.counts.clone()), ref)
    assert [m.check for m in v.failures] == [Check.TAIL]
    m = v.first
    assert (m.impl, m.row, m.col, m.lanes, m.rows) == ("b", 0, 3, 3, 2)
    assert m.values == {"a": -1, "b": 9, "oracle": -1}
    assert m.message == "lane past the valid count is not -1"


def test_value_outside_the_oracles_prefix():
    ref = compacted_ref([[5, 6, 7, -1]])
    v = judge(good(ref), out("b", [[5, 8, 7, -1]], [3]), ref)
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.PREFIX_SET, "b", 0, 1, 1, 1)
    assert m.values == {"a": 6, "b": 8, "oracle": 6}
    assert m.message == ("compacted prefix holds other values than the oracle's "
                         "(value 8: 1× here, 0× in the oracle's prefix)")


def test_prefix_repeating_one_oracle_value_in_place_of_another():
    # Every value of b's prefix is one the oracle's prefix holds: membership alone
    # sees nothing wrong. The lane named must be the one that really differs (col 2),
    # not a position in sorted arrays.
    ref = compacted_ref([[4, 1, 9, 3]])
    v = judge(good(ref), out("b", [[4, 1, 4, 3]], [4], contract=ORDERED), ref)
    assert [m.check for m in v.failures] == [Check.PREFIX_SET]
    m = v.first
    assert (m.impl, m.row, m.col, m.lanes, m.rows) == ("b", 0, 2, 1, 1)
    assert m.values == {"a": 9, "b": 4, "oracle": 9}
    assert "value 4: 2× here, 1× in the oracle's prefix" in m.message


def test_named_lane_differs_when_the_extra_value_sits_elsewhere_first():
    # b = [5, 5, 7] against the oracle's [7, 5, 6]: the first 5 of b is at col 0,
    # where the oracle holds 7, but the lane a reader must see is one where b's
    # value is surplus *and* differs: col 0 (b=5, oracle=7) qualifies, col 1 does not.
    ref = compacted_ref([[7, 5, 6]])
    v = judge(good(ref), out("b", [[5, 5, 7]], [3], contract=ORDERED), ref)
    m = v.first
    assert m.check is Check.PREFIX_SET
    assert m.values["b"] != m.values["oracle"]
    assert (m.col, m.values["b"], m.values["oracle"]) == (0, 5, 7)
    assert m.lanes == 1


def test_valid_minus_one_from_a_padded_table_and_a_dropped_lane():
    # A padded block table makes -1 the value of a *valid* lane (base -1, offset B-1).
    # b drops a later lane to -1: -1 is "in" the oracle's prefix, and the dropped
    # value 8 also occurs elsewhere in the prefix. The lane named must be col 4.
    lanes = [[8, -1, 3, 7, 8, 2, -1, -1]]
    valid = [[True, True, True, True, True, True, False, False]]
    ref = compacted_ref(lanes, valid)
    assert ref.out.tolist() == [[8, -1, 3, 7, 8, 2, -1, -1]] and ref.counts.tolist() == [6]
    bad = ref.out.clone()
    bad[0, 4] = -1
    v = judge(good(ref, "old"), out("B", bad, ref.counts.clone(), contract=ORDERED), ref)
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.PREFIX_SET, "B", 0, 4, 1, 1)
    assert m.values == {"old": 8, "B": -1, "oracle": 8}
    assert "value -1: 2× here, 1× in the oracle's prefix" in m.message


def test_set_failure_lanes_count_the_multiset_difference_over_rows():
    ref = compacted_ref([[1, 2, 3, 4], [5, 6, -1, -1], [7, 8, 9, -1]])
    bad = ref.out.clone()
    bad[0] = t32([2, 1, 9, 9])  # two values the oracle lacks; order alone would move 4
    bad[2, 0] = 8  # one
    v = judge(good(ref), out("b", bad, ref.counts.clone()), ref)
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.PREFIX_SET, "b", 0, 2, 3, 2)
    assert len(v.failures) == 1  # no order failure on top of a set failure


def test_the_6eb5809148de_regression(tmp_path, monkeypatch):
    """Issue 10: case 6eb5809148de (K=2048, one row, padded table, so -1 is a valid
    lane's value) with a B that drops the last lane that is not -1 of rows holding
    more than 100. Main said "col 27 (old=52463, B=52463, oracle=52463)"; the lane
    that differs is col 596 (old 59148, B -1)."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.judge.runner import run_case

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "brk_drop_last.py").write_text(textwrap.dedent('''
        import kernels_new as _real
        triton_convert_req_index_to_global_index = _real.triton_convert_req_index_to_global_index
        def triton_filter_and_convert_dcp_index(*args, **kwargs):
            res = _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
            out, counts = res if isinstance(res, tuple) else (res, None)
            if args[3] > 1 and kwargs.get("compact_valid_to_front", True):
                out = out.clone()
                for r in range(out.shape[0]):
                    n = int((out[r] != -1).sum())
                    if n > 100:
                        out[r, n - 1] = -1
            return (out, counts) if counts is not None else out
    '''))
    sys.modules.pop("brk_drop_last", None)
    config = CaseConfig(mode="dcp", tokens=1, topk=2048, num_reqs=3, invalid_ratio=0.3, out_of_range=0.1,
                        negatives="any", table="padded", dcp_size=2, dcp_rank=0, interleave=64, counts=False)
    assert config.case_id == "6eb5809148de"
    v = run_case(config, "old", "brk_drop_last").verdict
    m = v.first
    assert (m.check, m.row, m.col, m.lanes, m.rows) == (Check.PREFIX_SET, 0, 596, 1, 1)
    assert (m.values["brk_drop_last"], m.values["oracle"]) == (-1, 59148)
    from remap_ab import runtime

    if runtime.current() == "cpu":
        # The interpreter runs old's tiles in column order; on a GPU old's compacted
        # order is a race, so its value at col 596 is whichever tile won there.
        assert m.values["old"] == 59148


# ---------------------------------------------------------------- compaction: order


def test_column_order_promised_fields():
    ref = compacted_ref([[1, 2, 3, 4]])
    v = judge(good(ref, "a", ORDERED), out("b", [[1, 3, 2, 4]], [4], contract=ORDERED), ref)
    m = v.first
    assert [x.check for x in v.failures] == [Check.ORDER]
    assert (m.impl, m.row, m.col, m.lanes, m.rows) == ("b", 0, 1, 2, 1)
    assert m.values == {"a": 2, "b": 3, "oracle": 2}
    assert m.message == "compacted prefix is not in column order (single tile)"


def test_admissible_three_segment_order_passes_and_is_reported_as_information():
    ref = compacted_ref([[1, 2, 3, 4, 5, 6]])
    v = judge(good(ref, "a", ORDERED), out("b", [[3, 4, 1, 2, 5, 6]], [6]), ref)
    assert v.passed and v.failures == []
    assert v.order_differs and v.order_differs_rows == 1
    assert v.info == ["prefix order differs between a and b in 1 of 1 rows "
                      "(allowed: a: single tile; b: tiles of 2)"]
    assert v.summary() == "case: PASS (" + v.info[0] + ")"
    for perm in ([5, 6, 3, 4, 1, 2], [1, 2, 5, 6, 3, 4], [3, 4, 5, 6, 1, 2]):
        assert judge(good(ref), out("b", [perm], [6]), ref).passed, perm


def test_values_repeated_across_tiles_are_no_licence_to_reorder():
    # Tiles [1, 2] and [2, 1]: [2, 1, 1, 2] is admissible (second tile first);
    # [1, 2, 1, 2] is the same multiset but no concatenation of the two tiles.
    ref = compacted_ref([[1, 2, 2, 1]])
    assert judge(good(ref), out("b", [[2, 1, 1, 2]], [4]), ref).passed
    v = judge(good(ref), out("b", [[1, 2, 1, 2]], [4]), ref)
    m = v.first
    assert [x.check for x in v.failures] == [Check.ORDER]
    assert (m.impl, m.row, m.col, m.lanes, m.rows) == ("b", 0, 2, 2, 1)
    assert m.message == "compacted prefix is no concatenation of 2-wide tile segments (tiles of 2)"


def test_only_inadmissible_rows_are_counted():
    ref = compacted_ref([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4]])
    bad = t32([[3, 4, 1, 2], [6, 5, 7, 8], [1, 2, 4, 3]])
    v = judge(good(ref), out("b", bad, [4, 4, 4]), ref)
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == (Check.ORDER, "b", 1, 0, 4, 2)


def test_passing_identical_outputs_have_no_order_note():
    ref = compacted_ref([[1, 2, 3, 4]])
    v = judge(good(ref, "a"), good(ref, "b"), ref)
    assert v.passed and v.info == [] and not v.order_differs and v.order_differs_rows == 0
    assert v.summary() == "case: PASS" and v.describe() == "case case: PASS"


def test_in_place_outputs_get_no_order_note_even_when_they_differ():
    ref = in_place_ref([[1, 2]])
    v = judge(good(ref, "a"), out("b", [[1, 3]], [2]), ref, compacted=False)
    assert not v.order_differs and v.info == []


def test_note_order_differs_default_why():
    v = Verdict("c", Status.PASS)
    a = Output("a", None, None, OrderContract(False, 2))
    b = Output("b", None, None, OrderContract(True, 4, "one tile"))
    note_order_differs(v, a, b, 0, 3)
    assert not v.order_differs and v.info == []
    note_order_differs(v, a, b, 2, 3)
    assert (v.order_differs, v.order_differs_rows) == (True, 2)
    assert v.info == ["prefix order differs between a and b in 2 of 3 rows (allowed: a: tiled; b: one tile)"]
    w = Verdict("c", Status.PASS)
    note_order_differs(w, b, a, 1, 3)
    assert w.info == ["prefix order differs between b and a in 1 of 3 rows (allowed: b: one tile; a: tiled)"]


def test_permutation_search_tries_equal_segments_once():
    # Fifteen equal one-lane segments and a last value that no order can place: a
    # search that tried every equal segment at every depth would take 15! steps.
    lanes = [7] * 15 + [8]
    start = time.perf_counter()
    assert not is_segment_permutation([7] * 15 + [9], lanes, [True] * 16, 1)
    assert time.perf_counter() - start < 1.0


def test_tile_segments_and_permutation_rule():
    lanes, valid = [1, 2, 3, 4, 5, 6], [True, False, False, False, True, True]
    assert tile_segments(lanes, valid, 2) == [[1], [5, 6]]
    assert tile_segments(lanes, valid, 3) == [[1], [5, 6]]
    assert tile_segments(lanes, valid, 4) == [[1], [5, 6]]
    assert tile_segments(lanes, [True] * 6, 4) == [[1, 2, 3, 4], [5, 6]]
    assert is_segment_permutation([5, 6, 1, -1], lanes, valid, 2)
    assert not is_segment_permutation([6, 5, 1, -1], lanes, valid, 2)
    # Equal segments are tried once, and the search goes on to the others.
    assert is_segment_permutation([2, 1, 1], [1, 1, 2], [True] * 3, 1)
    # Prefix ambiguity: [1] is a prefix of [1, 2]; only a full search finds [1][1, 2].
    assert is_segment_permutation([1, 1, 2], [1, 2, 1, -1], [True, True, True, False], 2)


# ---------------------------------------------------------------- the fast proof


class _Cfg:
    def __init__(self, compacts: bool, counts_returned: bool):
        self.compacts, self.counts_returned = compacts, counts_returned


def test_proof_of_pass_on_hand_made_cases():
    ref = compacted_ref([[1, 2, 3, 4, 5, 6], [1, 2, 2, 1, -1, -1]])
    cfg = _Cfg(True, True)
    swapped = out("b", [[3, 4, 1, 2, 5, 6], [2, 1, 1, 2, -1, -1]], [6, 4])
    assert bool(proof_of_pass(good(ref), ref, cfg))
    assert bool(proof_of_pass(swapped, ref, cfg))
    assert not bool(proof_of_pass(swapped, ref, cfg, witness=False))  # exact equality only
    assert not bool(proof_of_pass(out("b", swapped.out, [6, 3]), ref, cfg))  # counts
    assert bool(proof_of_pass(out("b", swapped.out, None), ref, _Cfg(True, False)))
    repeated = out("b", [[1, 2, 3, 4, 5, 6], [1, 2, 1, 2, -1, -1]], [6, 4])
    assert not bool(proof_of_pass(repeated, ref, cfg))
    tail = out("b", [[1, 2, 3, 4, 5, 6], [1, 2, 2, 1, -1, 0]], [6, 4])
    assert not bool(proof_of_pass(tail, ref, cfg))
    ordered = Output("b", swapped.out, swapped.counts, ORDERED)
    assert not bool(proof_of_pass(ordered, ref, cfg))  # column order promised: no witness
    assert not bool(proof_of_pass(swapped, ref, _Cfg(False, True)))  # in place: exact only


def test_segment_witness_rejects_a_segment_width_that_does_not_tile_the_row():
    ref = compacted_ref([[1, 2, 3, 4, 5, 6]])
    assert bool(segment_witness(ref.out, ref, 2)) and bool(segment_witness(ref.out, ref, 3))
    assert not bool(segment_witness(ref.out, ref, 4))
    assert not bool(segment_witness(ref.out, ref, 0))


def test_segment_witness_edges():
    ref = compacted_ref([[1, 2, 3, -1, 5, 6], [4, -1, -1, -1, -1, -1]])
    # Segments of one lane: any order of the valid values is a witness.
    assert bool(segment_witness(t32([[6, 3, 1, 5, 2, -1], [4, -1, -1, -1, -1, -1]]), ref, 1))
    # The lane right at the count must be -1 too.
    assert not bool(segment_witness(t32([[1, 2, 3, 5, 6, 0], [4, -1, -1, -1, -1, -1]]), ref, 1))
    assert not bool(segment_witness(t32([[1, 2, 3, 5, 6, -1], [4, 7, -1, -1, -1, -1]]), ref, 2))
    assert segment_witness(ref.out, ref, 2).dtype == torch.bool
    assert segment_witness(ref.out, ref, 4).dtype == torch.bool  # the refusal too
    assert segment_witness(ref.out, ref, 2).shape == ()
    # A full row (count == K): the walk reads up to the last column and no further.
    full = compacted_ref([[1, 2, 3, 4]])
    assert bool(segment_witness(t32([[3, 4, 1, 2]]), full, 2))
    nearly = compacted_ref([[1, 2, 3, -1]])
    assert bool(segment_witness(t32([[3, 1, 2, -1]]), nearly, 2))
    assert not bool(segment_witness(t32([[3, 2, 1, -1]]), nearly, 2))


def test_rows_witnessed_row_by_row():
    ref = compacted_ref([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, -1, -1], [-1, -1, -1, -1]])
    out_ = t32([[3, 4, 1, 2], [2, 1, 3, 4], [1, 2, -1, 5], [-1, -1, -1, -1]])
    assert rows_witnessed(out_, ref, 2).tolist() == [True, False, False, True]
    assert rows_witnessed(out_, ref, 3).tolist() == [False] * 4
    assert rows_witnessed(out_, ref, 2).dtype == torch.bool
    assert rows_witnessed(out_, ref, 3).dtype == torch.bool  # the refusal too


def test_segment_witness_needs_every_segment_and_the_whole_count():
    # A row that stops early or skips a segment is no witness, even with a -1 tail.
    ref = compacted_ref([[1, 2, 3, 4]])
    assert not bool(segment_witness(t32([[1, 2, 1, 2]]), ref, 2))
    ref2 = Reference(ref.lanes, ref.valid, ref.out, t32([2]))  # a count short of the segments
    assert not bool(segment_witness(t32([[1, 2, -1, -1]]), ref2, 2))


# ---------------------------------------------------------------- verdict data


def _failing_verdict() -> Verdict:
    ref = in_place_ref([[1, -1]])
    return judge(good(ref, "a"), out("b", [[1, 5]], [1]), ref, compacted=False)


def test_verdict_round_trip_through_json():
    v = _failing_verdict()
    d = json.loads(json.dumps(v.to_dict()))
    assert d["status"] == "fail" and d["failures"][0]["check"] == "out"
    back = Verdict.from_dict(d)
    assert back == v and back.status is Status.FAIL and back.first.check is Check.OUT
    assert back.to_dict() == v.to_dict()
    p = Verdict("c", Status.PASS, info=["x"], order_differs=True, order_differs_rows=3)
    assert Verdict.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_status_and_check_words_become_enums():
    m = Mismatch("crash", "a/b", -1, -1, {}, 0, 0, "died")
    assert m.check is Check.CRASH
    assert Verdict("c", "timeout", [m]).status is Status.TIMEOUT
    with pytest.raises(ValueError):
        Mismatch("nonsense", "a", 0, 0, {}, 0, 0, "")
    with pytest.raises(ValueError):
        Verdict("c", "passed")


def test_describe_lists_every_failure_and_info():
    v = _failing_verdict()
    v.info.append("note")
    lines = v.describe().splitlines()
    assert lines[0] == "case case: FAIL"
    assert lines[1].startswith("  FAIL [out] b: output differs from the oracle at row 0, col 1 (a=-1, b=5, oracle=-1)")
    assert lines[2] == "  info note"
    assert v.summary().startswith("case: FAIL — [out] b:") and "more" not in v.summary()


def _verdict_dict() -> dict:
    return _failing_verdict().to_dict()


_V, _F = "verdict field", "verdict field 'failures[0]."
_STATUSES = "one of pass, fail, error, crash, timeout"


@pytest.mark.parametrize("path,value,expected", [
    (("status",), "passed", f"{_V} 'status' is str 'passed', expected {_STATUSES}"),
    (("status",), 1, f"{_V} 'status' is int 1, expected {_STATUSES}"),
    (("case_id",), 7, f"{_V} 'case_id' is int 7, expected a string"),
    (("failures",), {}, f"{_V} 'failures' is dict {{}}, expected a list"),
    (("info",), "x", f"{_V} 'info' is str 'x', expected a list"),
    (("info",), [1], f"{_V} 'info[0]' is int 1, expected a string"),
    (("order_differs",), 0, f"{_V} 'order_differs' is int 0, expected true or false"),
    (("order_differs_rows",), True, f"{_V} 'order_differs_rows' is bool true, expected an integer"),
    (("order_differs_rows",), "2", f"{_V} 'order_differs_rows' is str '2', expected an integer"),
    (("failures", 0, "check"), "wrong", f"{_F}check' is str 'wrong', expected one of " + ", ".join(c.value for c in (*Check, *RemapCheck))),
    (("failures", 0, "row"), 1.5, f"{_F}row' is float 1.5, expected an integer"),
    (("failures", 0, "col"), None, f"{_F}col' is NoneType null, expected an integer"),
    (("failures", 0, "lanes"), "1", f"{_F}lanes' is str '1', expected an integer"),
    (("failures", 0, "rows"), False, f"{_F}rows' is bool false, expected an integer"),
    (("failures", 0, "impl"), 3, f"{_F}impl' is int 3, expected a string"),
    (("failures", 0, "message"), [], f"{_F}message' is list [], expected a string"),
    (("failures", 0, "values"), [], f"{_F}values' is list [], expected an object"),
    (("failures", 0, "values", "b"), "5", f"{_F}values.b' is str '5', expected an integer or null"),
    (("failures", 0, "values", "b"), 5.0, f"{_F}values.b' is float 5.0, expected an integer or null"),
    (("failures", 0, "values", "b"), True, f"{_F}values.b' is bool true, expected an integer or null"),
    (("failures", 0), "oops", f"{_V} 'failures[0]' is str 'oops', expected an object"),
    (("failures", 0, "colour"), "red", f"{_F}colour' is not a known field"),
])
def test_from_dict_refuses_a_wrong_typed_field_naming_it(path, value, expected):
    d = _verdict_dict()
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ReportError) as info:
        Verdict.from_dict(d)
    assert str(info.value) == expected


@pytest.mark.parametrize("path", [
    ("status",), ("case_id",), ("failures",), ("info",), ("order_differs",), ("order_differs_rows",),
    ("failures", 0, "check"), ("failures", 0, "values"), ("failures", 0, "lanes"), ("failures", 0, "message"),
    ("failures", 0, "impl"), ("failures", 0, "row"), ("failures", 0, "col"), ("failures", 0, "rows"),
])
def test_from_dict_refuses_a_missing_field_naming_it(path):
    d = _verdict_dict()
    target = d
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    where = "failures[0]." if path[0] == "failures" and len(path) > 1 else ""
    with pytest.raises(ReportError) as info:
        Verdict.from_dict(d)
    assert str(info.value) == f"verdict field '{where}{path[-1]}' is missing"


def test_from_dict_refuses_what_is_no_object():
    with pytest.raises(ReportError) as info:
        Verdict.from_dict([])
    assert str(info.value) == "verdict is list [], expected an object"
    d = _verdict_dict()
    d["failures"][0] = 3
    with pytest.raises(ReportError) as info:
        Verdict.from_dict(d)
    assert str(info.value) == "verdict field 'failures[0]' is int 3, expected an object"
    d = _verdict_dict()
    d["info"] = ["fine", 4]
    with pytest.raises(ReportError) as info:
        Verdict.from_dict(d)
    assert str(info.value) == "verdict field 'info[1]' is int 4, expected a string"


def test_from_dict_messages():
    d = _verdict_dict()
    d["failures"][0]["values"]["b"] = None
    assert Verdict.from_dict(d).first.values["b"] is None


def test_mismatch_line_wording():
    m = Mismatch(Check.OUT, "b", 0, 0, {"b": 1, "oracle": 2}, 1, 1, "m")
    assert m.line() == "[out] b: m at row 0, col 0 (b=1, oracle=2); 1 lane in 1 row differs"
    m = Mismatch(Check.COUNTS, "b", 3, -1, {"b": None}, 2, 1, "m")
    assert m.line() == "[counts] b: m at row 3 (b=None); 1 row whose count differs"
    m = Mismatch(Check.OUT, "b", 1, 2, {}, 1, 2, "m")
    assert m.line() == "[out] b: m at row 1, col 2; 1 lane in 2 rows differs"
    m = Mismatch(Check.MEMCHECK, "b", 1, 2, {}, 3, 1, "load past x")
    assert m.line() == "[memcheck] b: load past x at row 1, col 2; 3 accesses in 1 row outside every argument tensor"


def test_failures_without_an_output_say_what_happened_and_nothing_of_rows_or_lanes():
    # An exception: what was raised, by which implementation; no row, lane or value.
    m = Mismatch(Check.ERROR, "raiser", -1, -1, {}, 0, 0, "RuntimeError: boom")
    assert m.line() == "[error] raiser raised RuntimeError: boom"
    assert m.status is Status.ERROR
    v = Verdict("c", Status.ERROR, [m])
    assert v.describe() == "case c: ERROR\n  ERROR [error] raiser raised RuntimeError: boom"
    assert v.summary() == "c: ERROR — [error] raiser raised RuntimeError: boom"
    m = Mismatch(Check.SHAPE, "b", -1, -1, {}, 0, 0, "returned nothing, expected int32 (2, 4) on cpu")
    assert m.line() == "[shape] b: returned nothing, expected int32 (2, 4) on cpu" and m.status is Status.ERROR
    m = Mismatch(Check.CRASH, "a/b", -1, -1, {}, 0, 0, "worker killed by signal SIGSEGV")
    assert m.line() == "[crash] a/b: worker killed by signal SIGSEGV" and m.status is Status.CRASH
    m = Mismatch(Check.TIMEOUT, "a/b", -1, -1, {}, 0, 0, "no verdict within --case-timeout 1 s")
    assert m.line() == "[timeout] a/b: no verdict within --case-timeout 1 s" and m.status is Status.TIMEOUT
    for line in (Verdict("c", Status.ERROR, [Mismatch(Check.ERROR, "x", -1, -1, {}, 0, 0, "E: e")]).describe(),):
        assert "row" not in line and "lane" not in line and "FAIL" not in line


def test_summary_joins_info_lines():
    v = Verdict("c", Status.PASS, info=["x", "y"])
    assert v.summary() == "c: PASS (x; y)"
    assert v.describe() == "case c: PASS\n  info x\n  info y"
    assert v.first is None and v.mismatch_lanes == 0 and v.mismatch_rows == 0


def test_values_of_the_other_side_that_has_no_such_lane_are_none():
    ref = in_place_ref([[1, 2]])
    v = judge(out("a", [[1, 3]], [2]), out("b", None, None), ref, compacted=False)
    assert v.failures[0].values == {"a": 3, "b": None, "oracle": 2}
    v = judge(out("a", [[1, 3]], [2]), out("b", [1, 2], [2]), ref, compacted=False)  # 1-D: no (0, 1)
    assert v.failures[0].values == {"a": 3, "b": None, "oracle": 2}
    v = judge(out("a", [[1, 2]], [1]), out("b", [[1, 2]], None), ref, compacted=False)
    assert v.failures[0].check is Check.COUNTS and v.failures[0].values == {"a": 1, "b": None, "oracle": 2}


def test_output_on_another_device_is_a_shape_failure():
    ref = compacted_ref([[5, 6]])
    elsewhere = torch.empty((1, 2), dtype=I32, device="meta")
    v = judge(good(ref), Output("b", elsewhere, ref.counts.clone(), TILED2), ref)
    assert v.first.message == "returned torch.int32 (1, 2) on meta, expected int32 (1, 2) on cpu"
    counts_elsewhere = torch.empty((1,), dtype=I32, device="meta")
    bad = Output("b", ref.out.clone(), counts_elsewhere, TILED2)
    v = judge(good(ref), bad, ref)
    assert v.first.message == "returned counts torch.int32 (1,) on meta, expected int32 (1,) on cpu"
    assert not shape_ok(bad, ref, True)


def test_first_differing_lane_skips_values_the_oracle_has_as_often():
    # b = [7, 5, 5] against [5, 7, 6]: every column differs; 7 appears once in both,
    # 5 twice in b and once in the oracle's: the lane named is col 1, b's first 5.
    ref = compacted_ref([[5, 7, 6]])
    v = judge(good(ref), out("b", [[7, 5, 5]], [3], contract=ORDERED), ref)
    m = v.first
    assert (m.check, m.col, m.lanes) == (Check.PREFIX_SET, 1, 1)
    assert m.values == {"a": 7, "b": 5, "oracle": 7}
    assert m.message.endswith("(value 5: 2× here, 1× in the oracle's prefix)")


def test_order_note_counts_rows_of_many():
    ref = compacted_ref([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4]])
    b = out("b", [[3, 4, 1, 2], [5, 6, 7, 8], [3, 4, 1, 2]], [4, 4, 4])
    v = judge(good(ref, "a", ORDERED), b, ref)
    assert v.passed and v.order_differs_rows == 2
    assert v.info[0].startswith("prefix order differs between a and b in 2 of 3 rows")


def test_mismatch_totals_are_the_largest_failure():
    ref = in_place_ref([[1, 2, 3], [4, 5, 6]])
    v = judge(out("a", [[0, 2, 3], [4, 5, 6]], [3, 3]), out("b", [[0, 0, 3], [0, 5, 6]], [3, 3]), ref, compacted=False)
    assert [(m.lanes, m.rows) for m in v.failures] == [(1, 1), (3, 2)]
    assert (v.mismatch_lanes, v.mismatch_rows) == (3, 2)


def test_output_defaults():
    o = Output("a", None, None, OrderContract(True, 4))
    assert (o.error, o.seconds, o.contract.why) == (None, 0.0, "")
    v = Verdict("c", Status.PASS)
    assert (v.failures, v.info, v.order_differs, v.order_differs_rows) == ([], [], False, 0)
