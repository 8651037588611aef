"""remap-ab bench --subject topology: the refusal without a GPU, bad options, and the GPU
path with the timing faked (as tests/test_bench.py fakes it): each shape's inputs made,
gated and checked again for real (on the interpreter), the µs made up, so the rows, B/A
and the speed gate can be checked against the numbers that went in."""

from __future__ import annotations

import json

import pytest

from remap_ab import cli, runtime
from remap_ab.bench import pairs
from remap_ab.bench.timing import EagerLoop, Timing
from remap_ab.commands.common import environment
from remap_ab.subjects.topology import bench

needs_no_cuda = pytest.mark.skipif(runtime.cuda_available(), reason="checks the behaviour without a GPU")
TINY = (bench.shape(1, 64, 8), bench.shape(3, 8, 2))  # interpreter-sized stand-ins for the declared shapes


@needs_no_cuda
def test_without_a_gpu_it_says_so_in_one_line_exits_2_and_writes_nothing(capsys, tmp_path):
    rc = cli.main(["bench", "--subject", "topology", "--root", str(tmp_path / "reports")])
    assert rc == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "needs a CUDA device" in err and "µs" not in captured.out
    assert not (tmp_path / "reports").exists()


def test_the_remap_sections_options_are_refused_with_another_subject(capsys):
    # --subject is known first: the topology's options are the shared ones alone, and the
    # remap's are refused by the parser, in one line naming what it takes.
    with pytest.raises(SystemExit) as stopped:
        cli.main(["bench", "--subject", "topology", "--topk", "512", "--cold-l2"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--cold-l2, --topk: the remap bench's" in err and "--budget-s" in err and "--sections" not in err


def test_the_help_shows_the_named_subjects_options(capsys):
    for words, shown, hidden in ((["bench"], "--scan-warps", None),
                                 (["bench", "--subject", "topology"], "shared options alone", "--scan-warps")):
        with pytest.raises(SystemExit):
            cli.main([*words, "--help"])
        out = capsys.readouterr().out
        assert shown in out and "--fail-slower" in out and (hidden is None or hidden not in out)


def test_a_subject_without_a_bench_is_refused(capsys):
    assert cli.main(["bench", "--subject", "sums_subject:SUBJECT"]) == 2
    assert "bench has no part for this subject (its parts: none); declare parts = {'bench': MODULE}" in capsys.readouterr().err


def test_the_declared_shapes_run_from_decode_to_prefill_at_the_model_widths():
    shapes = bench.shapes()
    assert {s.rows for s in shapes} >= {1, 16384} and {s.topk for s in shapes} == {2048, 2176}
    assert len({s.segments for s in shapes}) >= 3 and all(s.keep == s.topk // 2 for s in shapes)
    assert len(set(shapes)) == len(shapes)


class _FakeGraph:
    def __init__(self, calls):
        self.calls = calls


@pytest.fixture
def fake_timing(monkeypatch):
    """The CUDA-graph capture and the timing replaced, as tests/test_bench.py does: a
    capture runs the calls eagerly, except A's, which fails as the torch pair's does on a
    GPU (it synchronises with the host), so A takes the eager loop; the timing replays
    each loop once (its last result is checked after timing) and hands out the µs in
    ``made_up``."""
    made_up = {"a": [10.0, 11.0, 9.0, 10.0, 10.5], "b": [2.0, 2.2, 1.8, 2.0, 2.1]}
    timed = []

    def capture(fn, calls, warmup=3):
        if sum(entry in ("eager", "graph") for entry in timed) % 2 == 0:  # A comes first in every shape
            timed.append("eager")
            raise RuntimeError("operation not permitted when stream is capturing")
        timed.append("graph")
        result = None
        for _ in range(calls):
            result = fn()
        return _FakeGraph(calls), result

    def time_graphs(graphs, repeats):
        timed.append((tuple(graphs), repeats))
        for loop, _ in graphs.values():
            if isinstance(loop, EagerLoop):
                loop.replay()
        return {name: Timing(list(made_up[name])) for name in graphs}

    monkeypatch.setattr(pairs, "capture", capture)
    monkeypatch.setattr(pairs, "time_graphs", time_graphs)
    runtime.select("cpu")
    return made_up, timed


def _bench_pairs(bench, a, b, device, folder, **kw):
    return pairs.bench_pairs(bench, a, b, device, folder, environment=environment(device),
                             command="remap-ab bench --subject topology", **kw)


@needs_no_cuda  # the fixture fixes this process on the CPU
def test_rows_and_b_over_a_come_from_the_measured_numbers(tmp_path, fake_timing):
    made_up, timed = fake_timing
    printed: list[str] = []
    rc = _bench_pairs(bench, "a", "b", "cpu", tmp_path, calls=7, repeats=5, fail_slower=0.05,
                                   shapes=TINY, say=printed.append)
    assert rc == 0
    assert timed == ["eager", "graph", (("a", "b"), 5)] * len(TINY)
    results = json.loads((tmp_path / "results.json").read_text())
    (section,) = results["sections"]
    assert section["status"] == "complete"
    rows = section["tables"][0]["rows"]
    assert [(r["rows"], r["topk"], r["segments"]) for r in rows] == [(s.rows, s.topk, s.segments) for s in TINY]
    a_median, b_median = 10.0, 2.0
    for r in rows:
        assert r["status"] == "timed" and r["verified_after"] is True and r["speed_gate"] == "ok"
        assert (r["a_method"], r["b_method"]) == ("eager", "graph")
        assert (r["a_us"], r["b_us"]) == (a_median, b_median)
        assert r["b_over_a"] == pytest.approx(b_median / a_median)
        assert r["b_over_a_ci_low"] <= r["b_over_a"] <= r["b_over_a_ci_high"] < 1
    assert any("A 10.00 µs (eager), B 2.00 µs (graph), B/A 0.200" in line for line in printed)
    assert (tmp_path / "index.html").exists() and (tmp_path / "tables.zip").exists()


@needs_no_cuda
def test_b_slower_beyond_noise_fails_the_run(tmp_path, fake_timing):
    made_up, _ = fake_timing
    made_up["b"] = [x * 1.5 for x in made_up["a"]]
    printed: list[str] = []
    rc = _bench_pairs(bench, "a", "b", "cpu", tmp_path, calls=2, repeats=5, fail_slower=0.05,
                                   shapes=TINY[:1], say=printed.append)
    assert rc == 1
    row = json.loads((tmp_path / "results.json").read_text())["sections"][0]["tables"][0]["rows"][0]
    assert row["speed_gate"] == "slower" and row["b_over_a"] == pytest.approx(1.5)
    assert any("SLOWER" in line for line in printed) and printed[-1].startswith("FAIL: 1 of 1 shapes")


WRONG_B = '''
from kernels_topology import fused


def fused_topology_witness_merge(learned, context_lens, num_segments, learned_keep, max_replacements):
    out = fused.fused_topology_witness_merge(learned, context_lens, num_segments, learned_keep, max_replacements)
    out[-1, -1] += 1
    return out
'''


@needs_no_cuda
def test_a_b_that_differs_from_a_is_refused_not_timed(tmp_path, fake_timing):
    _, timed = fake_timing
    wrong = tmp_path / "wrong_b.py"
    wrong.write_text(WRONG_B)
    (tmp_path / "page").mkdir()
    printed: list[str] = []
    rc = _bench_pairs(bench, "a", str(wrong), "cpu", tmp_path / "page", calls=2, repeats=5,
                                   fail_slower=0.05, shapes=TINY[:1], say=printed.append)
    assert rc == 1 and timed == []
    row = json.loads((tmp_path / "page" / "results.json").read_text())["sections"][0]["tables"][0]["rows"][0]
    assert row["status"] == "refused" and "B differs from A: merged[0, 63]" in row["why"]
    assert row["a_us"] is None and row["b_over_a"] is None  # nothing timed (NaN in JSON is null)
    assert any("REFUSED" in line and "remap-ab replay --subject topology" in line for line in printed)


@needs_no_cuda
def test_a_spent_budget_leaves_shapes_not_measured_and_says_so(tmp_path, fake_timing):
    printed: list[str] = []
    rc = _bench_pairs(bench, "a", "b", "cpu", tmp_path, calls=2, repeats=5, fail_slower=None,
                                   budget_s=1e-9, shapes=TINY, say=printed.append)
    assert rc == 1
    section = json.loads((tmp_path / "results.json").read_text())["sections"][0]
    assert section["status"] == "not run" and section["note"].startswith("2 of 2 shapes not measured")
    assert any(line.startswith("INCOMPLETE") for line in printed)
