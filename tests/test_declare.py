"""The declarative layer (remap_ab/declare/) catches what it says it does: each check fed
a call that breaks it, each selection rule fed a grid and filters, and the contract's
defaults answered without a subject of one's own."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from remap_ab import runtime
from remap_ab.declare import Axis, Declared, Grid, Output, close, failures_by_dimension
from remap_ab.declare.calls import call, layout_findings
from remap_ab.declare.compare import bit_for_bit, mismatch
from remap_ab.errors import ConfigError, ImplementationError, UsageError
from remap_ab.status import Check, Status
from remap_ab.subject import JudgeSettings, PytestHooks, SoakSettings, Subject, SummaryLines


def test_bit_for_bit_tells_floats_by_their_bits():
    x = torch.tensor([0.0, float("nan"), 1.0])
    assert bit_for_bit(x, x.clone()).tolist() == [False, False, False]  # NaN equals the same NaN
    assert bit_for_bit(x, torch.tensor([-0.0, float("nan"), 1.0])).tolist() == [True, False, False]
    assert not close(1e-3)(torch.tensor([1.0]), torch.tensor([1.0005])).any()


def test_a_mismatch_names_the_first_element_and_counts_the_rest():
    want = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    got = want.clone()
    got[1, 2], got[2, 0] = -1, -1
    m = mismatch(Output("y"), "b", got, want)
    assert (m.count, m.total, m.first) == (2, 12, [(1, 2), (2, 0)])
    assert "int64" in mismatch(Output("y"), "b", got.long(), want).problem
    assert mismatch(Output("y"), "b", want.clone(), want) is None


def test_the_call_checks_catch_written_inputs_shared_storage_and_another_layout():
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)[:, :2]  # a strided view with slack

    def writes_slack(x):
        x.as_strided((1,), (1,), 3).fill_(99)  # row 0's third element: outside the view
        return x.clone()

    found = call(writes_slack, {"x": x}, ["y"], "cpu", "B").findings
    assert [f.check for f in found] == [Check.INPUTS_WRITTEN] and "outside the view" in found[0].line
    assert x.as_strided((12,), (1,), 0)[3] == 3  # the caller's input untouched: B wrote into its private copy
    found = call(lambda x: x, {"x": x}, ["y"], "cpu", "B").findings
    assert [f.check for f in found] == [Check.ALIASED]
    a = call(lambda x: x.contiguous(), {"x": x}, ["y"], "cpu", "A")
    b = call(lambda x: x.t().contiguous().t(), {"x": x}, ["y"], "cpu", "B")
    assert [f.check for f in layout_findings(a, b)] == [Check.LAYOUT]
    raised = call(lambda x: (x, x), {"x": x}, ["y"], "cpu", "B")
    assert raised.outputs is None and "not the 1 outputs y" in raised.error


def test_the_grid_selects_filters_and_caps_with_one_line_errors():
    grid = Grid(axes=(Axis("n", (1, 8, 64)), Axis("mode", ("a", "b"), ("first", "second"))), size="n", cpu_max=8)
    points, total, note = grid.select(["mode=second"], None, "cpu")
    assert total == 6 and [p.config for p in points] == [{"n": 1, "mode": "b"}, {"n": 8, "mode": "b"}]
    assert points[0].labels == (("n", "1"), ("mode", "second"))
    assert note == "1 of 3 selected cases (n 64) not run: n > 8, on the CPU (the interpreter)"
    assert [p.case_id for p in grid.select([f"case={points[1].case_id}"], None, "cuda")[0]] == [points[1].case_id]
    for filters, says in ((["size=1"], "the grid has no axis 'size'"), (["n"], "write NAME=V"),
                          (["case=000000000000"], "no case of the grid has ID"), (["n=2"], "select no case")):
        with pytest.raises(ConfigError, match=says):
            grid.select(filters, None, "cuda")


def test_failures_by_dimension_keeps_the_declared_order_then_what_it_saw():
    df = pd.DataFrame({"status": ["pass", "fail", "fail"], "n": ["10", "2", "-"]})
    assert failures_by_dimension(df, [("n", ["10", "2"])]) == {"n": {"10": [0, 1], "2": [1, 1], "-": [1, 1]}}
    assert list(failures_by_dimension(df, [("n", None)])["n"]) == ["2", "10", "-"]


class Doubles(Declared):
    name = "test_declare:DOUBLES"
    title = "x times two"
    grid = Grid(axes=(Axis("n", (0, 3)),))
    implementations = {"mul": lambda x: x * 2, "add": lambda x: x + x, "raises": lambda x: x[99]}

    def inputs(self, case, device):
        return {"x": torch.arange(case["n"], dtype=torch.int64)}


def test_without_an_oracle_b_is_judged_against_a_and_a_raising_side_is_an_error():
    s = Doubles()
    assert (s.default_a, s.default_b) == ("mul", "add") and s.columns[-1] == "report"
    rows = s.judge(s.grid.cases(), JudgeSettings("mul", "add", "cpu", None), None)
    assert [r["status"] for r in rows] == [Status.PASS, Status.PASS]
    row = s.judge([{"n": 3}], JudgeSettings("mul", "raises", "cpu", None), None)[0]
    assert row["status"] == Status.ERROR and row["first_mismatch"].startswith("B raised IndexError")
    with pytest.raises(ImplementationError, match="choose one of mul, add, raises"):
        s.select(None, [], None, "nope", "add", "cpu", None)


def test_the_base_answers_every_optional_member():
    class Bare(Subject):
        name, title, default_a, default_b, columns = "bare", "nothing", "a", "b", ("status",)

    bare = Bare()
    assert (bare.cost({}), bare.variant({}), bare.warm_up("a", "b", {}), bare.summarise(None, {}, None)) == (1, None, [], {})
    assert bare.summary_lines({}) == SummaryLines() and bare.pytest_hooks() == PytestHooks()
    assert bare.failure_classes == "" and bare.command_part("run") is None
    with pytest.raises(UsageError, match="bare: this subject has no soak"):
        bare.soak(SoakSettings("cpu", "a", "b", 1))
    with pytest.raises(NotImplementedError):
        bare.judge([], JudgeSettings("a", "b", "cpu", None), None)


@pytest.mark.gpu
def test_on_a_gpu_a_host_sync_inside_a_declared_call_is_a_finding():
    class Syncs(Doubles):
        implementations = {"mul": lambda x: x * 2, "syncs": lambda x: x * int(x.sum().item() * 0 + 2)}
        no_host_sync = True

        def inputs(self, case, device):
            return {"x": torch.arange(case["n"], dtype=torch.int64, device=device)}

    s = Syncs()
    row = s.judge([{"n": 3}], JudgeSettings("mul", "syncs", "cuda", None), None)[0]
    assert row["status"] == Status.FAIL and row["check"] == Check.SYNC and "B synchronises with the host" in row["first_mismatch"]
    assert s.judge([{"n": 3}], JudgeSettings("mul", "mul", "cuda", None), None)[0]["status"] == Status.PASS


def test_a_property_both_sides_break_fails_the_case_and_its_report_says_so(tmp_path):
    from remap_ab.declare import Property

    class Sorted(Doubles):
        properties = (Property("ascending", lambda inputs, out: "" if bool((out["out"].diff() >= 0).all())
                               else "not ascending"),)

        def inputs(self, case, device):
            return {"x": torch.tensor([3, -1, 2][: case["n"]])}

        def report_sections(self, case, judged):
            return [("Why", "doubling keeps the order only of sorted inputs")]

    s = Sorted()
    row = s.judge([{"n": 3}], JudgeSettings("mul", "add", "cpu", str(tmp_path)), None)[0]
    assert row["status"] == Status.FAIL and row["check"] == "property:ascending"
    assert row["first_mismatch"] == "B's outputs break ascending: not ascending"
    text = (tmp_path / row["report"] / "report.md").read_text()
    assert "- B: ascending: not ascending" in text and "- A: ascending" in text and "## Why" in text
    assert s.judge([{"n": 0}], JudgeSettings("mul", "add", "cpu", None), None)[0]["status"] == Status.PASS


class Wrong(Declared):
    """A with a finding of its own (wrong at n=1) on the grid's first case, B right
    everywhere, and a mutant wrong only at n=3: its witness comes after A's finding."""

    name = "test_declare:WRONG"
    title = "x times two, A wrong at n=1"
    grid = Grid(axes=(Axis("n", (1, 2, 3)),))
    implementations = {"wrong_a": lambda x: x * 2 + (x.numel() == 1), "right": lambda x: x * 2,
                       "wrong_at_2": lambda x: x * 2 + (x.numel() == 2)}
    oracle = staticmethod(lambda x: x * 2)

    def inputs(self, case, device):
        return {"x": torch.arange(case["n"], dtype=torch.int64)}


def test_the_kill_loop_judges_b_s_side_past_a_s_own_findings():
    from remap_ab.declare.mutants import Mutant, kill_all
    from remap_ab.status import Outcome

    s = Wrong()
    assert s.judge_case({"n": 1}, s.resolve("wrong_a"), s.resolve("right"), "cpu").verdict()[1] == "a-vs-oracle"
    late = Mutant("late", lambda x: x * 2 + (x.numel() == 3), "b-vs-oracle")
    (k,) = kill_all(s, [late], "cpu")
    assert (k.verdict, k.check, k.witness) == (Outcome.KILLED, "b-vs-oracle", s.grid.case_id({"n": 3})), k.detail
    # The control is the real B's side: a real B that fails the witness leaves no control.
    s.default_b = "wrong_at_2"
    (k,) = kill_all(s, [Mutant("at_2", lambda x: x * 3, "b-vs-oracle")], "cpu")
    assert k.verdict == Outcome.BROKEN and k.witness == s.grid.case_id({"n": 2}) and "fails the witness too" in k.detail
    s.default_b = "right"
    (k,) = kill_all(s, [Mutant("raises", lambda x: x[99], "b-vs-oracle")], "cpu")
    assert k.verdict == Outcome.BROKEN and "caught by error, not by the declared b-vs-oracle" in k.detail
    (k,) = kill_all(s, [Mutant("same", lambda x: x + x, "b-vs-oracle")], "cpu")
    assert k.verdict == Outcome.SURVIVED and "passed all 3 cases" in k.detail


class Named(Doubles):
    grid = Grid(axes=(Axis("n", (0, 3)),), name="small")
    grids = {"big": Grid(axes=(Axis("n", (5, 6, 7)),), name="big", version=2)}
    header = ("a line",)


def test_a_named_grid_is_chosen_by_name_and_another_refused_in_one_line(tmp_path):
    s = Named()
    assert [p.config["n"] for p in s.select(None, [], None, "mul", "add", "cpu", None).points] == [0, 3]
    big = s.select("big", ["n=6,7"], None, "mul", "add", "cpu", None)
    assert ([p.config["n"] for p in big.points], big.grid_total, big.grid_version, big.header) == ([6, 7], 3, 2, ["a line"])
    assert s.summarise(pd.DataFrame({"status": ["pass"], "n": ["6"]}), {"grid_file": "big"}, None)["coverage"].startswith("the big")
    (tmp_path / "g.toml").write_text("")
    for grid in ("nonesuch", str(tmp_path / "g.toml")):
        with pytest.raises(ConfigError, match=r"grids are small, big; choose one \(it reads no grid file\)"):
            s.select(grid, [], None, "mul", "add", "cpu", None)
    with pytest.raises(ValueError, match="declare a Grid named 'huge'"):
        type("Misnamed", (Doubles,), {"grids": {"huge": Grid(axes=(Axis("n", (1,)),))}})
    with pytest.raises(ValueError, match="its case_id is not the default grid's"):
        type("OtherIds", (Doubles,), {"grids": {"g": Grid(axes=(Axis("n", (1,)),), name="g", case_id=str)}})


def test_a_grid_of_toml_blocks_is_the_union_of_their_products(tmp_path):
    from remap_ab.declare import from_toml

    f = tmp_path / "g.toml"
    f.write_text('version = 3\n[[main]]\nname = "first"\nn = [2, 1]\nmode = ["a"]\n[[main]]\nn = [1, 3]\nmode = ["a", "b"]\n')
    grid = from_toml(f, "main", keep=lambda c: c["n"] != 3, size="n")
    assert (grid.version, grid.name, grid.axis_names) == (3, "main", ["n", "mode"]) and grid.axes[0].values == (1, 2, 3)
    assert grid.cases() == [{"n": 2, "mode": "a"}, {"n": 1, "mode": "a"}, {"n": 1, "mode": "b"}]  # (1, a) once, n=3 kept out
    with pytest.raises(ConfigError, match="no grid 'other' read from it"):
        from_toml(f, "other")


def test_mutants_as_source_edits_build_their_module_and_refuse_an_edit_not_found_once(tmp_path):
    from remap_ab.declare import from_edits

    source = tmp_path / "kernel.py"
    source.write_text("def double(x):\n    return x * 2\n")
    catalogue = tmp_path / "mutants.toml"
    catalogue.write_text('[[mutant]]\nid = "triple"\nkilled_by = "b-vs-a"\n[[mutant.edit]]\nold = "x * 2"\nnew = "x * 3"\n')
    (m,) = from_edits(catalogue, source, lambda module: module.double)
    assert (m.id, m.killed_by, m.b(x=5)) == ("triple", "b-vs-a", 15)
    catalogue.write_text('[[mutant]]\nid = "gone"\nkilled_by = "b-vs-a"\n[[mutant.edit]]\nold = "x * 4"\nnew = "x"\n')
    with pytest.raises(ValueError, match="mutant gone: 'x \\* 4' occurs 0 times in kernel.py, not once"):
        from_edits(catalogue, source, lambda module: module.double)


def test_no_host_sync_names_implementations_and_is_validated_where_declared():
    class Some(Doubles):
        no_host_sync = ("add",)

    s = Some()
    assert s.must_not_sync(s.resolve("add")) and not s.must_not_sync(s.resolve("mul"))
    assert Doubles().must_not_sync(s.resolve("add")) is False
    with pytest.raises(ValueError, match="no_host_sync names nope, which is none of its implementations"):
        type("Unknown", (Doubles,), {"no_host_sync": ("nope",)})
    with pytest.raises(TypeError, match="declare True, False or a tuple of implementation names"):
        type("Bad", (Doubles,), {"no_host_sync": "add"})


@pytest.mark.gpu
def test_on_a_gpu_only_the_implementations_no_host_sync_names_get_the_sync_check():
    class Syncs(Doubles):
        implementations = {"syncs_a": lambda x: x * int(x.sum().item() * 0 + 2),
                           "syncs_b": lambda x: x * int(x.sum().item() * 0 + 2), "mul": lambda x: x * 2}
        no_host_sync = ("syncs_b", "mul")

        def inputs(self, case, device):
            return {"x": torch.arange(case["n"], dtype=torch.int64, device=device)}

    s = Syncs()
    assert s.judge([{"n": 3}], JudgeSettings("syncs_a", "mul", "cuda", None), None)[0]["status"] == Status.PASS
    row = s.judge([{"n": 3}], JudgeSettings("syncs_a", "syncs_b", "cuda", None), None)[0]
    assert row["check"] == Check.SYNC and row["first_mismatch"].startswith("B synchronises with the host")


def test_a_declared_replay_of_a_failure_no_rerun_repeats_is_a_nondeterministic_failure(tmp_path, capsys):
    import argparse
    import itertools

    calls = itertools.count()

    class Flaky(Doubles):
        # B wrong on its first call only, as a race would be: the saved run fails, replays pass.
        implementations = {**Doubles.implementations, "flaky": lambda x: x * 2 + (next(calls) == 0)}

    s = Flaky()
    device = runtime.default_device()  # the replay part fixes this process's device
    row = s.judge([{"n": 3}], JudgeSettings("mul", "flaky", device, str(tmp_path)), None)[0]
    assert row["status"] == Status.FAIL and row["report"]
    args = argparse.Namespace(target=str(tmp_path / row["report"]), a=None, b=None, device=device, memcheck=False,
                              repeat=None)
    assert s.command_part("replay").main(args) == 1
    out = capsys.readouterr().out
    assert "runs: PASS, PASS, PASS, PASS, PASS" in out and "NONDETERMINISTIC FAILURE: 0 of 5 replays failed" in out
    assert "--repeat 50" in out
    # Another B named on the replay is other code: its pass is a pass.
    args.b = "add"
    assert s.command_part("replay").main(args) == 0


def test_the_graph_check_replays_on_fresh_inputs_only_of_the_same_shapes():
    from remap_ab.declare.calls import first_difference, same_shapes

    x = torch.arange(6).reshape(2, 3)
    assert same_shapes({"x": x, "k": 2}, {"x": x + 1, "k": 2})
    assert not same_shapes({"x": x, "k": 2}, {"x": x, "k": 3})
    assert not same_shapes({"x": x}, {"x": x.t().contiguous().t()})  # the strides
    assert not same_shapes({"x": x}, {"x": x[:1]})
    assert first_difference({"o": x}, {"o": x.clone()}) == ""
    assert first_difference({"o": x}, {"o": torch.where(x == 4, 9, x)}) == "output o at [1, 1]: 4 vs 9 (1 elements differ)"


def _left_on_a_side_stream(x):
    out = torch.empty_like(x)
    side = torch.cuda.Stream(x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # still running when the caller's stream reads
        out.copy_(x * 2)
    return out  # the caller's stream is not made to wait for ``side``


def _idle_when_captured(x):
    out = torch.empty_like(x)
    if torch.cuda.is_current_stream_capturing():
        return out  # a "dummy run" shortcut under capture: the graph holds no kernel that writes out
    out.copy_(x * 2)
    return out


class OnStreams(Doubles):
    implementations = {"mul": lambda x: x * 2, "unjoined": _left_on_a_side_stream,
                       "idle_when_captured": _idle_when_captured}
    no_host_sync = True

    def inputs(self, case, device):
        return {"x": torch.arange(case["n"], dtype=torch.int64, device=device) * 7 + 1}


@pytest.mark.gpu
def test_on_a_gpu_work_left_on_another_stream_fails_the_stream_check():
    s = OnStreams()
    judged = s.judge_case({"n": 3}, s.resolve("mul"), s.resolve("unjoined"), "cuda", production=True)
    status, check, line = judged.verdict()
    assert (status, check) == (Status.FAIL, Check.STREAM) and line.startswith("B: "), line
    assert not judged.mismatches  # the values after a synchronize agree: only the stream check sees it
    assert s.judge_case({"n": 3}, s.resolve("mul"), s.resolve("unjoined"), "cuda").verdict()[0] == Status.PASS


@pytest.mark.gpu
def test_on_a_gpu_a_call_a_cuda_graph_cannot_replay_fails_the_graph_check():
    s = OnStreams()
    judged = s.judge_case({"n": 3}, s.resolve("mul"), s.resolve("idle_when_captured"), "cuda", production=True)
    status, check, line = judged.verdict()
    assert (status, check) == (Status.FAIL, Check.GRAPH) and line.startswith("B"), line
    passing = s.judge_case({"n": 3}, s.resolve("mul"), s.resolve("mul"), "cuda", production=True)
    assert passing.verdict()[0] == Status.PASS and not passing.findings
    # A sweep samples the checks: the first case of a label gets them, a repeat does not.
    rows = s.judge([{"n": 3}, {"n": 3}], JudgeSettings("mul", "idle_when_captured", "cuda", None), None)
    assert [r["check"] for r in rows] == [Check.GRAPH, ""]
