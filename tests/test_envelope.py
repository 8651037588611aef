"""The call envelope (remap_ab/subjects/remap/envelope.toml): declared once, and the callers grid, the
models grid, the soak's draws and the bench's timed cells all derived from it; a PASS
that says what of it the run covered."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from remap_ab import cli, runtime
from remap_ab.subjects.remap.grid import envelope, grid
from remap_ab.subjects.remap.judge import features, registry
from remap_ab.subjects.remap.parts import soak
from remap_ab.sweep import summary

REPO = Path(__file__).resolve().parents[1]
INT32_MAX = 2**31 - 1
needs_no_cuda = pytest.mark.skipif(runtime.cuda_available(), reason="times the calls on the CPU's wall clock")


def _clear_caches():
    grid.load.cache_clear()
    grid.shipped_envelope.cache_clear()


@pytest.fixture
def wider_envelope(monkeypatch):
    """The envelope with one stride (640 @ block 128, not a multiple) and one prefill
    step (4096 rows) more."""
    env = envelope.load()
    wider = dataclasses.replace(env, strides=env.strides + (envelope.Stride(128, 640, "added by a test"),),
                                prefill_rows=env.prefill_rows + (4096,))
    monkeypatch.setattr(envelope, "load", lambda path=None: wider)
    _clear_caches()
    yield wider
    _clear_caches()


def test_the_envelope_holds_what_real_callers_pass():
    env = envelope.load()
    assert min(env.rows) == 1 and max(env.rows) == 16384 and set(env.prefill_rows) >= {2048, 8192, 16384}
    strides = {(s.block_stride, s.block_size) for s in env.strides}
    assert {(4096, 64), (320, 256), (12, 4), (2147483, 64)} <= strides
    assert any(s % b for s, b in strides)  # a stride that is not a multiple of its block size
    assert any(s * (64 * 16) > INT32_MAX for s, _ in strides)  # base * stride crosses INT32_MAX
    assert set(env.dcp_sizes) == {1, 2, 4, 8} and True in env.out_buffers
    # Which wrapper may take which parameter is features.py's: every row, on each of its wrappers.
    cells = env.cells()
    for f in features.FEATURES:
        for function in f.functions:
            wrapper = envelope.WRAPPERS[function]
            assert any(c.wrapper == wrapper and dict(c.match).get(f.field) for c in cells), (f.name, wrapper)


@pytest.mark.parametrize("name", ["callers", "models"])
def test_a_grid_holds_every_value_of_the_envelope_it_covers(name):
    g = grid.load(name)
    configs = [p.config for p in g.points()]
    assert g.cover and g.uncovered == []
    assert [c.label for c in envelope.load().cells(g.cover) if not any(c.covers(x) for x in configs)] == []
    added = [p for p in g.points() if p.label(grid.ENVELOPE_AXIS) != "-"]
    assert all(dict(p.labels)[g.dimension_names[0]] == "-" for p in added)  # said as what they are


def test_the_callers_grid_passes_nothing_outside_the_envelope():
    env = envelope.load()
    strides = {(s.block_size, s.block_stride) for s in env.strides}
    for p in grid.load("callers").points():
        c = p.config
        assert c.block_size in env.block_sizes and (c.tokens in env.rows or env.row_class(c.tokens)), p.line()
        dense = c.block_stride in (0, c.block_size)  # not passed, or a dense cache at any block size
        assert dense or (c.block_size, c.block_stride) in strides, p.line()
        assert not c.is_dcp or (c.dcp_size in env.dcp_sizes and c.interleave in env.interleaves), p.line()


def test_a_value_added_to_the_envelope_reaches_both_grids_the_soak_and_the_bench(wider_envelope):
    from remap_ab.subjects.remap.parts.bench import pr_table
    from remap_ab.subjects.remap.parts.bench.suite import SuiteOptions

    for name in ("callers", "models"):
        configs = [p.config for p in grid.load(name).points()]
        for wrapper in envelope.taking("block_stride"):
            assert any(c.mode == wrapper and (c.block_size, c.block_stride) == (128, 640) for c in configs), name
        for wrapper in ("convert", "dcp"):
            assert any(c.mode == wrapper and c.tokens == 4096 for c in configs), name
    drawn = [d.config for d in itertools.islice(soak.draws(3, 0, 64), 1500)]
    assert {(c.block_size, c.block_stride) for c in drawn} >= {(128, 640)}
    assert 4096 in {d.config.tokens for d in itertools.islice(soak.draws(3, 0, 16, prefill_share=1.0), 60)}
    opts = SuiteOptions()
    cells = pr_table.bench_cases(opts.pr_topk, opts.pr_tokens, opts.pr_paths)
    assert {pr_table.path_of(c) for c in cells if c.tokens == 4096} == set(pr_table.PATHS)
    from remap_ab.subjects.remap.parts.bench import command

    args = cli.build_parser("bench").parse_args(["bench", "--sections", "pr"])
    assert 4096 in command.build_options(args, "cuda").pr_tokens  # the command line's default too


def test_the_bench_gate_judges_every_path_up_to_16384_rows():
    from remap_ab.subjects.remap.parts.bench import pr_table
    from remap_ab.subjects.remap.parts.bench.suite import SuiteOptions

    opts = SuiteOptions()
    cells = pr_table.bench_cases(opts.pr_topk, opts.pr_tokens, opts.pr_paths)
    for path in ("counts", "dcp", "convert", "prefill", "dcp-inplace"):
        rows = {c.tokens for c in cells if pr_table.path_of(c) == path}
        assert {1, 2048, 8192, 16384} <= rows, path


def test_the_soak_draws_every_optional_parameter_on_every_wrapper_that_may_take_it():
    configs = [d.config for d in itertools.islice(soak.draws(0, 0, 64), 400)]
    seen = {(name, c.mode) for c in configs for name in features.uses(c)}
    assert seen >= {(f.name, envelope.WRAPPERS[fn]) for f in features.FEATURES for fn in f.functions}
    # A call neither side's wrapper takes is drawn without that parameter (main's DCP has no out=).
    plan = registry.feature_plan("main", "main")
    for d in itertools.islice(soak.draws(0, 0, 64, plan=plan), 400):
        assert plan.runnable(d.config), d.config.cli_args()


def test_a_short_seeded_soak_finds_a_b_that_ignores_the_stride_on_convert_alone(tmp_path, capsys):
    broken = str(REPO / "tests" / "impls" / "main_convert_ignores_stride.py")
    rc = cli.main(["soak", "--minutes", "5", "--max-cases", "15", "--max-tokens", "4", "--max-topk", "256",
                   "--seed", "1", "--a", "main", "--b", broken, "--device", runtime.default_device(), "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1, out
    data = json.loads(next(tmp_path.glob("soak/*/soak.json")).read_text())
    assert data["failures"]
    for rec in data["failures"]:  # each passes a packed stride to the convert wrapper
        assert ["BLOCK_STRIDE_ROWS", "convert", "A and B"] in rec["parameters"], rec
    assert data["parameters"]["BLOCK_STRIDE_ROWS on convert"]["A and B"] > len(data["failures"]) - 1
    counted = [line.strip() for line in out.splitlines() if " on convert: " in line or " on dcp: " in line]
    assert any(line.startswith("BLOCK_STRIDE_ROWS on dcp: ") for line in counted), out


@needs_no_cuda
def test_the_speed_gate_fails_a_b_slowed_only_on_prefill_sized_batches(tmp_path, monkeypatch):
    """The graph capture and replay replaced by the calls themselves timed on the wall
    clock: B runs eight times over above its threshold of rows (2048; lowered to 1 here,
    as 4096 rows take minutes a call in the Triton interpreter), and the cell above it
    fails the gate. On a GPU, with 2048: the command in tests/impls/slow_prefill.py."""
    import time

    from remap_ab.bench import measure
    from remap_ab.bench.timing import Timing
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    def capture(fn, calls, warmup=3):
        return fn, fn()

    def time_graphs(graphs, repeats):
        samples: dict = {key: [] for key in graphs}
        for _ in range(repeats):  # interleaved, as the real timing is
            for key, (fn, _calls) in graphs.items():
                t0 = time.perf_counter()
                fn()
                samples[key].append((time.perf_counter() - t0) * 1e6)
        return {key: Timing(s) for key, s in samples.items()}

    monkeypatch.setattr(measure, "capture", capture)
    monkeypatch.setattr(measure, "time_graphs", time_graphs)
    monkeypatch.setattr(measure, "floor_fn", lambda grid, warps: (lambda: None))
    runtime.select("cpu")
    slow = str(REPO / "tests" / "impls" / "slow_prefill.py")
    monkeypatch.setattr(registry.get(slow).module, "PREFILL_ROWS", 1)
    opts = SuiteOptions(sections=["pr"], device="cuda", timing_device="cpu", calls=1, repeats=6,
                        a="new", b=slow, pr_topk=(128,), pr_tokens=(1, 2), pr_paths=("counts",))
    suite = Suite(opts, tmp_path, {"device": "fake"}, say=lambda line: None)
    sections = suite.run()
    rows = {r["tokens"]: r for r in sections[0].tables[0].rows}
    assert rows[2]["speed_gate"] == "SLOWER" and rows[2]["b_over_a"] > 3
    assert 0.5 < rows[1]["b_over_a"] < 2  # the same call below the threshold (its exact ratio is the CPU's noise)
    assert any("counts K=128 T=2" in line for line in suite.slower_cells)


def test_a_pass_names_its_grid_its_envelope_and_the_grids_not_run():
    g = grid.load(None)
    s = {"complete": True, "api_compatible": True, "passed": True, "cases": 3, "selected": 3,
         "coverage": grid.coverage(g, [p.config for p in g.points()[:3]])}
    line = summary.result_line(s)
    assert line.startswith("PASS — every case passed: 3/3 on the pr grid (rows ")
    assert "dense caches, no caller buffers); not run: --grid callers (rows 1-16384, strides " in line
    assert "caller buffers), --grid models (rows 1-16384, " in line
    callers = grid.load("callers")
    text = grid.coverage(callers, [p.config for p in callers.points()])
    assert text.startswith("the callers grid (rows 1-16384, strides 12@4, 320@256, ") and "--grid pr (rows 1-1024" in text
    assert summary.result_line({**s, "passed": False}).startswith("FAIL")
