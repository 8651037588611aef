"""remap-ab bench: the parts that need no GPU (the refusal to run without one, the
agreement gate, the grid and launch shapes) and a small GPU smoke test."""

from __future__ import annotations

import sys
import textwrap

import pytest

from remap_ab import backend, bench, cli, registry
from remap_ab.config import CaseConfig
from remap_ab.errors import DisagreementError
from remap_ab.inputs import generate_inputs

needs_no_cuda = pytest.mark.skipif(backend.cuda_available(), reason="checks the behaviour without a GPU")


@needs_no_cuda
def test_bench_without_cuda_says_so_in_one_line_and_fails(capsys):
    rc = cli.main(["bench"])
    assert rc != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "needs a CUDA device" in err


def test_grid_is_the_pull_requests():
    cases = bench.bench_cases([512, 2048], [1, 256, 1024])
    assert len(cases) == 12
    counts = [c for c in cases if bench.path_of(c) == "counts"]
    assert all(c.mode == "convert" and c.counts and not c.compacts for c in counts)
    assert {(c.topk, c.tokens) for c in counts} == set(bench.PR_GB200_US)
    dcp = [c for c in cases if bench.path_of(c) == "dcp"]
    assert all(c.compacts and c.dcp_size == 4 for c in dcp) and len(dcp) == 6


def test_floor_grids_follow_each_implementations_launch():
    config = CaseConfig(mode="convert", topk=2048, tokens=1024, counts=True)
    assert bench.launch_shape(registry.get("old"), config) == ((1024, 16), 4)
    assert bench.launch_shape(registry.get("new"), config) == ((1024, 1), 8)
    tiled = config.replace(topk=384)
    assert bench.launch_shape(registry.get("new"), tiled) == ((1024, 3), 4)


@pytest.fixture
def off_by_one_module(tmp_path, monkeypatch):
    """The oracle with one lane of every output off by one: a pair that disagrees."""
    name = "broken_off_by_one"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        from remap_ab import oracle

        def _spoil(result):
            out, counts = result if isinstance(result, tuple) else (result, None)
            out = out.clone()
            out[0, 0] += 1
            return (out, counts) if counts is not None else out

        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return _spoil(oracle.triton_convert_req_index_to_global_index(*args, **kwargs))

        def triton_filter_and_convert_dcp_index(*args, **kwargs):
            return _spoil(oracle.triton_filter_and_convert_dcp_index(*args, **kwargs))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _small(path: str) -> CaseConfig:
    return [c for c in bench.bench_cases([512], [2], [path]) if bench.path_of(c) == path][0]


def test_gate_refuses_a_disagreeing_pair(off_by_one_module):
    backend.select(backend.default_device())
    config = _small("counts")
    inputs = generate_inputs(config, device=backend.default_device())
    with pytest.raises(DisagreementError, match="refusing to time old vs broken_off_by_one"):
        bench.agreement_gate(config, inputs, registry.get("old"), registry.get(off_by_one_module))


def test_gate_passes_old_and_new_on_both_paths():
    backend.select(backend.default_device())
    for path in ("counts", "dcp"):
        config = _small(path)
        inputs = generate_inputs(config, device=backend.default_device())
        assert bench.agreement_gate(config, inputs, registry.get("old"), registry.get("new")).passed


def test_chart_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    from remap_ab.charts import bar_chart
    from remap_ab.commands.common import draw_chart

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    said = draw_chart(bar_chart, tmp_path / "c", "t", ["g1", "g2"], {"old": [2.0, 13.0], "new": [1.5, float("nan")]}, "µs")
    assert "pip install 'remap-ab[plots]'" in said and "\n" not in said
    assert not list(tmp_path.iterdir())


@pytest.mark.gpu
def test_bench_times_a_small_cell_on_the_gpu(tmp_path):
    rc = cli.main(["bench", "--topk", "512", "--tokens", "2", "--calls", "5", "--repeats", "2", "--out", str(tmp_path)])
    assert rc == 0
    assert (tmp_path / "bench.csv").exists() and (tmp_path / "bench.json").exists()


@pytest.mark.gpu
def test_nondet_runs_quiet_and_contended_on_the_gpu(tmp_path):
    rc = cli.main(["nondet", "--topk", "2048", "--tokens", "8", "--runs", "3", "--out", str(tmp_path)])
    assert rc == 0


def test_report_of_timed_and_refused_cells(tmp_path, capsys):
    """The printing and artifact code, on made-up timings: a crash here on the GPU
    machine would waste the device time of the whole measurement."""
    from remap_ab.commands.bench import write_report

    timed_config, refused_config = bench.bench_cases([512], [1], ["counts", "dcp"])
    timed = bench.Cell(timed_config, "old", "new", verified_in_graph=True, bytes=4200)
    timed.times = {key: bench.Timing([us, us * 1.02]) for key, us in
                   (("a", 2.9), ("b", 1.5), ("floor_a", 0.8), ("floor_b", 0.7))}
    timed.grids = {"a": ((1, 4), 4), "b": ((1, 1), 8)}
    refused = bench.Cell(refused_config, "old", "new", status="refused", why="refusing to time old vs new: ...")

    rc = write_report([timed, refused], tmp_path, {"gpu": "made-up GPU"})
    assert rc == 1  # a refused cell fails the command
    printed = capsys.readouterr().out
    assert "2.50→1.67" in printed and "REFUSED" in printed and "FAIL dcp" in printed
    import pandas as pd

    frame = pd.read_csv(tmp_path / "bench.csv")
    assert list(frame["status"]) == ["timed", "refused"]
    assert abs(frame.loc[0, "speedup"] - 2.9 / 1.5) < 0.05
    assert (tmp_path / "bench.json").exists()
    assert (tmp_path / "bench.png").exists() or (tmp_path / "bench.svg").exists()
