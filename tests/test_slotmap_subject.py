"""The slot-mapping subject (remap_ab/subjects/slotmap): its grids, its cases' batches,
the verdicts and findings it gives (the host's int32 wrap, the PAD tail under each
contract), its mutants each killed by its check, and the sweep and soak on it."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings

from remap_ab import runtime
from remap_ab.declare import mutants
from remap_ab.errors import ConfigError
from remap_ab.status import Status
from remap_ab.subjects import get
from remap_ab.subjects.slotmap import cases
from remap_ab.subjects.slotmap.subject import SUBJECT

DEVICE = runtime.select(runtime.default_device())
BASE = {"requests": 3, "tokens": 6, "mix": "mixed", "block_size": 16, "split": 1, "world": 1, "rank": 0,
        "interleave": 1, "tail": 5, "ids": "low", "stride": "wide", "pad_tail": "ignored"}


def judged(case, b="device"):
    return SUBJECT.judge_case(case, SUBJECT.resolve("host"), SUBJECT.resolve(b), DEVICE)


AXES = SUBJECT.grid.axis_names


def test_the_grids_cover_what_the_issue_lists():
    assert get("slotmap") is SUBJECT
    default, envelope = SUBJECT.grid.cases(), SUBJECT.grids["envelope"].cases()
    assert (len(default), len(envelope)) == (514, 70632) and SUBJECT.grid.version == 2
    for grid in (default, envelope):
        assert all(cases.valid(c) and c["requests"] * c["tokens"] <= 16384 for c in grid)
        assert not [c for c in grid if c["pad_tail"] == "judged" and c["tail"] == 0]
        assert len({json.dumps(c, sort_keys=True) for c in grid}) == len(grid)  # no case twice
    values = {a: {c[a] for c in default} for a in AXES}
    assert {1, 256} <= values["requests"] and {1, 1024, 1025, 16384} <= values["tokens"]
    assert values["block_size"] == {16, 32, 64, 128} and values["split"] == {1, 2, 4}
    assert values["world"] == {1, 2, 4, 8} and values["interleave"] == {1, 16, 64}
    assert {(c["world"], c["rank"]) for c in default if c["world"] == 8} == {(8, r) for r in range(8)}
    assert values["tail"] >= {0, 1100} and values["ids"] == {"low", "wrap"} and values["stride"] == {"tight", "wide"}


def test_a_batch_keeps_every_position_in_its_row_with_the_last_block_partly_filled():
    case = {**BASE, "requests": 17, "tokens": 40, "world": 2, "split": 2}
    batch, params = cases.batch(case, 3)
    column = case["block_size"] * case["world"]
    ends = batch.positions[batch.query_start_loc[1:] - 1] + 1
    assert (batch.positions // column < batch.columns).all() and (ends % column != 0).any()
    assert batch.table_buffer.shape == (17, batch.columns + 3) and params.block_size == 8 and params.blocks_per_kv_block == 2
    wrap, _ = cases.batch({**BASE, "ids": "wrap", "block_size": 64}, 3)
    products = wrap.block_table.astype("int64") * 64
    assert (products >= 2**31).any() and (products < 2**31).any()


def test_the_pair_agrees_with_the_oracle_where_the_host_does_not_wrap():
    for case in ({**BASE, "world": 4, "rank": 2, "interleave": 16}, {**BASE, "split": 4, "block_size": 64, "stride": "tight"}):
        verdict = judged(case).verdict()
        assert verdict[0] == Status.PASS, verdict


def test_the_host_int32_wrap_is_a_finding_with_its_case():
    case = {**BASE, "ids": "wrap", "block_size": 128}
    j = judged(case)
    status, check, line = j.verdict()
    assert (status, check) == (Status.FAIL, "a-vs-oracle") and "slots" in line
    assert SUBJECT.extras(case, j) == {"finding": "int32-wrap"}
    assert not [m for m in j.mismatches if m.side == "b"]
    alone = SUBJECT.judge_case(case, SUBJECT.resolve("oracle"), SUBJECT.resolve("device"), DEVICE)
    assert alone.verdict()[0] == Status.PASS  # --a oracle: B judged past A's findings


@pytest.mark.parametrize("contract, verdict, finding", [("ignored", Status.PASS, ""), ("judged", Status.FAIL, "host-leaves-tail")])
def test_the_pad_tail_contract_decides_the_host_verdict(contract, verdict, finding):
    case = {**BASE, "pad_tail": contract}
    j = judged(case)
    assert j.verdict()[0] == verdict and SUBJECT.extras(case, j) == {"finding": finding}
    assert j.outputs["b"]["tail"].tolist() == ([-1] * 5 if contract == "judged" else [])


def test_the_selection_states_the_contract_and_knows_its_grids(tmp_path):
    sel = SUBJECT.select(None, ["requests=3", "block_size=16", "world=2"], None, "host", "device", DEVICE, None)
    judged_cases = sum(p.config["pad_tail"] == "judged" for p in sel.points)
    assert judged_cases and f"the tail too (it must be PAD) in {judged_cases}" in sel.header[0]
    assert "--filter pad_tail=ignored" in sel.header[0]
    env = SUBJECT.select("envelope", ["requests=256", "tokens=64", "world=8"], None, "host", "device", DEVICE, None)
    assert env.grid_total == len(SUBJECT.grids["envelope"].cases())
    assert env.header[0].startswith("slotmap (envelope grid)") and env.grid.name == "envelope"
    with pytest.raises(ConfigError, match="slotmap's grids are default, envelope, or a grid file; choose one"):
        SUBJECT.select("nonesuch", [], None, "host", "device", DEVICE, None)
    own = tmp_path / "mine.toml"
    axes = {**{a: [BASE[a]] for a in AXES}, "world": [1, 2]}
    own.write_text('version = 7\n[[default]]\nname = "one"\n' + "".join(f"{a} = {json.dumps(v)}\n" for a, v in axes.items()))
    mine = SUBJECT.select(str(own), [], None, "host", "device", DEVICE, None)
    assert [p.config["world"] for p in mine.points] == [1, 2] and mine.grid_version == 7
    assert mine.header[0].startswith("slotmap (mine.toml grid)")
    assert SUBJECT.grid.name == "default" and SUBJECT.select(None, [], None, "host", "device", DEVICE, None).grid_total == 514
    (tmp_path / "bad.toml").write_text("version = 1\n")
    with pytest.raises(ConfigError, match="no grid 'default' read from it"):
        SUBJECT.select(str(tmp_path / "bad.toml"), [], None, "host", "device", DEVICE, None)


# Each mutant and a small case that shows it (its grid witness or one like it). The kill
# loop judges B's side only, so pad_tail_one_chunk and int64_widening are killed on cases
# the host version (A) fails too (a judged tail, ids near 2**31).
WITNESSES = {
    "rank_test": {**BASE, "world": 2, "rank": 1, "interleave": 16},
    "interleave_order": {**BASE, "world": 2, "interleave": 16},
    "pad_tail_one_chunk": {**BASE, "tail": 1100, "pad_tail": "judged"},
    "chunk_boundary": {**BASE, "requests": 1, "tokens": 1025, "mix": "same"},
    "last_request": BASE,
    "int64_widening": {**BASE, "ids": "wrap", "block_size": 128},
    "hybrid_expansion": {**BASE, "split": 2},
    "table_stride": BASE,
}


def test_every_mutant_has_a_witness():
    assert sorted(WITNESSES) == sorted(m.id for m in SUBJECT.mutants) and len(WITNESSES) >= 8


@pytest.mark.parametrize("mutant_id", sorted(WITNESSES))
def test_each_mutant_is_killed_by_b_against_the_oracle(mutant_id):
    from remap_ab.subject import Point

    case = WITNESSES[mutant_id]
    mutant = next(m for m in SUBJECT.mutants if m.id == mutant_id)
    assert judged(case, mutant_id).verdict("b")[:2] == (Status.FAIL, "b-vs-oracle") and mutant.killed_by == "b-vs-oracle"
    assert judged(case).verdict("b")[0] == Status.PASS  # the real B passes it
    kill = mutants.kill(SUBJECT, mutant, [Point(0, SUBJECT.grid.case_id(case), case)], DEVICE)
    assert (str(kill.verdict), kill.check, kill.witness) == ("killed", "b-vs-oracle", SUBJECT.grid.case_id(case)), kill.detail


def code_lines(path) -> int:
    """Lines of code: not blank, not a comment, not a docstring."""
    import ast

    text = path.read_text()
    docs = set()
    for n in ast.walk(ast.parse(text)):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs |= set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def test_the_subject_is_at_most_100_lines_of_code():
    from pathlib import Path

    folder = Path(cases.__file__).parent  # the kernels, the oracle and grid.toml / mutants.toml apart
    assert code_lines(Path(__file__)) > 100  # the counter counts
    assert sum(code_lines(f) for f in folder.glob("*.py")) <= 100


def test_only_the_device_version_gets_the_sync_check():
    assert SUBJECT.must_not_sync(SUBJECT.resolve("device")) and not SUBJECT.must_not_sync(SUBJECT.resolve("host"))
    assert not SUBJECT.must_not_sync(SUBJECT.resolve("oracle"))


@pytest.mark.gpu
def test_on_a_gpu_the_device_version_is_sync_free_and_the_host_copy_is_no_finding():
    for case in (BASE, {**BASE, "tail": 1100, "pad_tail": "ignored", "split": 2}):
        # production: the device kernel on a busy stream of the caller's and replayed from a CUDA graph on another table
        j = SUBJECT.judge_case(case, SUBJECT.resolve("host"), SUBJECT.resolve("device"), "cuda", production=True)
        assert j.verdict()[0] == Status.PASS and not j.findings, j.verdict()
    syncing = SUBJECT.judge_case(BASE, SUBJECT.resolve("device"), SUBJECT.resolve("host"), "cuda")
    assert not syncing.findings  # the host version as B: not named in no_host_sync, not checked

    class AllSync(type(SUBJECT)):
        no_host_sync = True

    checked = AllSync().judge_case(BASE, SUBJECT.resolve("device"), SUBJECT.resolve("host"), "cuda")
    assert [(f.side, f.check) for f in checked.findings] == [("b", "sync")]  # the check does see the host's copies
    captured = AllSync().judge_case(BASE, SUBJECT.resolve("device"), SUBJECT.resolve("host"), "cuda", production=True)
    assert [(f.side, f.check) for f in captured.findings] == [("b", "sync"), ("b", "graph")]  # no graph holds the host's copies


@given(cases.strategy())
@settings(max_examples=30, deadline=None, database=None)
def test_the_strategy_draws_valid_cases(case):
    assert cases.valid(case) and case["requests"] * case["tokens"] <= 16384 and set(case) == set(AXES)


def _remap_ab(*args, timeout=300):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "remap_ab", *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_a_sweep_reports_the_findings_and_the_contract(tmp_path):
    done = _remap_ab("sweep", "--subject", "slotmap", "--device", "cpu", "-j", "1", "--root", str(tmp_path), "--run", "r",
                     "--filter", "requests=3", "--filter", "block_size=16", "--filter", "world=2", "--filter", "split=1,2")
    assert done.returncode == 1, done.stderr[-2000:]
    out = done.stdout + done.stderr
    assert "the PAD-tail contract" in out and "finding host-leaves-tail (the host version leaves the PAD tail" in out
    with open(tmp_path / "r" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["status"] == "pass" or r["finding"] for r in rows)  # every failure is a named finding
    assert {r["finding"] for r in rows if r["pad_tail"] == "judged"} == {"host-leaves-tail"}
    report = _remap_ab("report", "--root", str(tmp_path), "r")
    assert "verdicts: pass" in report.stdout and "pad_tail: ignored" in report.stdout, report.stdout[-2000:]


def test_the_pytest_grid_collects_the_subject():
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "remap_ab.pytest.plugin", "--remap-grid", "--remap-subject=slotmap",
                           "--remap-grid-filter=requests=3", "--remap-grid-filter=world=8", "--remap-grid-filter=block_size=128",
                           "--remap-grid-filter=ids=low", "-q", "-n", "0", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-2000:]


def test_a_soak_draws_from_the_strategy(tmp_path):
    done = _remap_ab("soak", "--subject", "slotmap", "--device", "cpu", "--minutes", "1", "--max-cases", "4",
                     "--workers", "1", "--seed", "5")
    out = done.stdout + done.stderr
    assert "4 cases" in out, out[-2000:]


def test_the_run_replay_and_mutants_parts_judge_the_subject(capsys):
    # The commands do not ask Subject.command_part yet (issue 61, part 2): the parts are called directly.
    import argparse

    wrap = json.dumps({**BASE, "ids": "wrap", "block_size": 128})
    run = SUBJECT.command_part("run")
    assert run.main(argparse.Namespace(case=wrap, a=None, b=None, device=DEVICE, report=None)) == 1
    assert SUBJECT.command_part("replay").main(argparse.Namespace(target=json.dumps(BASE), a=None, b=None,
                                                                  device=DEVICE, memcheck=False)) == 0
    out = capsys.readouterr().out
    assert "FAIL [a-vs-oracle] A's output slots" in out and "PASS" in out and "remap-ab replay --subject slotmap" in out
    killed = SUBJECT.command_part("mutants").main(argparse.Namespace(only=["table_stride,last_request"], list=False,
                                                                     device=DEVICE, jobs=1, json=None))
    assert killed == 0 and "mutants: 2 of 2 killed" in capsys.readouterr().out


def test_the_bench_times_decode_and_prefill_cases_and_refuses_a_pair_that_differs():
    from remap_ab.declare import parts

    bench = parts.part(SUBJECT, "bench")
    shapes = bench.shapes()
    assert {s["tokens"] for s in shapes if s["requests"] > 1} >= {1, 2048} and max(s["requests"] * s["tokens"] for s in shapes) == 16384
    small = {**shapes[0], "requests": 3, "tokens": 5}
    same = bench.pair(small, "host", "device", DEVICE)  # the host side: host arrays made once, the copy to the device timed
    assert same.disagreement(same.a(), same.b()) is None and same.replay.startswith("remap-ab replay --subject slotmap")
    assert same.eager == ("a",)  # the host version is NumPy: timed eagerly, a CUDA graph would skip it
    lines = [p.disagreement(p.a(), p.b()) for p in (bench.pair(small, "host", m.id, DEVICE) for m in SUBJECT.mutants)]
    assert any(line and line.startswith("B's output slots differs from A's at [") for line in lines), lines
    assert parts.part(type("NoBench", (type(SUBJECT),), {"bench": ()})(), "bench") is None


@pytest.mark.gpu
def test_on_a_gpu_the_bench_times_the_host_side_eagerly_and_the_device_side_in_a_graph():
    from remap_ab.bench.pairs import measure
    from remap_ab.declare import parts

    bench = parts.part(SUBJECT, "bench")
    row = measure(bench.pair({**bench.shapes()[0], "requests": 3, "tokens": 5}, "host", "device", "cuda"),
                  calls=5, repeats=3, fail_slower=None)
    assert (row["status"], row["a_method"], row["b_method"]) == ("timed", "eager", "graph"), row
    assert row["a_us"] > 0 and row["b_us"] > 0


@pytest.mark.skipif(runtime.cuda_available(), reason="checks the behaviour without a GPU")
def test_bench_without_a_gpu_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "remap_ab", "bench", "--subject", "slotmap"], capture_output=True, text=True)
    assert out.returncode == 2 and "needs a CUDA device" in out.stderr and "Traceback" not in out.stderr
