"""Rejections (SPEC §6's preconditions as data, rejections.toml): the vendored kernels
reject what SPEC §6 says, with messages that say what is wrong; a B that accepts what A
rejects, or rejects it with another exception type, fails the ``rejects`` check (with
--memcheck its out-of-bounds accesses are named); what A accepts is said, not judged;
the calls run in every sweep as rows of their own."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
import torch
from conftest import by_id, importable_mutants

from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.errors import ConfigError
from remap_ab.status import Check, Status
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry, rejections
from remap_ab.subjects.remap.judge.compare import judge_rejection
from remap_ab.subjects.remap.judge.rejections import Attempt
from remap_ab.subjects.remap.parts.mutants.catalogue import get as get_mutant

CALLS = rejections.load()
DEVICE = runtime.current()


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """Two Bs made from kernels_new: the req_id check dropped (a too-long req_id is cut
    to token_indices' rows), and the #47327 regression (dropped, and the grid sized by
    req_id: it writes past ``out``)."""
    root = tmp_path_factory.mktemp("broken")
    m = get_mutant("req_id_length_unchecked")
    grid = ("grid = (token_indices.shape[0], tiles_per_row)", "grid = (req_id.shape[0], tiles_per_row)")
    with importable_mutants(root, [m, replace(m, id="req_id_sizes_grid", edits=m.edits + (grid,))]):
        yield root


# ------------------------------------------------------------------ the vendored kernels


@pytest.mark.parametrize("call", CALLS, ids=by_id)
@pytest.mark.parametrize("impl", ["old", "new", "oracle"])
def test_the_vendored_wrappers_and_the_oracle_reject_what_spec_6_says(impl, call):
    # The oracle too: as A or B it is judged by the rejection rows like any implementation.
    inputs = generate_inputs(call.base, device=DEVICE)
    got = rejections.attempt(registry.get(impl), call, inputs)
    assert got.rejected == call.spec_rejects, f"{impl} {call.id}: {got.said()}"
    if got.rejected:
        assert got.raised == "AssertionError" and got.message, f"{impl} {call.id}: an assertion without a message"


@pytest.mark.parametrize("impl", ["kernels_old", "kernels_new"])
def test_upstreams_req_id_test_passes_against_the_vendored_kernels(impl):
    # vLLM's test_triton_convert_rejects_req_id_longer_than_token_indices matches this text.
    module = __import__(impl)
    token_indices = torch.zeros((2, 128), dtype=torch.int32, device=DEVICE)
    req_id = torch.zeros(3, dtype=torch.int32, device=DEVICE)
    table = torch.zeros((1, 4), dtype=torch.int32, device=DEVICE)
    with pytest.raises(AssertionError, match="must cover the same tokens"):
        module.triton_convert_req_index_to_global_index(req_id, table, token_indices, NUM_TOPK_TOKENS=128)


def test_assertion_messages_name_the_values():
    by = {c.id: c for c in CALLS}
    inputs = generate_inputs(by["dcp-rank-past-size"].base, device=DEVICE)
    got = rejections.attempt(registry.get("new"), by["dcp-rank-past-size"], inputs)
    assert got.message == "dcp_rank must satisfy 0 <= dcp_rank < dcp_size (4), not 4"
    got = rejections.attempt(registry.get("old"), by["width-not-num-topk"], generate_inputs(by["width-not-num-topk"].base, device=DEVICE))
    assert got.message == "token_indices is 256 wide, NUM_TOPK_TOKENS is 512: they must be equal"


# ------------------------------------------------------------------ the judge


def _attempt(name, raised=None):
    if raised is None:
        return Attempt(name)
    return Attempt(name, raised.__qualname__, tuple(k.__qualname__ for k in raised.__mro__), "why")


def test_judge_passes_the_same_type_and_a_subclass_and_fails_the_rest():
    class Narrower(AssertionError):
        pass

    assert judge_rejection("c", "call", _attempt("a", AssertionError), _attempt("b", AssertionError)).passed
    v = judge_rejection("c", "call", _attempt("a", AssertionError), _attempt("b", Narrower))
    assert v.passed  # code that catches AssertionError catches it
    v = judge_rejection("c", "call", _attempt("a", AssertionError), _attempt("b", ValueError))
    assert v.status is Status.FAIL and v.first.check is Check.REJECTS and v.first.impl == "b"
    assert v.first.line().startswith("[rejects] b: rejects with ValueError, a with AssertionError")
    v = judge_rejection("c", "call", _attempt("a", AssertionError), _attempt("b"))
    assert v.first.line().startswith("[rejects] b: accepts a call a rejects: call")


def test_each_side_makes_its_rejection_call_on_its_own_copy_of_the_inputs(monkeypatch):
    seen = []
    real = rejections.attempt
    monkeypatch.setattr(rejections, "attempt", lambda impl, case, inputs: seen.append(inputs) or real(impl, case, inputs))
    call = CALLS[0]
    assert rejections.judged(call, registry.get("old"), registry.get("new"), DEVICE)[0].passed
    first, second = (x.token_indices.untyped_storage().data_ptr() for x in seen)
    assert first != second and torch.equal(seen[0].token_indices, seen[1].token_indices)


def test_a_call_a_accepts_is_said_not_judged():
    v = judge_rejection("c", "call", _attempt("a"), _attempt("b", ValueError))
    assert v.passed and "not judged: a accepts this call, so b need not reject it" in v.info


def test_a_b_that_drops_the_req_id_check_fails_rejects_and_memcheck_names_its_read(broken):
    by = {c.id: c for c in CALLS}
    b = "mutant_req_id_length_unchecked"
    v = rejections.run_rejection(by["req-id-longer"], "old", b, device=DEVICE)
    assert v.status is Status.FAIL and [f.check for f in v.failures] == [Check.REJECTS]
    assert v.first.line().startswith(f"[rejects] {b}: accepts a call old rejects: req_id has one row more")
    assert "must cover the same tokens" in v.first.line()
    if DEVICE == "cpu":
        # A too-short req_id is read past its end: masked (the process lives), counted,
        # and named with --memcheck.
        v = rejections.run_rejection(by["req-id-shorter"], "old", b, device=DEVICE)
        assert [f.check for f in v.failures] == [Check.REJECTS]
        assert any("touched memory outside its tensors (1 lanes" in i for i in v.info)
        v = rejections.run_rejection(by["req-id-shorter"], "old", b, device=DEVICE, memcheck=True)
        assert [f.check for f in v.failures] == [Check.REJECTS, Check.MEMCHECK]
        assert "load of 4 bytes outside every argument tensor" in v.failures[1].message
        assert "past the last element of req_id" in v.failures[1].message


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU's memory check masks the wild store; on a GPU it would corrupt memory")
def test_memcheck_shows_the_write_past_out_of_the_47327_regression(broken):
    call = {c.id: c for c in CALLS}["req-id-longer"]
    v = rejections.run_rejection(call, "old", "mutant_req_id_sizes_grid", device=DEVICE, memcheck=True)
    stores = [f for f in v.failures if f.check is Check.MEMCHECK and f.message.startswith("store")]
    assert {m.message.split("past the last element of ")[1].split(" ")[0] for m in stores} == {"out", "valid_counts"}
    assert stores[0].row == 4  # the row past token_indices' 4


# ------------------------------------------------------------------ the data


def test_a_grid_point_a_wrapper_rejects_becomes_a_rejection_case():
    wide = rejections.rejection_from_fields({"mode": "convert", "topk": 2176, "block_n": 256, "tokens": 2})
    assert wide.base.block_n == 128 and dict(wide.args) == {"BLOCK_N": 256}
    assert wide.precondition == "NUM_TOPK_TOKENS % BLOCK_N == 0"
    odd = rejections.rejection_from_fields({"mode": "dcp", "topk": 2051, "block_n": 128, "dcp_size": 2, "dcp_rank": 2,
                                            "tokens": 1})
    assert odd.base.block_n == 1 and dict(odd.args) == {"BLOCK_N": 128, "dcp_rank": 2}
    for case in (wide, odd):
        for impl in ("old", "new"):
            assert rejections.attempt(registry.get(impl), case, generate_inputs(case.base, device=DEVICE)).rejected
        assert rejections.run_rejection(case, device=DEVICE).passed
    with pytest.raises(ConfigError, match="no SPEC §6 precondition is broken"):
        rejections.rejection_from_fields({"topk": 256, "block_n": 128})


@pytest.mark.parametrize("doc, message", [
    ({"call": [{"id": "x", "precondition": "p", "args": {"BLOCK_M": 3}}]}, "'BLOCK_M' is not a scalar argument of"),
    ({"call": [{"id": "x", "precondition": "p", "tensors": {"req_id": {"rows": "1"}}}]},
     "call 'x' field 'tensors.req_id.rows' is str '1', expected an integer"),
    ({"call": [{"id": "x", "precondition": "p"}]}, "changes nothing"),
    ({"call": [{"id": "x", "precondition": "p", "args": {"BLOCK_N": 3}, "colour": 1}]}, "call 'x' field 'colour' is not a known field"),
    ({"call": [{"id": "x", "precondition": "p", "base": {"topk": 100}, "args": {"BLOCK_N": 3}}]}, "call 'x': topk=100"),
])
def test_a_malformed_rejections_file_is_one_line_naming_the_call(doc, message):
    with pytest.raises(ConfigError) as info:
        rejections.parse(doc, "r.toml")
    assert message in str(info.value) and str(info.value).startswith("rejections file r.toml: ")
    assert "\n" not in str(info.value)


def test_case_ids_are_stable_and_round_trip():
    for case in CALLS:
        again = rejections.RejectionCase.from_dict(json.loads(json.dumps(case.to_dict())))
        assert again == case and again.case_id == case.case_id
    assert len({c.case_id for c in CALLS}) == len(CALLS)
    assert not {c.case_id for c in CALLS} & {CaseConfig().case_id}


# ------------------------------------------------------------------ commands


def test_run_rejection_prints_the_verdict_and_exits_on_it(capsys, broken):
    assert cli_main(["run", "--rejection", "req-id-longer", "--device", DEVICE]) == 0
    out = capsys.readouterr().out
    assert "rejection req-id-longer: case" in out and "PASS" in out and "api: identical" in out
    assert cli_main(["run", "--rejection", "req-id-longer", "--b", "mutant_req_id_length_unchecked", "--device", DEVICE]) == 1
    assert "[rejects] mutant_req_id_length_unchecked: accepts a call old rejects" in capsys.readouterr().out
    assert cli_main(["run", "--rejection", "nope"]) == 2
    assert "no rejection call 'nope'" in capsys.readouterr().err


def test_a_sweep_runs_the_rejection_calls_as_rows_of_their_own(tmp_path, capsys, broken):
    from remap_ab.subjects.remap.grid import grid as gridmod
    g = gridmod.load()
    two = g.select(gridmod.parse_filters(g, ["tokens=1", "k=128", "path=convert", "invalid=0"]))
    ids = [p.case_id for p in two] + [c.case_id for c in rejections.sweep_points(len(g.points()), grid=g)]
    args = ["sweep", "--device", DEVICE, "-j", "0", "--root", str(tmp_path), "--no-progress",
            "--filter", f"case={','.join(ids)}"]
    assert cli_main([*args, "--run", "good"]) == 0
    out = capsys.readouterr().out
    df = pd.read_csv(tmp_path / "good" / "results.csv", dtype=str, keep_default_na=False)
    calls = df[df.rejection != ""]
    assert sorted(calls.rejection) == sorted(c.id for c in CALLS) and (calls.status == "pass").all()
    assert set(calls.rejected_by) == {"a,b", ""}  # req-id-longer-dcp: both accept
    assert (f"rejections: {len(CALLS)} calls breaking a SPEC §6 precondition; old rejects {len(CALLS) - 1}, new rejects "
            f"all {len(CALLS) - 1} with old's exception type; old accepts 1 (not judged: req-id-longer-dcp)") in out
    summary = json.loads((tmp_path / "good" / "summary.json").read_text())
    assert summary["rejections"]["calls"] == len(CALLS) and summary["selected"] == len(df)
    assert all(v[1] == len(df) - len(CALLS) for v in summary["failures_by_dimension"]["path"].values() if v[1])

    assert cli_main([*args, "--run", "bad", "--b", "mutant_req_id_length_unchecked"]) == 1
    out = capsys.readouterr().out
    assert "mutant_req_id_length_unchecked fails 2" in out and "FAIL — not every case passed" in out
    assert "[rejects] mutant_req_id_length_unchecked: accepts a call old rejects: req_id has one row more" in out


def test_rejection_ids_do_not_move_when_a_case_field_is_added():
    # IDs as results.csv and report folders hold them since before counts_out existed.
    from remap_ab.subjects.remap.judge import rejections

    ids = {c.id: c.case_id for c in rejections.load()}
    assert ids["block-table-int64"] == "0900915acbe2" and ids["block-table-int64-dcp"] == "eb38dac58202"
    assert ids["dcp-rank-negative"] == "aaf3c6388a78"
    # A field away from its default is the call's own: it stays in what the ID hashes.
    base = rejections.by_id("block-table-int64").base
    assert "counts_out" not in base.rejection_id_dict() and "out_buffers" in base.rejection_id_dict()
