"""remap-ab bench: everything that needs no GPU (arithmetic, tables, the page, option
checking, the agreement gate, the CPU determinism and sweep-phase sections), and small
GPU smoke tests of every GPU section (skipped without CUDA)."""

from __future__ import annotations

import html as html_module
import json
import math
import os
import sys
import zipfile
from collections import namedtuple

import pytest
import torch

from remap_ab import cli, runtime
from remap_ab.bench import cold_l2, figures, page
from remap_ab.bench import host as host_timing
from remap_ab.bench.timing import Budget, Timing
from remap_ab.errors import DisagreementError, UsageError
from remap_ab.host import tuning
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import attention, contention, decode, host, pr_table, resources, width_scan

needs_no_cuda = pytest.mark.skipif(runtime.cuda_available(), reason="checks the behaviour without a GPU")


# ---------------------------------------------------------------- command line


@needs_no_cuda
def test_bench_without_cuda_says_so_in_one_line_and_fails(capsys):
    rc = cli.main(["bench"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "needs a CUDA device" in err


@pytest.mark.parametrize("argv, says", [
    (["--sections", "pr,bogus"], "--sections bogus: unknown"),
    (["--all", "--sections", "pr"], "give one of --all, --sections and --sweep-phases"),
    (["--sections", "width", "--scan-k", "300"], "--scan-k 300: each width must be a power of two"),
    (["--sections", "width", "--scan-warps", "3"], "--scan-warps 3"),
    (["--sections", "pr", "--topk", "100"], "--topk '100': every K must be a multiple of 128"),
    (["--sections", "decode", "--batches", "0,4"], "--batches '0,4': every value must be at least 1"),
    (["--sections", "determinism", "--det-runs", "1"], "--det-runs 1: comparing runs needs at least 2"),
    (["--sections", "pr", "--paths", "counts,nope"], "--paths"),
    (["--budget-s", "-3"], "must be a positive finite number"),
])
def test_bad_options_are_one_line_and_exit_2(argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) if argv[0] == "--budget-s" else _no_exit():
        rc = cli.main(["bench", *argv, "--report", str(tmp_path / "r")])
        assert rc == 2
    err = capsys.readouterr().err.strip()
    assert says in err
    if argv[0] != "--budget-s":  # argparse's own usage lines come first there
        assert len(err.splitlines()) == 1
    assert not (tmp_path / "r" / "index.html").exists()  # nothing written for bad input


class _no_exit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_report_location_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("x")
    rc = cli.main(["bench", "--sections", "determinism", "--det-topk", "256", "--det-tokens", "1", "--det-runs", "2",
                   "--report", str(target / "sub")])
    assert rc == 2
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root can write anywhere")
def test_read_only_report_location_is_refused(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        rc = cli.main(["bench", "--sections", "determinism", "--report", str(ro / "x")])
    finally:
        ro.chmod(0o700)
    assert rc == 2


def test_default_output_is_under_the_root(tmp_path, monkeypatch):
    from remap_ab.commands import bench as command

    args = cli.build_parser().parse_args(["bench", "--root", str(tmp_path / "reports")])
    folder = command._output_folder(args)
    assert folder.parent == tmp_path / "reports" / "bench" and folder.is_dir()


# ---------------------------------------------------------------- arithmetic


def test_occupancy_follows_the_occupancy_calculator():
    occ = resources.occupancy(32, 4, 0)
    assert (occ.blocks, occ.warps, occ.fraction, occ.limiter) == (16, 64, 1.0, "threads")
    # 128 regs x 32 lanes = 4096 per warp -> 16 warps fit -> 2 blocks of 8 warps.
    occ = resources.occupancy(128, 8, 0)
    assert (occ.blocks, occ.fraction, occ.limiter) == (2, 0.25, "registers")
    # 33 registers round up to 40 per thread (1280 per warp, units of 256): 51 warps -> 12 blocks of 4.
    assert resources.occupancy(33, 4, 0).blocks == 12
    # 100 KB of shared memory (+1 KB reserved): 2 blocks fit in 228 KB.
    occ = resources.occupancy(16, 4, 100 * 1024)
    assert (occ.blocks, occ.limiter) == (2, "shared memory")
    assert resources.occupancy(1, 1, 0).limiter == "blocks"  # 32 blocks of one warp: half the warps
    assert resources.occupancy(1, 1, 0).fraction == 0.5
    assert resources.occupancy(None, 4, 0) is None


def test_cold_l2_rotation_arithmetic():
    l2 = 60 * 2**20
    assert cold_l2.sets_needed(8 * 2**20, l2) == 15  # 2 x 60 MB / 8 MB
    assert cold_l2.sets_needed(10**9, l2) == 2  # never fewer than two copies
    assert cold_l2.sets_needed(100, l2) == cold_l2.MAX_SETS
    assert cold_l2.footprint_over_l2(8 * 2**20, 15, l2) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        cold_l2.sets_needed(0, l2)


def test_rotating_copies_are_bitwise_clones_in_their_own_memory_and_cycle():
    config = CaseConfig(mode="convert", topk=256, tokens=2, counts=True)
    x = generate_inputs(config, "cpu")
    copies = cold_l2.rotating_inputs(x, 3)
    assert len(copies) == 3
    ptrs = {c.token_indices.data_ptr() for c in copies}
    assert len(ptrs) == 3
    for c in copies:
        for name, t in x.tensors().items():
            assert torch.equal(getattr(c, name), t) and getattr(c, name).is_contiguous()
    seen = []
    fn = cold_l2.rotating_call(lambda c: seen.append(c.token_indices.data_ptr()), copies)
    for _ in range(7):
        fn()
    assert seen == [copies[k % 3].token_indices.data_ptr() for k in range(7)]
    assert cold_l2.input_bytes(x) == 4 * (2 * 256 + 2 + 2 * 64)


def test_decode_step_arithmetic_reproduces_the_prs_figures():
    pr = decode.pr_saved_per_step(78, 2048)
    assert pr[1] == pytest.approx(92.82)  # "about 93 µs"
    assert pr[256] == pytest.approx(269.1)  # "about 270 µs"
    model = decode.DecodeModel(layers=10, topk=2048, dcp_sizes=(1, 4))
    per_call = {(1, 1, "old"): 3.0, (1, 1, "new"): 1.5, (4, 1, "old"): 4.0, (4, 1, "new"): 2.0}
    rows = decode.rows(model, [1, 2], lambda d, b, i: per_call.get((d, b, i)))
    by = {(r["dcp"], r["batch"]): r for r in rows}
    assert by[(1, 1)]["old_step_us"] == 30.0 and by[(1, 1)]["new_step_us"] == 15.0 and by[(1, 1)]["saved_step_us"] == 15.0
    assert by[(1, 1)]["pr_quoted_saved_step_us"] == 93.0
    assert math.isnan(by[(4, 1)]["pr_quoted_saved_step_us"])  # the PR quotes DCP 1 only
    assert by[(4, 1)]["saved_step_us"] == 20.0
    assert math.isnan(by[(1, 2)]["saved_step_us"])  # not measured stays unknown, never 0
    mtp = decode.DecodeModel(tokens_per_request=2)
    assert decode.call_config(mtp, 4, 8).tokens == 16 and decode.call_config(mtp, 4, 8).compacts
    assert not decode.call_config(mtp, 1, 8).compacts and decode.call_config(mtp, 1, 8).counts
    with pytest.raises(UsageError):
        decode.DecodeModel(layers=0)
    with pytest.raises(UsageError):
        decode.DecodeModel(dcp_sizes=(0,))


def _contention_rows(gap_above: dict, floor_gap: dict):
    rows = []
    for t in gap_above:
        few_floor, many_floor = 1.0, 1.0 + floor_gap[t]
        rows.append({"path": "counts", "tokens": t, "variant": "4 tiles", "us": few_floor + 1.0,
                     "above_floor_us": 1.0, "status": "timed"})
        rows.append({"path": "counts", "tokens": t, "variant": "16 tiles", "us": many_floor + 1.0 + gap_above[t],
                     "above_floor_us": 1.0 + gap_above[t], "status": "timed"})
    return rows


def test_signature_holds_when_the_gap_above_the_floor_grows():
    rows = _contention_rows({1: 0.0, 64: 0.3, 4096: 1.2}, {1: 0.1, 64: 0.5, 4096: 8.0})
    sig = contention.signature(rows, "counts")
    assert sig.holds is True and "holds" in sig.sentence and "steadily" in sig.sentence
    assert [g[0] for g in sig.gaps] == [1, 64, 4096]


def test_signature_does_not_hold_when_only_the_launch_floor_grows():
    rows = _contention_rows({1: 0.2, 64: 0.2, 4096: 0.2}, {1: 0.1, 64: 0.5, 4096: 8.0})
    sig = contention.signature(rows, "counts")
    assert sig.holds is False and "launch cost, not contention" in sig.sentence
    # Beside a measured control it concludes nothing: floors of overlapping programs do not add.
    controlled = contention.signature(rows, "counts", controlled=True)
    assert controlled.holds is False and "not contention" not in controlled.sentence
    assert "atomic − control" in controlled.sentence and controlled.gaps == sig.gaps


def test_signature_needs_two_token_counts():
    rows = _contention_rows({1: 0.0}, {1: 0.0})
    assert contention.signature(rows, "counts").holds is None
    assert contention.signature(rows, "dcp").holds is None


def test_width_scan_findings_name_spill_onset_and_crossover():
    rows = []
    for k, regs, spills, single, tiled in ((256, 40, 0, 1.0, 2.0), (2048, 128, 0, 1.5, 2.0), (8192, 255, 96, 5.0, 3.0)):
        rows.append({"topk": k, "tokens": 256, "variant": "single tile, 8 warps", "regs_per_thread": regs,
                     "spills": spills, "us": single, "status": "timed"})
        rows.append({"topk": k, "tokens": 256, "variant": "tiled 128, 4 warps", "regs_per_thread": 30,
                     "spills": 0, "us": tiled, "status": "timed"})
    found = width_scan.findings(rows, (8,))
    assert "registers spill from K = 8192 (255 registers/thread there)" in found[0]
    assert "stops beating the tiled path at K = 8192 (5.00 vs 3.00 µs)" in found[1]
    rows = [r for r in rows if r["topk"] < 8192]
    found = width_scan.findings(rows, (8,))
    assert "no spills up to K = 2048" in found[0] and "beats the tiled path at every K" in found[1]


def test_width_scan_checks_its_widths_and_warps():
    width_scan.check_widths((128, 16384))
    for bad in ((100,), (384,), (64,)):
        with pytest.raises(UsageError):
            width_scan.check_widths(bad)
    with pytest.raises(UsageError):
        width_scan.check_warps((6,))


def test_budget_counts_down_with_a_reserve():
    now = [0.0]
    b = Budget(100.0, clock=lambda: now[0], reserve_s=10.0)
    assert b.left() == 90.0 and not b.exhausted and b.allows(80)
    now[0] = 95.0
    assert b.exhausted and not b.allows(0)
    assert Budget(None).left() == float("inf") and not Budget(None).exhausted


def test_timing_summary():
    t = Timing([1.0, 2.0, 4.0])
    assert t.median == 2.0 and t.spread == pytest.approx(1.5)
    assert math.isnan(Timing().median)


# ---------------------------------------------------------------- compiled variants


_Meta = namedtuple("_Meta", "shared num_warps")


class _FakeCompiled:
    def __init__(self, h, regs, spills, shared, warps):
        self.hash, self.metadata = h, _Meta(shared, warps)
        self._facts = (regs, spills)
        self.loaded = False

    def _init_handles(self):
        self.loaded = True
        self.n_regs, self.n_spills = self._facts


class _FakeParam:
    def __init__(self, name, is_constexpr):
        self.name, self.is_constexpr = name, is_constexpr


class _FakeJit:
    """Launches like a JITFunction: kernel[grid](...) -> self.run(grid=..., warmup=False, ...)."""

    arg_names = ["x_ptr", "NUM_TOPK_TOKENS", "SINGLE_TILE"]
    params = [_FakeParam("x_ptr", False), _FakeParam("NUM_TOPK_TOKENS", True), _FakeParam("SINGLE_TILE", True)]

    def __init__(self):
        self.device_caches = {0: ({}, None)}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args, grid, warmup, num_warps=4, **kwargs):
        key = (kwargs.get("NUM_TOPK_TOKENS"), num_warps)
        cache = self.device_caches[0][0]
        if key not in cache:
            spills = 8 if kwargs.get("NUM_TOPK_TOKENS", 0) > 4096 else 0
            cache[key] = _FakeCompiled(f"h{len(cache)}", 40 * num_warps // 4, spills, 0, num_warps)
        return cache[key]


def test_recording_sees_every_variant_with_its_constexprs_and_unwraps():
    fn = _FakeJit()
    book = resources.VariantBook()
    with resources.recording(book, {"new": fn}):
        assert "run" in vars(fn)
        fn[(4, 1)]("ptr", NUM_TOPK_TOKENS=2048, SINGLE_TILE=True, num_warps=8)
        fn[(8, 1)]("ptr", NUM_TOPK_TOKENS=2048, SINGLE_TILE=True, num_warps=8)
        fn[(1, 1)]("ptr", NUM_TOPK_TOKENS=8192, SINGLE_TILE=True, num_warps=8)
    assert "run" not in vars(fn)  # the launch entry is the class's again
    rows = book.rows()
    assert len(rows) == 2
    wide = next(r for r in rows if "K=8192" in r["variant"])
    assert wide["spills"] == 8 and wide["regs_per_thread"] == 80 and wide["num_warps"] == 8
    narrow = next(r for r in rows if "K=2048" in r["variant"])
    assert narrow["grids"] == "4x1 8x1" and narrow["variant"] == "K=2048 single=1"
    assert narrow["occupancy"] == pytest.approx(resources.occupancy(80, 8, 0).fraction, abs=1e-3)
    text = resources.format_rows(rows)
    assert "spills    8" in text and "regs  80" in text
    # Something compiled outside the recording is still listed, from the JIT cache.
    fn[(1, 1)]("ptr", NUM_TOPK_TOKENS=512, SINGLE_TILE=True, num_warps=4)
    resources.jit_cache_variants(book, {"new": fn})
    assert len(book.rows()) == 3


def test_the_interpreter_compiles_nothing_to_record():
    book = resources.VariantBook()
    assert book.add("new", None, {}) is None and book.rows() == []
    assert "none recorded" in resources.format_rows([])


# ---------------------------------------------------------------- the gate


@pytest.fixture
def off_by_one_module(broken_impl):
    """The oracle with one lane of every output off by one: a pair that disagrees."""
    return broken_impl(patch="out = out.clone(); out[0, 0] += 1", base="remap_ab.subjects.remap.judge.oracle", name="broken_off_by_one")


def _small(path: str) -> CaseConfig:
    return [c for c in pr_table.bench_cases([256], [2], [path]) if pr_table.path_of(c) == path][0]


def test_gate_refuses_a_disagreeing_pair(off_by_one_module):
    runtime.select(runtime.default_device())
    config = _small("counts")
    inputs = generate_inputs(config, device=runtime.default_device())
    with pytest.raises(DisagreementError, match="refusing to time old vs broken_off_by_one"):
        pr_table.agreement_gate(config, inputs, registry.get("old"), registry.get(off_by_one_module))


def test_cell_gate_refuses_a_disagreeing_variant_and_passes_tile_widths(off_by_one_module):
    from remap_ab.subjects.remap.parts.bench.measure import gate, wrapper_variant

    runtime.select(runtime.default_device())
    config = _small("dcp")
    inputs = generate_inputs(config, device=runtime.default_device())
    old, new, bad = registry.get("old"), registry.get("new"), registry.get(off_by_one_module)
    variants = contention.variants(config, (128, 256), old, new)
    assert [v.name for v in variants] == ["2 tiles", "1 tile (old)", "1 tile (new)"]
    assert [v.grid for v in variants] == [(2, 2), (2, 1), (2, 1)]
    assert gate(config, inputs, variants) is None
    why = gate(config, inputs, variants + [wrapper_variant(bad, config, "broken")])
    assert why and "refusing to time 2 tiles vs broken" in why


def test_gate_passes_old_and_new_on_every_path():
    runtime.select(runtime.default_device())
    for path in pr_table.PATHS:
        config = _small(path)
        inputs = generate_inputs(config, device=runtime.default_device())
        assert pr_table.agreement_gate(config, inputs, registry.get("old"), registry.get("new")).passed


def test_floor_grids_follow_each_implementations_launch():
    config = CaseConfig(mode="convert", topk=2048, tokens=1024, counts=True)
    assert pr_table.launch_shape(registry.get("old"), config) == ((1024, 16), 4)
    assert pr_table.launch_shape(registry.get("new"), config) == ((1024, 1), 8)
    assert pr_table.launch_shape(registry.get("new"), config.replace(topk=384)) == ((1024, 3), 4)
    names = [v.name for v in contention.variants(config, (128, 256, 512, 1024), registry.get("old"), registry.get("new"))]
    assert names == ["16 tiles", "8 tiles", "4 tiles", "2 tiles", "1 tile (new)"]


def test_grid_is_the_pull_requests():
    cases = pr_table.bench_cases([512, 2048], [1, 256, 1024])
    counts = [c for c in cases if pr_table.path_of(c) == "counts"]
    assert {(c.topk, c.tokens) for c in counts} == set(pr_table.PR_GB200_US)
    assert all(c.compacts and c.dcp_size == 4 for c in cases if pr_table.path_of(c) == "dcp")


def test_width_scan_direct_launch_matches_the_oracle_on_the_interpreter():
    """The direct launch's arguments, on the CPU: both the single tile and the tiled
    path must pass the gate (a wrong argument would show here, not on the GPU)."""
    from remap_ab.subjects.remap.parts.bench.measure import gate

    runtime.select(runtime.default_device())
    import kernels_new

    config = CaseConfig(mode="convert", topk=256, tokens=2, counts=True)
    inputs = generate_inputs(config, runtime.default_device())
    facts: dict = {}
    vs = [width_scan.direct_variant(kernels_new._convert_req_index_to_global_index_kernel, config, single=single,
                                    block_n=bn, warps=w, name=n, facts=facts)
          for single, bn, w, n in ((True, 256, 8, "single"), (False, 128, 4, "tiled"))]
    assert [v.grid for v in vs] == [(2, 1), (2, 2)]
    assert gate(config, inputs, vs) is None


# ---------------------------------------------------------------- attention consumer


def test_attention_consumer_matches_a_row_by_row_reference():
    runtime.select(runtime.default_device())
    config = attention.cases([256], [3])[0]
    inputs = generate_inputs(config, "cpu")
    consumer = attention.Consumer.for_case(config, inputs, head_dim=16)
    out, counts = registry.get("oracle")(config, inputs)
    got = consumer.attend(out, counts, torch.float32)
    for t in range(config.tokens):
        n = int(counts[t])
        idx = out[t, :n].long() % consumer.keys.shape[0]
        k, v, q = consumer.keys[idx].double(), consumer.values[idx].double(), consumer.queries[t].double()
        want = torch.softmax(k @ q / 4.0, dim=0) @ v if n else torch.zeros(16, dtype=torch.float64)
        assert torch.allclose(got[t].double(), want, atol=1e-5)
    # The same slots in another order: the same attention up to rounding, not bitwise
    # necessarily; an empty row is zeros.
    flipped = out.clone()
    for t in range(config.tokens):
        n = int(counts[t])
        flipped[t, :n] = out[t, :n].flip(0)
    assert torch.allclose(consumer.attend(flipped, counts, torch.float32), got, atol=1e-5)
    assert torch.equal(consumer.attend(out, torch.zeros_like(counts), torch.float32), torch.zeros_like(got))


def test_determinism_section_on_the_cpu_shows_the_race_downstream(tmp_path):
    """Old (2 tiles at K=256) changes its compacted order under permuted schedules and
    the fp32 attention output with it; new (a single tile) gives one output."""
    if runtime.cuda_available():
        pytest.skip("the CPU conditions (schedules) need the interpreter")
    rc = cli.main(["bench", "--sections", "determinism", "--det-topk", "256", "--det-tokens", "1", "--det-runs", "4",
                   "--report", str(tmp_path)])
    assert rc == 0
    results = json.loads((tmp_path / "results.json").read_text())
    (section,) = results["sections"]
    assert section["status"] == "complete"
    rows = {(r["impl"], r["dtype"]): r for r in section["tables"][0]["rows"]}
    assert rows[("new", "float32")]["distinct_index_outputs"] == 1
    assert rows[("new", "float32")]["distinct_attention_outputs"] == 1
    assert rows[("new", "bfloat16")]["distinct_attention_outputs"] == 1
    assert rows[("old", "float32")]["distinct_index_outputs"] > 1
    assert rows[("old", "float32")]["distinct_attention_outputs"] > 1
    assert rows[("old", "float32")]["max_abs_delta"] > 0
    assert rows[("new", "float32")]["max_abs_delta"] == 0
    assert set(os.listdir(tmp_path)) == set(page.FILES)


# ---------------------------------------------------------------- the page


def _fake_sections():
    from remap_ab.bench.page import Chart, Section, Table

    s1 = Section("contention", "1. Contention signature", "Does the gap grow?", status="complete",
                 findings=["counts: holds — <b>grows</b>"],
                 tables=[Table("cells", "cells", [{"tokens": 1, "variant": "16 tiles", "us": 2.345678, "floor_us": float("nan"),
                                                    "verified_in_graph": True}])],
                 charts=[Chart("lines", "a chart", b"\x89PNG fake")])
    s2 = Section("sweep", "6b. Sweep", status="partial", note="stopped by the time budget: 3 cells not measured.")
    s3 = Section("width", "2b. Width", status="not run", note="needs a CUDA device")
    return [s1, s2, s3]


def test_page_holds_every_table_status_and_escapes_text(tmp_path):
    files = page.write(tmp_path, _fake_sections(), {"gpu": "Made-up GPU", "torch": "x", "command": "remap-ab bench --all"})
    assert [f.name for f in files] == list(page.FILES) and set(os.listdir(tmp_path)) == set(page.FILES)
    html = (tmp_path / "index.html").read_text()
    assert "Made-up GPU" in html and "2.35" in html and "16 tiles" in html
    assert "&lt;b&gt;grows&lt;/b&gt;" in html and "<b>grows</b>" not in html  # text is escaped
    for status in ("complete", "partial", "not run"):
        assert f">{status}</span>" in html
    assert "stopped by the time budget: 3 cells not measured." in html
    assert "data:image/png;base64," in html  # the chart is inline: one self-contained file
    results = json.loads((tmp_path / "results.json").read_text())  # NaN became null: valid JSON
    assert results["sections"][0]["tables"][0]["rows"][0]["floor_us"] is None
    with zipfile.ZipFile(tmp_path / "tables.zip") as z:
        assert set(z.namelist()) == {"contention-cells.csv", "contention-lines.png"}
        assert "16 tiles" in z.read("contention-cells.csv").decode()


def test_page_says_in_one_line_when_matplotlib_is_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert not figures.available()
    assert figures.lines("t", "x", "y", {"a": [(1, 2.0)]}) is None
    page.write(tmp_path, _fake_sections(), {})
    html = (tmp_path / "index.html").read_text()
    lines = [line for line in html.splitlines() if "matplotlib is not installed" in line]
    assert len(lines) == 1 and "pip install 'remap-ab[plots]'" in html_module.unescape(lines[0])


@pytest.mark.skipif(not figures.available(), reason="matplotlib not installed")
def test_charts_are_png_when_matplotlib_is_there():
    png = figures.lines("t", "tokens", "µs", {"a": [(1, 2.0), (8, 3.0), (64, float("nan"))]})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert figures.stacked_bars("t", ["g1", "g2"], {"floor": [1.0, 2.0], "rest": [0.5, float("nan")]}, "µs")[:4] == b"\x89PNG"


def test_cell_formatting():
    assert page.fmt(float("nan")) == "—" and page.fmt(None) == "—" and page.fmt(True) == "yes"
    assert page.fmt(2.34567) == "2.35" and page.fmt(12.345) == "12.35" and page.fmt(0.0001234) == "0.000123"
    assert page.fmt(0.0) == "0" and page.fmt("x") == "x"


def test_pr_table_rows_with_cold_timings_and_a_refused_cell():
    timed_config, refused_config = pr_table.bench_cases([512], [1], ["counts", "dcp"])
    timed = pr_table.Cell(timed_config, "old", "new", verified_in_graph=True, bytes=4200, cold_sets=9000,
                       cold_footprint_over_l2=0.4)
    timed.times = {key: Timing([us, us * 1.02]) for key, us in
                   (("a", 2.9), ("b", 1.5), ("floor_a", 0.8), ("floor_b", 0.7), ("a_cold", 3.5), ("b_cold", 1.9))}
    timed.grids = {"a": ((1, 4), 4), "b": ((1, 1), 8)}
    refused = pr_table.Cell(refused_config, "old", "new", status="refused", why="refusing to time old vs new: ...")
    r = timed.row()
    assert r["cold_speedup"] == pytest.approx(3.5 / 1.9, rel=0.02) and r["a_grid"] == "1x4"
    assert r["pr_gb200_old_us"] == 2.50
    shown = pr_table.printable([timed, refused])
    assert list(shown["check"]) == ["ok", "REFUSED"]
    assert "(partly warm)" in shown.loc[0, "rotation"]
    assert math.isnan(refused.row()["speedup"])


# ---------------------------------------------------------------- host and sweep phases


def test_host_overhead_rows_on_the_cpu():
    runtime.select(runtime.default_device())
    if runtime.cuda_available():
        pytest.skip("times the interpreter's wrappers: a CUDA process has the GPU backend "
                    "(the GPU rows run in test_every_gpu_section_runs_small)")
    calls = []
    assert len(host_timing.host_us_per_call(lambda: calls.append(1), 5, "cpu", warmup=2, repeats=3)) == 3
    assert len(calls) == 2 + 5 * 3  # no call skipped or repeated
    what = [(impl, w) for impl, w, _, _ in host.host_callables(["old", "new"], "cpu")]
    assert ("old", "public wrapper") in what and ("new", "raw kernel launch (arguments prepared)") in what
    assert ("-", "empty kernel launch") in what
    rows = host.host_overheads(["new"], "cpu", calls=1, repeats=1)
    assert all(r["host_us_per_call"] > 0 for r in rows)


def test_sweep_phases_in_process_on_a_tiny_subset(tmp_path):
    """The sweep section through the suite, one case: the phase split comes from the
    run's run.json and the row says what ran."""
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    runtime.select(runtime.default_device())
    opts = SuiteOptions(sections=["sweep"], device=runtime.default_device(), sweep_fresh_process=False,
                        sweep_filters=("path=convert-counts", "tokens=1", "k=128", "invalid=0", "oor=off"))
    suite = Suite(opts, tmp_path, {}, say=lambda line: None)
    (section,) = suite.run()
    assert section.status == "complete", section.note
    tables = {t.key: t.rows for t in section.tables}
    rows = tables["phases"]
    from remap_ab.subjects.remap.grid import grid as gridmod
    from remap_ab.subjects.remap.grid.selection import select_with_calls
    from remap_ab.subjects.remap.judge import rejections

    # The one case, and the rejection calls its filters keep (none: every call's base case has 4 rows).
    g = gridmod.load("pr")
    _, calls = select_with_calls(g, list(opts.sweep_filters), None, rejections.sweep_points(len(g.points()), grid=g))
    assert rows[0]["cases"] == 1 + len(calls) and rows[0]["rc"] == 0
    breakdown = {r["way"]: r for r in tables["kernels-phase"]}
    assert set(breakdown) == {"plain", "poisoned", "sweep call"}
    assert all(r["cases"] == 1 and r["calls"] == 2 and r["total_s"] >= r["host_s"] > 0 for r in breakdown.values())
    assert all(rows[0][k] is not None and rows[0][k] >= 0 for k in ("gen_s", "kernels_s", "compare_s", "write_s"))
    assert rows[0]["wall_s"] >= rows[0]["phases_sum_s"]
    assert any("in-process" in f for f in section.findings)
    assert [r["run"] for r in rows] == ["in-process, first", "in-process, second (warm)"]
    assert any("per-process JIT work" in f for f in section.findings)


@needs_no_cuda
def test_all_on_the_cpu_runs_what_it_can_and_says_what_it_did_not(tmp_path):
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    opts = SuiteOptions(sections=["pr", "contention", "resources", "sweep"], device="cpu")
    sections = Suite(opts, tmp_path, {}, say=lambda line: None).run()
    assert [s.status for s in sections] == ["not run"] * 4
    assert all(s.note for s in sections)
    html = (tmp_path / "index.html").read_text()
    assert html.count("needs a CUDA device") == 3 and "give --sweep-filter" in html


def test_a_section_that_raises_is_an_error_and_the_rest_still_run(tmp_path, monkeypatch):
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    def boom(self, section):
        raise RuntimeError("made-up failure")

    monkeypatch.setattr(Suite, "_section_host", boom)
    opts = SuiteOptions(sections=["host", "sweep"], device="cpu")
    sections = Suite(opts, tmp_path, {}, say=lambda line: None).run()
    assert sections[0].status == "error" and "made-up failure" in sections[0].note
    assert sections[1].status == "not run"  # ran (and declined without a filter), after the error


def test_budget_spent_leaves_sections_not_run(tmp_path):
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    opts = SuiteOptions(sections=["determinism", "host"], device="cpu", budget_s=1e-9)
    sections = Suite(opts, tmp_path, {}, say=lambda line: None).run()
    assert [s.status for s in sections] == ["not run", "not run"]
    assert "budget" in sections[0].note


# ---------------------------------------------------------------- GPU smoke tests


@pytest.mark.gpu
def test_every_gpu_section_runs_small(tmp_path):
    rc = cli.main(["bench", "--all", "--report", str(tmp_path), "--calls", "5", "--repeats", "2", "--topk", "512",
                   "--tokens", "2", "--contention-tokens", "1,8", "--batches", "1,2", "--scan-k", "256,512",
                   "--scan-tokens", "2", "--det-tokens", "2", "--det-runs", "3", "--host-calls", "20",
                   "--sweep-filter", "tokens=1", "--sweep-filter", "k=128", "--no-fresh-process"])
    results = json.loads((tmp_path / "results.json").read_text())
    status = {s["key"]: (s["status"], s["note"]) for s in results["sections"]}
    assert all(v[0] == "complete" for v in status.values()), status
    assert rc == 0
    variants = next(s for s in results["sections"] if s["key"] == "resources")["tables"][0]["rows"]
    assert any(r["regs_per_thread"] for r in variants)


@pytest.mark.gpu
def test_nondet_runs_quiet_and_contended_on_the_gpu(tmp_path):
    rc = cli.main(["nondet", "--topk", "2048", "--tokens", "8", "--runs", "3", "--out", str(tmp_path)])
    assert rc == 0


# ---------------------------------------------------------------- GPU sections, timing faked


class _FakeGraph:
    def __init__(self, calls):
        self.calls = calls


@pytest.fixture
def fake_graph_timing(monkeypatch):
    """The CUDA-graph capture and replay replaced: capture runs the calls eagerly,
    timing hands out made-up µs (floors below kernels). Everything else of the GPU
    sections (gates, cold rotation, tables, findings, the page) runs for real on the
    interpreter."""
    from remap_ab.bench import measure

    captured = []

    def capture(fn, calls, warmup=3):
        result = None
        for _ in range(calls):
            result = fn()
        captured.append(calls)
        return _FakeGraph(calls), result

    def time_graphs(graphs, repeats):
        return {key: Timing([(0.5 if key[0] == "floor" else 2.0 + (0.7 if key[0] == "cold" else 0.0))] * repeats)
                for key in graphs}

    monkeypatch.setattr(measure, "capture", capture)
    monkeypatch.setattr(measure, "time_graphs", time_graphs)
    monkeypatch.setattr(measure, "floor_fn", lambda grid, warps: (lambda: None))
    monkeypatch.setattr(cold_l2, "l2_bytes", lambda device=None: 16 * 1024)
    return captured


@needs_no_cuda
def test_gpu_sections_run_end_to_end_with_the_timing_faked(tmp_path, fake_graph_timing, monkeypatch):
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    runtime.select("cpu")
    # The cross-compile workers start as in remap-ab's own process (the command line): forked
    # from a server that imported torch once, not each importing it (test_start.py has how).
    monkeypatch.setattr(tuning, "_owned", True)
    opts = SuiteOptions(
        sections=["pr", "contention", "decode", "width", "resources"], device="cuda", timing_device="cpu",
        calls=2, repeats=2, pr_topk=(512,), pr_tokens=(1,), pr_paths=("counts", "dcp"), cold_l2=True,
        # The most tiles (128 wide) and the few the signature compares them with (512 wide): the
        # other widths are the same kernel again.
        contention_tokens=(1,), contention_widths=(128, 512),
        decode_batches=(1, 2), model=decode.DecodeModel(layers=78, topk=2048, dcp_sizes=(1,)),
        scan_k=(256,), scan_warps=(8,), scan_tokens=(1,), resource_targets=("sm_90", "gfx942"), resource_topks=(256,),
    )
    printed = []
    sections = Suite(opts, tmp_path, {"device": "fake"}, say=printed.append).run()
    status = {s.key: (s.status, s.note) for s in sections}
    assert all(v[0] == "complete" for v in status.values()), status
    by = {s.key: s for s in sections}

    pr = by["pr"].tables[0].rows
    assert [r["path"] for r in pr] == ["counts", "dcp"]
    assert all(r["status"] == "timed" and r["verified_in_graph"] for r in pr)
    assert all(r["a_us"] == 2.0 and r["a_cold_us"] == 2.7 and r["floor_a_us"] == 0.5 for r in pr)
    assert pr[0]["cold_sets"] == cold_l2.sets_needed(4 * (512 + 1 + 2 * 64), 16 * 1024)
    assert max(fake_graph_timing) >= pr[0]["cold_sets"]  # a cold graph covers every copy

    cont = by["contention"].tables[0].rows
    tiles = {"16 tiles", "4 tiles"}
    assert {r["variant"] for r in cont} == tiles | {f"{t}, control" for t in tiles} | {"1 tile (new)"}
    assert {r["grid"] for r in cont if r["variant"] == "16 tiles, control"} == {"1x16"}
    assert {r["grid"] for r in cont if r["variant"] == "4 tiles"} == {"1x4"}
    control = {(c["path"], c["tiles"]): c for c in by["contention"].tables[1].rows}
    assert set(control) == {(p, t) for p in ("counts", "dcp") for t in (16, 4)}
    assert all(c["contention_us"] == 0.0 and c["verified_in_graph"] for c in control.values())
    assert any("no measurable contention" in f for f in by["contention"].findings)
    assert {r["grid"] for r in cont if r["variant"] == "16 tiles"} == {"1x16"}
    assert all(r["above_floor_us"] == 1.5 for r in cont)
    assert any("not enough timed token counts" in f for f in by["contention"].findings)

    steps = {r["batch"]: r for r in by["decode"].tables[0].rows}
    assert steps[1]["old_call_us"] == 2.0 and steps[2]["new_step_us"] == pytest.approx(78 * 2.0)
    assert steps[1]["saved_step_us"] == 0.0  # equal made-up times: nothing saved, said as such

    width = by["width"].tables[0].rows
    assert [(r["path"], r["variant"]) for r in width] == [
        (p, v) for p in ("counts", "dcp-inplace", "dcp-compact") for v in ("single tile, 8 warps", "tiled 128, 4 warps")]
    assert [r["grid"] for r in width] == ["1x1", "1x2"] * 3
    assert all(r["status"] == "timed" and r["verified_in_graph"] for r in width)
    res = by["resources"]
    assert res.findings[0].startswith("0 compiled variants")  # the interpreter compiles nothing
    cross = {t.key: t.rows for t in res.tables if t.key.startswith("cross-")}
    assert set(cross) == {"cross-sm_90", "cross-gfx942"}
    assert len(cross["cross-sm_90"]) == 2 * 7  # A and B on every path at K = 256
    assert all(r["regs"] for r in cross["cross-sm_90"]) and all(r["vgprs"] for r in cross["cross-gfx942"])
    assert any("spills nowhere" in f for f in res.findings)
    html = (tmp_path / "index.html").read_text()
    assert "16 tiles" in html and "single tile, 8 warps" in html
    assert any("pr counts K=512" in line for line in printed)


@needs_no_cuda
def test_a_cell_whose_graph_output_goes_wrong_after_timing_is_flagged(tmp_path, fake_graph_timing, monkeypatch):
    """The post-timing check judges what the graph's last call returned: spoil it."""
    from remap_ab.bench import measure

    runtime.select("cpu")
    real_capture = measure.capture

    def spoiling_capture(fn, calls, warmup=3):
        graph, result = real_capture(fn, calls)
        if result is None:  # a floor graph: nothing to spoil
            return graph, result
        out, counts = result
        out = out.clone()
        out[0, 0] = 12345
        return graph, (out, counts)

    monkeypatch.setattr(measure, "capture", spoiling_capture)
    config = CaseConfig(mode="convert", topk=256, tokens=1, counts=True)
    cell = pr_table.bench_cell(config, registry.get("old"), registry.get("new"), calls=2, repeats=1, device="cpu")
    assert cell.status == "timed" and cell.verified_in_graph is False
    assert "graph outputs fail the oracle after timing" in cell.why
    assert pr_table.printable([cell]).loc[0, "check"] == "FAIL"


def test_chart_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    from remap_ab.bench.charts import bar_chart
    from remap_ab.commands.common import draw_chart

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    said = draw_chart(bar_chart, tmp_path / "c", "t", ["g1", "g2"], {"old": [2.0, 13.0], "new": [1.5, float("nan")]}, "µs")
    assert "pip install 'remap-ab[plots]'" in said and "\n" not in said
    assert not list(tmp_path.iterdir())


def test_pivot_keeps_first_seen_order_and_leaves_gaps():
    from remap_ab.bench.charts import pivot

    rows = [("quiet", "old", 3), ("contended", "old", 20), ("quiet", "new", 1)]
    groups, values = pivot(rows, lambda r: r[0], lambda r: r[1], lambda r: r[2])
    assert groups == ["quiet", "contended"]
    assert values["old"] == [3.0, 20.0] and values["new"][0] == 1.0 and math.isnan(values["new"][1])
