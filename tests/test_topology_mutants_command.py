"""remap-ab mutants --subject topology, in this process: the kill matrix of the fused
kernel's catalogue through the subject's judge. Every mutant is killed, missing_barrier
by its witness under relaxed stores (check "schedule"; in a CPU child on a GPU), and a
mutant the judge passes (an edit that changes nothing) fails the command."""

from __future__ import annotations

import json

import pytest

from remap_ab import cli, runtime
from remap_ab.status import Outcome
from remap_ab.subjects.topology import mutants

needs_no_cuda = pytest.mark.skipif(runtime.cuda_available(), reason="checks the behaviour without a GPU")
BY_ID = {m.id: m for m in mutants.mutants()}


@needs_no_cuda
def test_every_mutant_is_killed_missing_barrier_by_relaxed_stores(tmp_path, capsys):
    out = tmp_path / "matrix.json"
    rc = cli.main(["mutants", "--subject", "topology", "--device", "cpu", "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    data = json.loads(out.read_text())
    verdicts = {m["id"]: m["verdict"] for m in data["mutants"]}
    assert set(verdicts) == set(BY_ID)
    assert set(verdicts.values()) == {str(Outcome.KILLED)}, verdicts
    rows = {m["id"]: m for m in data["mutants"]}
    assert rows["missing_barrier"]["check"] == "schedule"
    assert rows["missing_barrier"]["detail"].startswith("under relaxed stores")
    assert rows["no_segment_cap"]["check"] == "rejection" and "accepted" in rows["no_segment_cap"]["detail"]
    for m in data["mutants"]:
        if m["caught_by"] == "output" and m["id"] != "missing_barrier":
            assert m["check"] == "judge" and "b-vs-oracle" in m["detail"], m  # the judge blames B
    assert f"killed {len(BY_ID)}/{len(BY_ID)} (schedule 1, judge {len(BY_ID) - 2}, rejection 1)" in printed


def _noop(base: mutants.Mutant, id: str, old: str, new: str) -> mutants.Mutant:
    """``base``'s witness with an edit that changes no result."""
    return mutants.Mutant(id=id, description="an edit that changes nothing", caught_by=base.caught_by,
                          edits=((old, new),), witness_case=base.witness_case, witness_rejection=base.witness_rejection)


NOOPS = [
    # A witness on which the real kernel's row already fails a property that does not hold
    # (uncovered_run_pr, shared by A and B): the judge's row fails, yet nothing blames B.
    lambda: _noop(BY_ID["edge_rounded_down"], "noop_budget_order", "budget = min(max_replacements, topk_budget)",
                  "budget = min(topk_budget, max_replacements)"),
    lambda: _noop(BY_ID["no_segment_cap"], "noop_cap_wording", "; use at most {MAX_FUSED_SEGMENTS} segments",
                  "; pass at most {MAX_FUSED_SEGMENTS} segments"),
]


@pytest.mark.parametrize("make", NOOPS, ids=["output", "rejection"])
def test_a_mutant_the_judge_passes_survives_and_fails_the_command(make, monkeypatch, capsys):
    noop = make()
    assert mutants.mutated_source(noop) != mutants.TARGET.read_text()
    monkeypatch.setattr(mutants, "mutants", lambda: (BY_ID["padding_occupies"], noop))
    rc = cli.main(["mutants", "--subject", "topology"])  # the default device: the interpreter, or a GPU
    captured = capsys.readouterr()
    assert rc == 1
    assert f"SURVIVOR/PROBLEM: {noop.id} (survived)" in captured.err
    assert "killed 1/2" in captured.out and "1 survived" in captured.out


def test_an_edit_that_no_longer_applies_exits_2_before_anything_runs(monkeypatch, capsys):
    stale = _noop(BY_ID["rank_inclusive"], "stale", "rank = tl.cumsum(free, 0)", "rank = 0")
    monkeypatch.setattr(mutants, "mutants", lambda: (stale,))
    assert cli.main(["mutants", "--subject", "topology"]) == 2
    captured = capsys.readouterr()
    assert "mutant stale: the edit's old text occurs 0 times" in captured.err and "kill matrix" not in captured.out


@pytest.mark.parametrize("argv, says", [
    (["--only", "nope"], "no topology mutant 'nope'"),
    (["--full", "--no-props"], "--full, --no-props: the remap catalogue's options"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    argv = argv if "--subject" in argv else ["--subject", "topology", *argv]
    assert cli.main(["mutants", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


@needs_no_cuda
def test_jobs_judge_the_mutants_in_worker_processes_in_catalogue_order(tmp_path, capsys):
    # -j was refused for another subject's catalogue ("the remap catalogue's options").
    out = tmp_path / "matrix.json"
    picked = ["no_segment_cap", "int32_shift", "padding_occupies"]
    rc = cli.main(["mutants", "--subject", "topology", "-j", "2", "--device", "cpu", "--only", ",".join(picked),
                   "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "each witness judged in 2 worker processes" in printed
    rows = json.loads(out.read_text())["mutants"]
    order = [m.id for m in mutants.select(picked)]
    assert [m["id"] for m in rows] == order and {m["verdict"] for m in rows} == {str(Outcome.KILLED)}
    assert "killed 3/3 (rejection 1, judge 2)" in printed


def test_list_names_each_mutant_and_its_edit(capsys):
    assert cli.main(["mutants", "--subject", "topology", "--list", "-v", "--only", "int32_shift"]) == 0
    out = capsys.readouterr().out
    assert "int32_shift" in out and "+    one = tl.full([BLOCK_K], 1, tl.int32)" in out and "edge_rounded_down" not in out


@pytest.mark.gpu
def test_missing_barrier_is_killed_on_a_gpu_by_a_cpu_child(tmp_path):
    out = tmp_path / "gpu.json"
    rc = cli.main(["mutants", "--subject", "topology", "--device", "cuda", "--only", "missing_barrier", "--json", str(out)])
    (row,) = json.loads(out.read_text())["mutants"]
    assert row["verdict"] == str(Outcome.KILLED) and row["detail"].startswith("in a CPU child process"), row
    assert rc == 0


def test_a_cpu_child_that_gives_no_verdict_is_broken_with_its_last_error_line(tmp_path):
    missing = str(tmp_path / "no_such_mutant.py")  # the child cannot load B: it exits without a verdict line
    verdict, detail = mutants._scheduled_in_a_cpu_child("relaxed_stores", missing, BY_ID["missing_barrier"].witness_case)
    assert verdict == str(Outcome.BROKEN) and detail.startswith("the CPU child process gave no verdict (exit 1: "), detail
    assert "no_such_mutant" in detail, detail
