"""remap-ab soak: the draws (reproducible, covering every path beyond the grid), a
short soak that passes, a soak against a broken implementation that writes a report
and exits 1, and Ctrl-C that stops with a summary."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from remap_ab import cli, runtime
from remap_ab.soak import run as engine
from remap_ab.subjects.remap.case.config import NEGATIVE_KINDS, ROW_LAYOUTS, TABLE_KINDS
from remap_ab.subjects.remap.case.layouts import LAYOUT_NAMES
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts import soak

REPO = Path(__file__).resolve().parents[1]


def _take(seed, worker, n, max_tokens=4096, contend_every=0):
    return list(itertools.islice(soak.draws(seed, worker, max_tokens, contend_every=contend_every), n))


def test_draws_are_reproducible_per_seed_and_worker():
    first = [d.config.case_id for d in _take(7, 0, 50)]
    assert first == [d.config.case_id for d in _take(7, 0, 50)]
    assert first != [d.config.case_id for d in _take(7, 1, 50)]
    assert first != [d.config.case_id for d in _take(8, 0, 50)]
    assert len(set(first)) == 50  # fresh cases, not a grid revisited


def test_draws_reach_beyond_the_grid():
    drawn = _take(0, 0, 3000)
    configs = [d.config for d in drawn]
    labels = [d.labels() for d in drawn]
    assert {d.path for d in drawn} == set(soak.PATHS)
    assert all(c.topk % c.block_n == 0 and c.topk <= 4096 for c in configs)
    assert max(c.topk for c in configs) == 4096
    grid_k = {128, 384, 512, 2048}
    assert len({c.topk for c in configs} - grid_k) > 20  # K values the grid never runs
    assert {label["K kind"] for label in labels} == {"one tile (K == BLOCK_N)", "power of two", "not a power of two"}
    assert max(c.tokens for c in configs) > 1024 and min(c.tokens for c in configs) == 1
    assert {c.effective_dcp[0] for c in configs} == {1, 2, 4, 8}
    dcp = [c for c in configs if c.is_dcp]
    assert all(0 <= c.dcp_rank < c.dcp_size for c in dcp)
    assert {c.dcp_rank for c in dcp if c.dcp_size == 8} == set(range(8))
    assert {c.interleave for c in dcp} >= {1, 2, 4, 8, 16, 64}
    assert {c.table for c in configs} == set(TABLE_KINDS)  # persistent (issue 24's caller buffers) too
    assert {c.row_layout for c in configs} == set(ROW_LAYOUTS)
    assert {c.negatives for c in configs} == set(NEGATIVE_KINDS)
    assert {c.layout for c in configs} == set(LAYOUT_NAMES)
    assert any(c.compacts and c.counts for c in configs) and any(c.compacts and not c.counts for c in configs)
    assert any(c.is_dcp and not c.compact for c in configs) and any(c.has_prefill for c in configs)


def test_draws_take_every_backends_block_size_and_the_models_widths_more_often():
    configs = [d.config for d in _take(0, 0, 3000)]
    assert {c.block_size for c in configs} == set(envelope.load().block_sizes)  # the call envelope's
    assert all(c.block_size % c.interleave == 0 for c in configs if c.is_dcp)
    widths = dict(soak.model_widths())
    assert set(widths) == {1024, 2048, 2176, 2051, 4096}  # the call envelope's (envelope.toml)
    by_k = Counter(c.topk for c in configs)
    others = [n for k, n in by_k.items() if k not in widths]
    # Each model width (2176 = 17 x 128 among them) comes far more often than the other
    # K values do on average, each with a BLOCK_N the wrappers accept for it (2051: 1).
    assert min(by_k[k] for k in widths) > 5 * sum(others) / len(others)
    assert all(c.topk % c.block_n == 0 for c in configs)
    assert {c.block_n for c in configs if c.topk == 2051} == {1}


def test_buckets():
    assert [soak.tokens_bucket(t) for t in (1, 2, 8, 9, 64, 65, 4096, 5000)] == [
        "1", "2-8", "2-8", "9-64", "9-64", "65-512", "513-4096", "> 4096"]
    assert [soak.k_bucket(k) for k in (32, 128, 129, 4096)] == ["1-128", "1-128", "129-512", "2049-4096"]


def test_draws_respect_the_token_cap_and_mark_contended_cases():
    drawn = _take(3, 0, 200, max_tokens=4, contend_every=4)
    assert max(d.config.tokens for d in drawn) <= 4
    assert [d.contended for d in drawn[:8]] == [False, False, False, True] * 2


def _soak(tmp_path, *extra):
    # In-process: the device this test session runs kernels on (the interpreter on a
    # CPU machine, the GPU on a CUDA one: the backend is fixed per process). Small T
    # and K either way; on a GPU every other case runs under the contending stream.
    return cli.main(["soak", "--minutes", "5", "--device", runtime.current(), "--max-topk", "256",
                     "--max-tokens", "4", "--contend-every", "2", "--root", str(tmp_path / "root"), *extra])


def _soak_json(tmp_path) -> dict:
    (found,) = (tmp_path / "root" / "soak").glob("*/soak.json")
    return json.loads(found.read_text())


def test_short_soak_passes(tmp_path, capsys):
    assert _soak(tmp_path, "--seed", "5", "--max-cases", "3") == 0
    out = capsys.readouterr().out
    assert "soak: PASS — all 3 cases passed" in out
    assert "T up to 4" in out and "configurations drawn:" in out and "cases/s" in out
    data = _soak_json(tmp_path)
    assert data["cases"] == 3 and data["statuses"] == {"pass": 3} and data["failures"] == []
    assert sum(data["distribution"]["path"].values()) == 3
    assert data["workers"]["0"]["cases"] == 3 and data["workers"]["0"]["cases_per_s"] > 0


def test_soak_against_a_broken_implementation_writes_a_report_and_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "brk_soak.py").write_text(textwrap.dedent('''
        import kernels_new as _real

        def _bump(res):
            out, counts = res if isinstance(res, tuple) else (res, None)
            out = out.clone()
            out.view(-1)[0] += 1
            return (out, counts) if counts is not None else out

        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return _bump(_real.triton_convert_req_index_to_global_index(*args, **kwargs))

        def triton_filter_and_convert_dcp_index(*args, **kwargs):
            return _bump(_real.triton_filter_and_convert_dcp_index(*args, **kwargs))
    '''))
    assert _soak(tmp_path, "--seed", "2", "--max-cases", "2", "--b", "brk_soak") == 1
    captured = capsys.readouterr()
    assert "soak: FAIL — 2 of 2 cases did not pass" in captured.out
    # Like the sweep's summary: where the failures are, per dimension (failed/judged).
    assert "failures by dimension (not passing/judged):" in captured.out
    assert re.search(r"failures by dimension \(not passing/judged\):\n\s+path: [a-z0-9-]+ [12]/[12]", captured.out)
    data = _soak_json(tmp_path)
    assert sum(f for f, _ in data["failures_by_dimension"]["path"].values()) == 2
    data = _soak_json(tmp_path)
    assert data["statuses"] == {"fail": 2}
    for failure in data["failures"]:
        report = Path(failure["report"])
        assert (report / "verdict.json").is_file() and (report / "replay.sh").is_file()
        assert failure["replay"].endswith(f"remap-ab replay {report}")
        # brk_soak came from a folder of its own: the replay line says where.
        assert failure["replay"].startswith(f"PYTHONPATH={tmp_path}${{PYTHONPATH:+:$PYTHONPATH}} remap-ab replay")
        assert json.loads((report / "verdict.json").read_text())["verdict"]["failures"][0]["impl"] == "brk_soak"
        assert f"replay: {failure['replay']}" in captured.out


def test_ctrl_c_stops_with_a_summary(tmp_path):
    # The checkout first, then whatever the caller had on the path (a GPU machine may carry pydantic there).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "remap_ab", "soak", "--minutes", "10", "--device", "cpu", "--seed", "1",
         "--max-topk", "256", "--root", str(tmp_path / "root")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        header = proc.stdout.readline()  # printed once the soak is about to start
        assert header.startswith("soak old vs new for 10 min, seed 1"), header
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Ctrl-C: stopping after the cases in flight" in err
    assert "soak summary (stopped by Ctrl-C" in out
    assert "soak: interrupted — the" in out and "Traceback" not in err
    data = _soak_json(tmp_path)
    assert data["stopped"] == "stopped by Ctrl-C" and data["cases"] >= 1


@pytest.mark.parametrize("argv,message", [
    (["--minutes", "0"], "must be a positive finite number"),
    (["--minutes", "1", "--max-topk", "16"], "--max-topk 16"),
    (["--minutes", "1", "--seed", "-1"], "must be 0 or more"),
])
def test_bad_options_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    try:
        code = cli.main(["soak", "--device", runtime.current(), "--root", str(tmp_path), *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_worker_processes_and_a_worker_that_dies(tmp_path, capsys, monkeypatch):
    # Two pool.py workers (the GPU layout, here on the CPU), fed by this process's
    # draws; B kills its process on the DCP wrapper, so every DCP case kills the worker
    # holding it: that case becomes a crash record, the worker is replaced, and every
    # other case is judged.
    (tmp_path / "brk_die.py").write_text(textwrap.dedent('''
        import os
        import signal
        import kernels_new as _real
        triton_convert_req_index_to_global_index = _real.triton_convert_req_index_to_global_index
        def triton_filter_and_convert_dcp_index(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
    '''))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    monkeypatch.syspath_prepend(str(tmp_path))
    # --fresh-every 1: every draw a fresh variant on any device (a GPU soak's default
    # re-draws some variants' data), so the draws below are the soak's.
    code = _soak(tmp_path, "--seed", "4", "--max-cases", "3", "--workers", "2", "--batch", "2", "--b", "brk_die",
                 "--fresh-every", "1")
    captured = capsys.readouterr()
    assert code == 1
    data = _soak_json(tmp_path)
    # The first 3 x 2 draws, less the parameters neither old nor brk_die takes (soak.takeable).
    plan = registry.feature_plan("old", "brk_die")
    first = list(itertools.islice(soak.draws(4, 0, 4, 256, fresh_every=1, plan=plan), 6))
    dcp = {d.config.case_id for d in first if d.config.mode == "dcp"}
    assert 0 < len(dcp) < 6
    crashes = [f for f in data["failures"] if f["status"] == "crash"]
    assert data["cases"] == 6 and {f["case_id"] for f in crashes} == dcp, data
    assert all("worker killed by signal SIGKILL" in f["line"] for f in crashes)
    for f in crashes:
        assert (Path(f["report"]) / "verdict.json").is_file()
    assert data["statuses"].get("pass", 0) == 6 - len(dcp)
    assert "CRASH" in captured.err


def test_the_time_line_says_what_was_measured():
    cpu = engine.WorkerTimes(run_s=12.34, interpreter=True)
    assert cpu.line() == "judging 12.3 s (the Triton interpreter: nothing compiled)"
    assert "not counted: this Triton has no compilation listener" in engine.WorkerTimes(run_s=1.0).line()
    gpu = engine.WorkerTimes(run_s=50.0, compile_s=1.25, compiled=3, load_s=2.5, loaded=400, wait_s=4.0, counted=True,
                           ahead="compiled ahead by 15 worker(s): 410 kernels compiled")
    gpu.add(engine.WorkerTimes(run_s=10.0, counted=True))
    assert gpu.line() == ("judging 60.0 s; Triton in the worker: 3 kernels compiled in 1.2 s, 400 loaded from its "
                          "cache in 2.5 s; waiting for the compile-ahead 4.0 s (compiled ahead by 15 worker(s): "
                          "410 kernels compiled)")


def test_a_pool_worker_judges_contended_cases_under_the_load_and_the_rest_in_a_batch(tmp_path, monkeypatch):
    """The remap soak's judge (SoakPlan.judge, in a pool worker or in-process): each
    contended case's A and B are called with the load's context entered (twice per
    case), the quiet ones without it, all through the batch engine; every case comes
    back as a results row, in the order given."""
    import contextlib

    from remap_ab.subject import BatchTimes, JudgeSettings
    from remap_ab.subjects.remap.case.config import CaseConfig

    entered = []

    class Load:
        @contextlib.contextmanager
        def enqueue(self):
            entered.append(1)
            yield

    monkeypatch.setattr(soak, "_LOAD", Load())
    configs = [CaseConfig(mode="convert", tokens=2, topk=128, seed=s) for s in range(3)]
    settings = JudgeSettings("old", "new", runtime.current(), str(tmp_path))
    rows = soak.judge(configs, settings, BatchTimes(), [False, True, False])
    assert [r["case_id"] for r in rows] == [c.case_id for c in configs]
    assert [str(r["status"]) for r in rows] == ["pass"] * 3
    assert len(entered) == 2
