"""The judge's verdicts beyond the values, fed as plain data (no kernels, no device):
the call findings (inputs written, aliasing, sync, stream, graph), the side the
device already proved, the oracle's own problem, memcheck reports, the backend-view
check, the verdicts of lost cases and of rejection calls.

Part of the fast selection that mutation testing of remap_ab/subjects/remap/judge/compare.py runs
(docs/judge-mutation.md): every field and line of each verdict is asserted, so a
mutant of the judge that changes any of them fails here. The collaborators are the
real data classes (CallFinding, MemcheckReport, backend_views.Views,
rejections.Attempt); only an implementation's private inputs are stood in for, by an
object with the one method compare calls (``writes``)."""

from __future__ import annotations

import pytest
import torch

from remap_ab.sanitizer.memcheck import Finding, MemcheckReport
from remap_ab.status import Check, Status, check_named
from remap_ab.subjects.remap.case.backend_views import MODELS, Views, row_evidence
from remap_ab.subjects.remap.case.checks import RemapCheck
from remap_ab.subjects.remap.judge.compare import (
    CallFinding,
    Mismatch,
    OrderContract,
    Output,
    Reference,
    Verdict,
    compare,
    count_rows,
    differ,
    judge_rejection,
    lost_verdict,
    memcheck_mismatches,
    note_order_differs,
    plural,
)
from remap_ab.subjects.remap.judge.rejections import Attempt

I32 = torch.int32
TILED = OrderContract(False, 2, "tiles of 2")
ORDERED = OrderContract(True, 4, "single tile")


def t32(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=I32)


def ref_of(rows, compacted: bool = False) -> Reference:
    """The oracle's view of a case whose valid lanes are the values other than -1."""
    lanes = t32(rows)
    valid = lanes != -1
    out = torch.full_like(lanes, -1)
    if compacted:
        for r in range(lanes.shape[0]):
            vals = lanes[r][valid[r]]
            out[r, : len(vals)] = vals
    else:
        out = lanes.clone()
    return Reference(lanes=lanes, valid=valid, out=out, counts=valid.sum(1, dtype=I32))


def side(name: str, ref: Reference, rows=None, counts=None, contract=TILED, **kw) -> Output:
    """An output equal to the oracle's, or with ``rows`` / ``counts`` in its place."""
    o = ref.out.clone() if rows is None else t32(rows)
    c = ref.counts.clone() if counts is None else t32(counts)
    return Output(name, o, c, contract, **kw)


def fields(m: Mismatch) -> tuple:
    return (m.check, m.impl, m.row, m.col, m.values, m.lanes, m.rows, m.message)


def judge(a: Output, b: Output, ref: Reference, *, compacted=False, counts_returned=True, **kw) -> Verdict:
    return compare("c1", a, b, ref, compacted=compacted, counts_returned=counts_returned, **kw)


class Private:
    """Stands in for call.PrivateInputs: ``writes`` says what it is told to, and
    records each question it was asked."""

    def __init__(self, found: list):
        self.found = found
        self.asked: list = []

    def writes(self, index: int, impl: str) -> list:
        self.asked.append((index, impl))
        return list(self.found)


WROTE = CallFinding(Check.INPUTS_WRITTEN, "b wrote into its input topk: 1 of its elements changed")


# ---------------------------------------------------------------- call findings


@pytest.mark.parametrize("check", [Check.INPUTS_WRITTEN, Check.ALIASED, Check.SYNC, Check.STREAM, Check.GRAPH])
def test_each_call_finding_fails_its_implementation(check):
    ref = ref_of([[1, 2]])
    finding = CallFinding(check, f"what {check} found")
    v = judge(side("a", ref), side("b", ref, findings=[finding]), ref)
    assert v.status is Status.FAIL and not v.passed
    assert [fields(m) for m in v.failures] == [(check, "b", -1, -1, {}, 0, 0, f"what {check} found")]
    assert v.first.status is Status.FAIL
    assert v.first_line() == f"[{check.value}] b: what {check} found"
    assert v.summary() == f"c1: FAIL — [{check.value}] b: what {check} found"
    assert v.info == [] and v.mismatch_lanes == 0 and v.mismatch_rows == 0


def test_findings_follow_their_sides_value_failures_in_order():
    ref = ref_of([[1, 2]])
    a = side("a", ref, rows=[[1, 3]], findings=[CallFinding(Check.SYNC, "s"), CallFinding(Check.GRAPH, "g")])
    b = side("b", ref, findings=[CallFinding(Check.STREAM, "t")])
    v = judge(a, b, ref)
    assert [(m.check, m.impl, m.message) for m in v.failures] == [
        (Check.OUT, "a", "output differs from the oracle"), (Check.SYNC, "a", "s"), (Check.GRAPH, "a", "g"),
        (Check.STREAM, "b", "t")]
    assert v.summary().endswith(" (+3 more)")
    assert a.findings == [CallFinding(Check.SYNC, "s"), CallFinding(Check.GRAPH, "g")]  # not consumed


def test_a_findings_evidence_goes_with_its_failure_as_a_copy():
    ref = ref_of([[1, 2]])
    evidence = {"frame": "b.py:20", "tensors": ["out"]}
    v = judge(side("a", ref), side("b", ref, findings=[CallFinding(Check.SYNC, "s", evidence)]), ref)
    (m,) = v.failures
    assert m.evidence == {"frame": "b.py:20", "tensors": ["out"]} and m.evidence is not evidence


def test_input_writes_are_asked_of_each_sides_private_inputs():
    ref = ref_of([[1, 2]])
    pa, pb = Private([]), Private([WROTE])
    v = judge(side("a", ref, guard=(pa, 3)), side("b", ref, guard=(pb, 5), findings=[CallFinding(Check.ALIASED, "al")]), ref)
    assert pa.asked == [(3, "a")] and pb.asked == [(5, "b")]
    assert [fields(m) for m in v.failures] == [
        (Check.INPUTS_WRITTEN, "b", -1, -1, {}, 0, 0, WROTE.message),
        (Check.ALIASED, "b", -1, -1, {}, 0, 0, "al")]  # the writes first, then the call's findings
    assert v.status is Status.FAIL


@pytest.mark.parametrize("unchanged,asked_a,asked_b", [
    ((True, False), [], [(0, "b")]),
    ((False, True), [(0, "a")], []),
    ((True, True), [], []),
])
def test_inputs_the_device_showed_unchanged_are_not_looked_at(unchanged, asked_a, asked_b):
    ref = ref_of([[1, 2]])
    pa, pb = Private([WROTE]), Private([WROTE])
    v = judge(side("a", ref, guard=(pa, 0)), side("b", ref, guard=(pb, 0)), ref, inputs_unchanged=unchanged)
    assert pa.asked == asked_a and pb.asked == asked_b
    assert [m.impl for m in v.failures] == [n for n, asked in (("a", asked_a), ("b", asked_b)) if asked]


def test_no_guard_no_input_check():
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref), side("b", ref), ref)
    assert v.passed and v.failures == [] and v.info == []


# ---------------------------------------------------------------- proven on the device


@pytest.mark.parametrize("proven,failing", [
    ((False, False), ["a", "b"]), ((True, False), ["b"]), ((False, True), ["a"]), ((True, True), [])])
def test_a_side_proven_on_the_device_is_not_compared_again(proven, failing):
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref, rows=[[0, 2]]), side("b", ref, rows=[[1, 0]]), ref, proven=proven)
    assert [m.impl for m in v.failures] == failing
    assert all(m.check is Check.OUT for m in v.failures)
    assert v.status is (Status.FAIL if failing else Status.PASS)


def test_a_proven_side_still_has_its_call_findings_judged():
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref), side("b", ref, rows=[[9, 9]], findings=[CallFinding(Check.SYNC, "s")]), ref,
              proven=(True, True))
    assert [fields(m) for m in v.failures] == [(Check.SYNC, "b", -1, -1, {}, 0, 0, "s")]


# ---------------------------------------------------------------- the oracle's problem


def test_an_oracle_problem_is_an_error_naming_the_oracle_and_nothing_else():
    ref = ref_of([[1, 2]])
    broken = side("b", ref, rows=[[9, 9]], findings=[CallFinding(Check.SYNC, "s")], checks=("sync",))
    v = compare("c7", side("a", ref), broken, ref, compacted=True, counts_returned=True, oracle_problem="it disagreed",
                caller="FA3", memchecked=True)
    assert v.case_id == "c7" and v.status is Status.ERROR
    assert [fields(m) for m in v.failures] == [
        (Check.ERROR, "oracle", -1, -1, {}, 0, 0, "internal: it disagreed (a remap-ab bug: please file it)")]
    assert v.info == [] and v.caller == "" and v.backend_view == "" and v.hazard_rows == 0
    assert not v.order_differs
    assert v.first_line() == "[error] oracle raised internal: it disagreed (a remap-ab bug: please file it)"


# ---------------------------------------------------------------- production checks said


def test_the_checks_that_ran_are_said_sorted_and_once():
    ref = ref_of([[1, 2]])
    a = side("a", ref, checks=("sync", "stream"))
    b = side("b", ref, checks=("graph", "sync"))
    v = judge(a, b, ref)
    assert v.passed
    assert v.info == ["checked on the GPU as vLLM calls it: graph, stream, sync (a, b)"]
    assert v.summary() == "c1: PASS (checked on the GPU as vLLM calls it: graph, stream, sync (a, b))"
    v = judge(side("a", ref), side("b", ref, checks=("stream",)), ref)
    assert v.info == ["checked on the GPU as vLLM calls it: stream (a, b)"]


def test_checks_are_said_on_a_failure_but_not_on_an_error():
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref, checks=("sync",)), side("b", ref, rows=[[1, 3]]), ref)
    assert v.status is Status.FAIL and v.info == ["checked on the GPU as vLLM calls it: sync (a, b)"]
    v = judge(side("a", ref, checks=("sync",)), Output("b", None, None, TILED, error="E: e"), ref)
    assert v.status is Status.ERROR and v.info == []


def test_no_checks_no_line():
    ref = ref_of([[1, 2]])
    assert judge(side("a", ref), side("b", ref), ref).info == []


# ---------------------------------------------------------------- the caller and the order note


def test_the_caller_heads_the_lines_and_is_kept():
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref), side("b", ref, rows=[[1, 3]]), ref, caller="FA3, DCP 2")
    assert v.caller == "FA3, DCP 2"
    line = "[out] b: output differs from the oracle at row 0, col 1 (a=2, b=3, oracle=2); 1 lane in 1 row differs"
    assert v.first_line() == f"FA3, DCP 2: {line}"
    assert v.summary() == f"c1: FAIL — FA3, DCP 2: {line}"
    assert v.describe() == f"case c1: FAIL (FA3, DCP 2)\n  FAIL {line}"
    assert v.to_dict()["caller"] == "FA3, DCP 2"
    assert Verdict.from_dict(v.to_dict()) == v
    assert Verdict("c", Status.PASS, caller="X").first_line() == ""


def test_differing_rows_counted_by_the_batch_are_taken_as_given():
    ref = ref_of([[1, 2, 3, 4], [5, 6, 7, 8]], compacted=True)
    a, b = side("a", ref, contract=ORDERED), side("b", ref)
    v = judge(a, b, ref, compacted=True, differing_rows=2)
    assert v.passed and v.order_differs and v.order_differs_rows == 2
    assert v.info == ["prefix order differs between a and b in 2 of 2 rows (allowed: a: single tile; b: tiles of 2)"]
    v = judge(a, b, ref, compacted=True, differing_rows=0)
    assert not v.order_differs and v.order_differs_rows == 0 and v.info == []


def test_order_differs_is_counted_here_when_not_given():
    ref = ref_of([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, -1, -1]], compacted=True)
    b = side("b", ref, rows=[[3, 4, 1, 2], [7, 8, 5, 6], [1, 2, -1, -1]])
    v = judge(side("a", ref, contract=ORDERED), b, ref, compacted=True)
    assert v.passed and v.order_differs_rows == 2
    assert v.info == ["prefix order differs between a and b in 2 of 3 rows (allowed: a: single tile; b: tiles of 2)"]


def test_no_order_note_on_a_failing_compacted_case():
    ref = ref_of([[1, 2, 3, 4]], compacted=True)
    b = side("b", ref, rows=[[3, 4, 1, 2]], findings=[CallFinding(Check.SYNC, "s")])
    v = judge(side("a", ref, contract=ORDERED), b, ref, compacted=True, differing_rows=1)
    assert v.status is Status.FAIL and not v.order_differs and v.order_differs_rows == 0 and v.info == []


def test_note_order_differs_appends_after_other_info():
    ref = ref_of([[1, 2]])
    v = Verdict("c", Status.PASS, info=["first"])
    note_order_differs(v, side("a", ref, contract=OrderContract(False, 2)), side("b", ref), 1, 4)
    assert v.info == ["first", "prefix order differs between a and b in 1 of 4 rows (allowed: a: tiled; b: tiles of 2)"]
    assert (v.order_differs, v.order_differs_rows) == (True, 1)


# ---------------------------------------------------------------- memcheck


def _finding(kernel="k", kind="load", row=2, col=3, nearest="out", note="") -> Finding:
    return Finding("b", kernel, kind, row, col, (row, 0, 0), 0x1000, 4, nearest, 8, -1, 16, 4, note)


def _report(label="b", groups=None, rows=None, findings=(), launches=1) -> MemcheckReport:
    groups = groups or {}
    return MemcheckReport(label, launches=launches, elements_checked=64, bad_elements=sum(groups.values()),
                          bad_rows={r for rs in (rows or {}).values() for r in rs}, bad_by_group=dict(groups),
                          rows_by_group=dict(rows or {}), findings=list(findings))


def test_memcheck_mismatch_names_the_groups_first_finding():
    key_a, key_b = ("load", "k", "out"), ("store", "k2", "counts")
    second_of_a = _finding(row=5, col=0)
    first_of_b = _finding("k2", "store", 7, 1, "counts")
    first_of_a = _finding(row=4, col=6)
    report = _report(groups={key_a: 3, key_b: 2}, rows={key_a: {4, 5}, key_b: {7}},
                     findings=[first_of_b, first_of_a, second_of_a])
    got = memcheck_mismatches(report, "remap-ab replay X")
    assert [fields(m) for m in got] == [
        (Check.MEMCHECK, "b", 4, 6, {}, 3, 2, f"{first_of_a.describe()}; replay: remap-ab replay X"),
        (Check.MEMCHECK, "b", 7, 1, {}, 2, 1, f"{first_of_b.describe()}; replay: remap-ab replay X"),
    ]
    assert [m.status for m in got] == [Status.FAIL, Status.FAIL]


def test_memcheck_group_beyond_the_detailed_findings_says_what_is_known():
    other = _finding("k", "load", 1, 1, "counts")  # same kernel and kind, another tensor
    report = _report(label="new", groups={("store", "k", "out"): 5}, findings=[other])
    (m,) = memcheck_mismatches(report, "R")
    assert fields(m) == (Check.MEMCHECK, "new", -1, -1, {}, 5, 1,
                         "5 store lanes outside every argument tensor in kernel k, nearest out; replay: R")
    assert m.line() == "[memcheck] new: 5 store lanes outside every argument tensor in kernel k, nearest out; replay: R"


def test_memcheck_in_compare_adds_failures_and_what_was_checked():
    ref = ref_of([[1, 2]])
    finding = _finding()
    report = _report(groups={("load", "k", "out"): 1}, rows={("load", "k", "out"): {2}}, findings=[finding])
    a = side("a", ref, findings=[CallFinding(Check.SYNC, "s")])
    b = side("b", ref, memcheck=report)
    v = judge(a, b, ref, memchecked=True, replay="remap-ab replay c1")
    assert v.info == ["memcheck a: not checked", report.summary()]
    assert [fields(m) for m in v.failures] == [
        (Check.SYNC, "a", -1, -1, {}, 0, 0, "s"),
        (Check.MEMCHECK, "b", 2, 3, {}, 1, 1, f"{finding.describe()}; replay: remap-ab replay c1")]
    assert v.status is Status.FAIL


def test_memcheck_clean_reports_pass_and_are_said():
    ref = ref_of([[1, 2]])
    ra, rb = _report("a"), _report("b", launches=2)
    v = judge(side("a", ref, memcheck=ra), side("b", ref, memcheck=rb), ref, memchecked=True)
    assert v.passed and v.info == [ra.summary(), rb.summary()]
    v = judge(side("a", ref, memcheck=ra), side("b", ref, memcheck=_report(groups={("load", "k", "out"): 1})), ref)
    assert v.passed and v.info == []  # not asked for: reports are not looked at


# ---------------------------------------------------------------- backend views


FA3 = MODELS["fa3"]
SET_VIEW = MODELS["flashinfer-sm100"]


def views(model, differs, hazard=None, why="") -> Views:
    n = len(differs)
    return Views(model, torch.tensor(differs), torch.tensor(hazard or [False] * n), why, "a", "b")


def test_a_view_that_differs_fails_even_where_the_wrapper_contract_allows_it():
    ref = ref_of([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]], compacted=True)
    # Rows 1-3 reordered (allowed for one-lane tiles); the backend's view differs in rows 2 and 3
    # only: the row named is the first of those, and only their lanes are counted (3 + 2).
    b = side("b", ref, rows=[[1, 2, 3, 4], [6, 5, 7, 8], [10, 11, 9, 12], [16, 14, 15, 13]],
             contract=OrderContract(False, 1, "t1"))
    v_a = side("a", ref, contract=ORDERED)
    v = judge(v_a, b, ref, compacted=True, views=views(FA3, [False, False, True, True]))
    assert v.status is Status.FAIL and v.backend_view == "differs" and v.hazard_rows == 0
    (m,) = v.failures
    assert fields(m) == (
        RemapCheck.BACKEND_VIEW, "a vs b", 2, 0, {"a": 9, "b": 10, "oracle": 9}, 5, 2,
        f"{FA3.name} would attend to other KV rows with b than with a (a difference the wrapper-level contract "
        f"allows); it {FA3.rule}")
    assert m.status is Status.FAIL
    assert m.line().endswith("at row 2, col 0 (a=9, b=10, oracle=9); 5 lanes in 2 rows differ")
    # The report's evidence: what the backend reads of the row named, from each side.
    assert m.evidence == {**row_evidence(FA3, v_a, b, 2), "rows": 2, "allowed_by_wrapper": True}
    assert (m.evidence["backend"], m.evidence["row"]) == (FA3.name, 2)
    assert [s["name"] for s in m.evidence["sides"]] == ["a", "b"]
    assert not v.order_differs and v.info == []
    assert v.to_dict()["backend_view"] == "differs" and Verdict.from_dict(v.to_dict()) == v


def test_a_view_that_differs_on_top_of_a_wrapper_failure_does_not_say_allowed():
    ref = ref_of([[1, 2], [3, 4]])
    b = side("b", ref, rows=[[1, 2], [4, 4]])
    v = judge(side("a", ref), b, ref, views=views(FA3, [False, True]))
    assert [m.check for m in v.failures] == [Check.OUT, RemapCheck.BACKEND_VIEW]
    m = v.failures[1]
    assert (m.row, m.col, m.values, m.lanes, m.rows) == (1, 0, {"a": 3, "b": 4, "oracle": 3}, 1, 1)
    assert m.message == f"{FA3.name} would attend to other KV rows with b than with a; it {FA3.rule}"
    assert (m.evidence["rows"], m.evidence["allowed_by_wrapper"], m.evidence["row"]) == (1, False, 1)


def test_a_call_finding_is_a_wrapper_failure_for_the_view_check():
    ref = ref_of([[1, 2]])
    b = side("b", ref, findings=[CallFinding(Check.GRAPH, "g")])
    v = judge(side("a", ref), b, ref, views=views(FA3, [False]))
    assert v.info == [f"{FA3.name} sees the same from both sides: the difference above is invisible to it ({FA3.rule})"]
    assert v.backend_view == "same"


def test_rows_equal_in_values_but_not_in_counts_name_the_counts():
    ref = ref_of([[1, 2, -1], [3, -1, -1]], compacted=True)
    b = side("b", ref, counts=[2, 0])  # row 1 counted short: the same lanes, another count
    v = judge(side("a", ref), b, ref, compacted=True, views=views(FA3, [False, True]))
    m = v.failures[-1]
    assert (m.check, m.row, m.col, m.values, m.lanes, m.rows) == (
        RemapCheck.BACKEND_VIEW, 1, -1, {"a": 1, "b": 0, "oracle": 1}, 0, 1)
    assert m.line().endswith("at row 1 (a=1, b=0, oracle=1); 1 row differs")
    assert [x.check for x in v.failures] == [Check.COUNTS, RemapCheck.BACKEND_VIEW]


def test_a_set_view_sees_a_reordering_as_the_same():
    ref = ref_of([[1, 2, 3, 4]], compacted=True)
    b = side("b", ref, rows=[[3, 4, 1, 2]])
    v = judge(side("a", ref, contract=ORDERED), b, ref, compacted=True, views=views(SET_VIEW, [False]))
    assert v.passed and v.backend_view == "same" and v.hazard_rows == 0 and v.failures == []
    assert v.info == ["prefix order differs between a and b in 1 of 1 rows (allowed: a: single tile; b: tiles of 2)"]
    assert v.to_dict()["backend_view"] == "same" and Verdict.from_dict(v.to_dict()) == v


def test_caller_hazards_are_information_and_counted():
    ref = ref_of([[1, 2], [3, 4], [5, 6]])
    v = judge(side("a", ref), side("b", ref), ref, views=views(FA3, [False] * 3, [True, False, True], "row 0: why"))
    assert v.passed and v.hazard_rows == 2 and v.backend_view == "same"
    assert v.info == [
        f"caller hazard ({FA3.name}; the same for a and b, not an A/B difference): in 2 rows it {FA3.rule} "
        f"but does not read the lanes the kernel marks valid — row 0: why"]
    v = judge(side("a", ref), side("b", ref), ref, views=views(FA3, [False] * 3, [False, True, False], "w"))
    assert v.hazard_rows == 1 and " in 1 row it " in v.info[0]
    d = v.to_dict()
    assert d["hazard_rows"] == 1 and Verdict.from_dict(d).hazard_rows == 1


def test_no_views_no_backend_check():
    ref = ref_of([[1, 2]])
    v = judge(side("a", ref), side("b", ref, rows=[[1, 3]]), ref)
    assert v.backend_view == "" and v.hazard_rows == 0 and v.info == []
    assert v.to_dict()["backend_view"] == "" and v.to_dict()["hazard_rows"] == 0


def test_info_order_memcheck_then_view_then_checks_then_order():
    ref = ref_of([[1, 2, 3, 4]], compacted=True)
    ra, rb = _report("a"), _report("b")
    b = side("b", ref, rows=[[3, 4, 1, 2]], memcheck=rb, checks=("sync",))
    v = judge(side("a", ref, contract=ORDERED, memcheck=ra), b, ref, compacted=True, memchecked=True,
              views=views(SET_VIEW, [False], [True], "w"))
    assert v.passed
    assert [i.split(" ")[0] for i in v.info] == ["memcheck", "memcheck", "caller", "checked", "prefix"]


# ---------------------------------------------------------------- lost cases


@pytest.mark.parametrize("status,check", [(Status.CRASH, Check.CRASH), ("timeout", Check.TIMEOUT)])
def test_lost_verdict(status, check):
    v = lost_verdict("c9", status, "a/b", "gone")
    assert v.case_id == "c9" and v.status is Status(status) and v.info == []
    assert [fields(m) for m in v.failures] == [(check, "a/b", -1, -1, {}, 0, 0, "gone")]
    assert v.summary() == f"c9: {Status(status).value.upper()} — [{check.value}] a/b: gone"


@pytest.mark.parametrize("status", [Status.PASS, "fail", Status.ERROR])
def test_a_lost_case_is_only_a_crash_or_a_timeout(status):
    with pytest.raises(ValueError) as info:
        lost_verdict("c", status, "a/b", "m")
    assert str(info.value) == f"a lost case's status is crash or timeout, not {Status(status)}"


# ---------------------------------------------------------------- rejection calls


class ValueErr(ValueError):
    pass


def attempt(name, raised: type | None = None, message="why", memcheck=None) -> Attempt:
    if raised is None:
        return Attempt(name, memcheck=memcheck)
    return Attempt(name, raised.__qualname__, tuple(k.__qualname__ for k in raised.__mro__), message, memcheck)


CALL = "convert(topk int64)"


def test_a_call_a_accepts_is_not_judged():
    v = judge_rejection("r1", CALL, attempt("old"), attempt("new", ValueError), checked=["memcheck: x"])
    assert v.case_id == "r1" and v.status is Status.PASS and v.failures == []
    assert v.info == [f"call: {CALL}", "old accepts it", "new raises ValueError: why",
                      "not judged: old accepts this call, so new need not reject it", "memcheck: x"]
    v = judge_rejection("r1", CALL, attempt("old"), attempt("new"))
    assert v.passed and v.info[-1] == "not judged: old accepts this call, so new need not reject it"


def test_b_accepting_what_a_rejects_fails():
    v = judge_rejection("r2", CALL, attempt("old", ValueError), attempt("new"), replay="remap-ab replay r2")
    assert v.status is Status.FAIL
    assert [fields(m) for m in v.failures] == [(
        Check.REJECTS, "new", -1, -1, {}, 0, 0,
        f"accepts a call old rejects: {CALL}; old raises ValueError: why; replay: remap-ab replay r2")]
    assert v.info == [f"call: {CALL}", "old raises ValueError: why", "new accepts it"]
    v = judge_rejection("r2", CALL, attempt("old", ValueError, ""), attempt("new"))
    assert v.first.message == f"accepts a call old rejects: {CALL}; old raises ValueError"


def test_b_rejecting_with_another_type_fails():
    v = judge_rejection("r3", CALL, attempt("old", ValueError), attempt("new", TypeError, "no"), replay="R")
    assert [fields(m) for m in v.failures] == [(
        Check.REJECTS, "new", -1, -1, {}, 0, 0,
        f"rejects with TypeError, old with ValueError (code that catches ValueError would not catch it): "
        f"{CALL}; new raises TypeError: no; replay: R")]
    v = judge_rejection("r3", CALL, attempt("old", ValueErr), attempt("new", ValueError))  # a base is not enough
    assert v.status is Status.FAIL and v.first.message.endswith(f"{CALL}; new raises ValueError: why")


@pytest.mark.parametrize("b_raises", [ValueError, ValueErr])
def test_b_rejecting_with_the_same_type_or_a_subclass_passes(b_raises):
    v = judge_rejection("r4", CALL, attempt("old", ValueError), attempt("new", b_raises))
    assert v.passed and v.failures == []
    assert v.info == [f"call: {CALL}", "old raises ValueError: why", f"new raises {b_raises.__qualname__}: why"]


def test_a_rejects_failure_carries_the_call_and_what_each_side_did():
    a, b = attempt("old", ValueError), attempt("new")
    v = judge_rejection("r2", CALL, a, b, precondition="topk is int32", wrapper="convert",
                        arguments={"token_indices": "int64 [4, 256]"}, what="token_indices as int64")
    assert v.first.evidence == {
        "precondition": "topk is int32", "call": "token_indices as int64", "wrapper": "convert",
        "arguments": {"token_indices": "int64 [4, 256]"},
        "a": {"name": "old", "raised": "ValueError", "message": "why"}, "b": {"name": "new", "returned": "nothing"}}
    given = {"x": "y"}
    v = judge_rejection("r3", CALL, a, attempt("new", TypeError, "no"), arguments=given)
    given["x"] = "changed later"  # the evidence keeps the arguments as they were
    assert v.first.evidence == {
        "precondition": "", "call": CALL, "wrapper": "", "arguments": {"x": "y"},
        "a": {"name": "old", "raised": "ValueError", "message": "why"},
        "b": {"name": "new", "raised": "TypeError", "message": "no"}}
    assert judge_rejection("r3", CALL, a, attempt("new", TypeError)).first.evidence["arguments"] == {}


def test_rejection_memcheck_judges_every_attempt_that_launched():
    key = ("store", "k", "out")
    bad = _report("new", groups={key: 2}, rows={key: {0}})
    unlaunched = _report("old", groups={key: 4}, launches=0)
    a, b = attempt("old", ValueError, memcheck=unlaunched), attempt("new", ValueError, memcheck=bad)
    v = judge_rejection("r5", CALL, a, b, replay="R", memchecked=True, checked=("memcheck old: ...", "memcheck new: ..."))
    assert [fields(m) for m in v.failures] == [
        (Check.MEMCHECK, "new", -1, -1, {}, 2, 1,
         "2 store lanes outside every argument tensor in kernel k, nearest out; replay: R")]
    assert v.status is Status.FAIL and v.info[-2:] == ["memcheck old: ...", "memcheck new: ..."]
    launched = _report("old", groups={key: 4}, launches=1)
    v = judge_rejection("r5", CALL, attempt("old", memcheck=launched), attempt("new", memcheck=bad), memchecked=True)
    assert [(m.impl, m.lanes) for m in v.failures] == [("old", 4), ("new", 2)]
    v = judge_rejection("r5", CALL, attempt("old", memcheck=launched), attempt("new", memcheck=bad))
    assert v.passed  # memcheck not asked for: reports are not judged


def test_rejection_failures_come_before_memcheck_failures():
    key = ("load", "k", "x")
    b = attempt("new", memcheck=_report("new", groups={key: 1}))
    v = judge_rejection("r6", CALL, attempt("old", ValueError), b, memchecked=True)
    assert [m.check for m in v.failures] == [Check.REJECTS, Check.MEMCHECK]


# ---------------------------------------------------------------- words and data


def test_words():
    assert plural(1, "row") == "1 row" and plural(0, "row") == "0 rows" and plural(2, "row") == "2 rows"
    assert plural(1, "access", "accesses") == "1 access" and plural(3, "access", "accesses") == "3 accesses"
    assert differ(1) == "differs" and differ(0) == "differ" and differ(2) == "differ"
    assert count_rows(1) == "1 row whose count differs" and count_rows(2) == "2 rows whose count differs"


def test_output_and_verdict_defaults():
    o = Output("a", None, None, TILED)
    assert (o.error, o.seconds, o.memcheck, o.guard, o.findings, o.checks, o.span) == (None, 0.0, None, None, [], (), None)
    assert Output("b", None, None, TILED).findings is not o.findings
    v = Verdict("c", "pass")
    assert (v.caller, v.hazard_rows, v.backend_view, v.failures, v.info) == ("", 0, "", [], [])
    assert v.status is Status.PASS and v.passed
    assert CallFinding(Check.SYNC, "m") == CallFinding(Check.SYNC, "m")


def test_to_dict_has_every_field():
    m = Mismatch("out", "b", 1, 2, {"b": 3}, 4, 5, "msg")
    v = Verdict("c", Status.FAIL, [m], ["i"], True, 6, "FA3", 7, "differs")
    assert v.to_dict() == {
        "case_id": "c", "status": "fail",
        "failures": [{"check": "out", "impl": "b", "row": 1, "col": 2, "values": {"b": 3}, "lanes": 4, "rows": 5,
                      "message": "msg"}],
        "info": ["i"], "order_differs": True, "order_differs_rows": 6, "caller": "FA3", "hazard_rows": 7,
        "backend_view": "differs"}
    back = Verdict.from_dict(v.to_dict())
    assert back == v and back.first.check is Check.OUT and back.status is Status.FAIL
    # Evidence (not part of a mismatch's equality) is written only where there is some, and read back.
    m = Mismatch("layout", "b", -1, -1, {}, 0, 0, "msg", {"tensor": "out", "strides": [1, 3]})
    d = Verdict("c", Status.FAIL, [m]).to_dict()
    assert d["failures"][0]["evidence"] == {"tensor": "out", "strides": [1, 3]}
    back = Verdict.from_dict(d).first
    assert back.evidence == {"tensor": "out", "strides": [1, 3]} and back.evidence is not d["failures"][0]["evidence"]


def test_lines_of_every_shape():
    # No lane to name, values known: they follow the message.
    m = Mismatch(Check.REJECTS, "b", -1, -1, {"a": 1, "b": None}, 0, 0, "m")
    assert m.line() == "[rejects] b: m (a=1, b=None)"
    assert Mismatch(Check.REJECTS, "b", -1, -1, {}, 0, 0, "m").line() == "[rejects] b: m"
    # A per-row quantity other than counts: rows, with the verb agreeing.
    m = Mismatch(RemapCheck.BACKEND_VIEW, "a vs b", 3, -1, {"a": 1}, 0, 2, "m")
    assert m.line() == "[backend_view] a vs b: m at row 3 (a=1); 2 rows differ"
    m = Mismatch(RemapCheck.BACKEND_VIEW, "a vs b", 3, -1, {}, 0, 1, "m")
    assert m.line() == "[backend_view] a vs b: m at row 3; 1 row differs"
    # Memcheck counts accesses.
    m = Mismatch(Check.MEMCHECK, "b", 0, -1, {}, 1, 2, "x")
    assert m.line() == "[memcheck] b: x at row 0; 1 access in 2 rows outside every argument tensor"
    m = Mismatch(Check.OUT, "b", 0, 1, {"b": 2}, 2, 1, "x")
    assert m.line() == "[out] b: x at row 0, col 1 (b=2); 2 lanes in 1 row differ"


def test_memcheck_without_a_replay_command_names_none():
    ref = ref_of([[1, 2]])
    report = _report(groups={("load", "k", "out"): 1})
    v = judge(side("a", ref), side("b", ref, memcheck=report), ref, memchecked=True)
    assert v.failures[0].message == "1 load lanes outside every argument tensor in kernel k, nearest out; replay: "


def test_the_remaps_own_check_reads_back_beside_the_machinerys():
    # The machinery's Check holds no subject's check: the remap declares backend_view in
    # its own enum, and a verdict's word reads back to that member, written as before.
    assert "backend_view" not in {c.value for c in Check}
    m = Mismatch("backend_view", "a vs b", 3, -1, {}, 0, 1, "m")
    assert m.check is RemapCheck.BACKEND_VIEW and Mismatch("out", "b", 0, 0, {}, 1, 1, "m").check is Check.OUT
    v = Verdict("c", Status.FAIL, [m])
    assert v.to_dict()["failures"][0]["check"] == "backend_view" and Verdict.from_dict(v.to_dict()).first.check is m.check
    with pytest.raises(ValueError, match=r"^one of out, counts, .*, buffers$"):
        check_named("backend_view")  # the machinery alone does not know it
    with pytest.raises(ValueError, match=r"^one of out, .*, buffers, backend_view$"):
        Mismatch("backend_views", "a vs b", 3, -1, {}, 0, 1, "m")
