"""Issue 33's checks, each fed an implementation that breaks it: the output layout
(every call, every device), the host-sync check on every call and the graph and stream
checks sampled per batch-size bucket (GPU), the sweep's indicative speed ratio, and
bench's speed gate (its statistics on synthetic timings)."""

from __future__ import annotations

import random

import pytest
import torch

from remap_ab import runtime, speed
from remap_ab.errors import UsageError
from remap_ab.status import Check
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import batch
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.judge.call import call
from remap_ab.subjects.remap.judge.out_layout import Expected, caller_buffer, layout_findings, row_major, wrapper_layouts
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report import speed_table

DEVICE = runtime.default_device()
CONVERT = CaseConfig(mode="convert", tokens=3, topk=256, counts=True, num_reqs=2, blocks_per_req=16, block_size=16)
DCP = CaseConfig(mode="dcp", tokens=3, topk=256, block_n=64, blocks_per_req=16, block_size=16, dcp_size=2, dcp_rank=1,
                 counts=True)

COLUMN_MAJOR = "out = out.t().contiguous().t()"  # every value right, strides (1, T)
STRIDED_COUNTS = "counts = torch.stack([counts, counts], 1)[:, 0] if counts is not None else None"  # stride (2,)


def _failures(verdict, check):
    return [m for m in verdict.failures if m.check is check]


# ------------------------------------------------------------------------------ layout


def test_a_column_major_out_with_right_values_fails_layout_naming_the_tensor_and_both_strides(broken_impl):
    bad = broken_impl(patch=COLUMN_MAJOR)
    v = run_case(CONVERT, "old", bad, device=DEVICE).verdict
    assert not v.passed and [m.impl for m in v.failures] == [bad]
    (m,) = _failures(v, Check.LAYOUT)
    assert m.line() == (
        f"[layout] {bad}: out comes back with strides (1, 3); A's layout (row-major contiguous, as the wrappers "
        f"allocate it) has strides (256, 1): a caller reading out through its data pointer with A's strides reads "
        f"other lanes")
    assert not _failures(v, Check.OUT)  # the values are right: only the layout fails


def test_the_layout_check_blames_a_when_a_is_the_side_that_breaks_it(broken_impl):
    bad = broken_impl(patch=COLUMN_MAJOR)
    v = run_case(DCP, bad, "new", device=DEVICE).verdict
    assert {m.impl for m in _failures(v, Check.LAYOUT)} == {bad} and not [m for m in v.failures if m.impl == "new"]


def test_strided_valid_counts_fail_layout_too(broken_impl):
    bad = broken_impl(patch=STRIDED_COUNTS)
    (m,) = _failures(run_case(CONVERT, "old", bad, device=DEVICE).verdict, Check.LAYOUT)
    assert "valid_counts comes back with strides (2,)" in m.message and "has strides (1,)" in m.message


def test_the_batch_engine_fails_the_layout_even_where_the_device_proves_the_values(broken_impl):
    bad = broken_impl(patch=COLUMN_MAJOR)
    configs = [CONVERT, DCP.replace(seed=3), CONVERT.replace(tokens=1)]
    outcomes = run_batch(configs, "old", bad, DEVICE)
    layout = [[m.impl for m in _failures(o.verdict, Check.LAYOUT)] for o in outcomes]
    # One token row: [1, K] is row-major whatever the stride of its single row says.
    assert layout == [[bad], [bad], []] and outcomes[2].verdict.passed


def test_the_real_kernels_return_as_laid_out_on_every_path():
    for config in (CONVERT, DCP, DCP.replace(compact=False), CONVERT.replace(counts=False, layout="token_cols")):
        v = run_case(config, "old", "new", device=DEVICE).verdict
        assert v.passed and not _failures(v, Check.LAYOUT), v.summary()


def test_the_expected_layout_is_data_a_caller_owned_buffer_states_its_own():
    x = torch.arange(12, dtype=torch.int32).view(3, 4)
    col = x.t().contiguous().t()
    assert wrapper_layouts(CONVERT)["out"] == Expected((3, 256), (256, 1))
    assert row_major((3, 4)) == (4, 1) and row_major((1, 5)) == (5, 1)
    # Against the wrappers' layout a column-major out fails; against a caller's column-major buffer it is right.
    assert [f.check for f in layout_findings(col, None, {"out": Expected((3, 4), (4, 1))}, "b")] == [Check.LAYOUT]
    given = {"out": caller_buffer("out", torch.empty_strided((3, 4), (1, 3), dtype=torch.int32))}
    assert layout_findings(col, None, given, "b") == []
    (f,) = layout_findings(x, None, given, "b")
    assert "strides (4, 1)" in f.message and "the caller's own out buffer" in f.message and "(1, 3)" in f.message
    # Another shape is the shape check's; an empty tensor has no layout.
    assert layout_findings(x[:2], None, {"out": Expected((3, 4), (4, 1))}, "b") == []
    assert layout_findings(x[:0], None, {"out": Expected((0, 4), (1, 0))}, "b") == []


def test_a_call_takes_the_expected_layout_as_data(broken_impl):
    from remap_ab.subjects.remap.judge import registry
    bad = registry.get(broken_impl(patch=COLUMN_MAJOR))
    x = generate_inputs(CONVERT, device=DEVICE)
    t, k = CONVERT.tokens, CONVERT.topk
    assert [f.check for f in call(bad, CONVERT, x).findings] == [Check.LAYOUT]
    columns = {"out": Expected((t, k), (1, t), "the caller's own out buffer"), "valid_counts": Expected((t,), (1,))}
    assert call(bad, CONVERT, x, layout=columns).findings == []


# ------------------------------------------------------------- sampling of the GPU checks


def _sampled(configs):
    batch.forget_checked_paths()
    try:
        return batch._production_sampled(configs)
    finally:
        batch.forget_checked_paths()


def test_every_batch_size_bucket_and_the_largest_batch_of_each_path_and_shape_are_sampled():
    sizes = [1, 3, 16, 130, 200, 256, 300, 511, 1024, 700]
    configs = [CONVERT.replace(tokens=t, seed=i) for i, t in enumerate(sizes)]
    chosen = [configs[i].tokens for i in _sampled(configs)]
    buckets = {speed.size_bucket(t) for t in sizes}
    assert {speed.size_bucket(t) for t in chosen} == buckets and 1024 in chosen
    assert len(chosen) == len(buckets)  # one per bucket: 200 shares 130's bucket, 300 and 511 256's
    # A later batch: a new largest is checked again, a smaller case of a seen bucket is not.
    batch.forget_checked_paths()
    first = batch._production_sampled(configs)
    later = [CONVERT.replace(tokens=t, seed=50 + i) for i, t in enumerate([900, 1500, 2])]
    again = [later[i].tokens for i in batch._production_sampled(later)]
    batch.forget_checked_paths()
    assert first and again == [1500]


def test_the_grids_sample_stands_for_every_path_shape_and_bucket_with_few_cases():
    from remap_ab.subjects.remap.grid import grid
    configs = [p.config for p in grid.load().points()]
    chosen = [configs[i] for i in _sampled(configs)]
    keys = set().union(*(batch._production_keys(c) for c in configs))
    assert set().union(*(batch._production_keys(c) for c in chosen)) == keys
    for path in {batch._path(c) for c in configs}:
        most = max(c.tokens for c in configs if batch._path(c) == path)
        assert any(batch._path(c) == path and c.tokens == most for c in chosen), path
    # A case stands for a shape and a bucket at once where it can: never more cases than keys of one kind.
    per_path = {}
    for key in keys:
        per_path.setdefault((key[0], len(key) == 3 and key[1] == "tokens"), set()).add(key)
    paths = {p for p, _ in per_path}
    assert len(chosen) <= sum(max(len(per_path.get((p, b), ())) for b in (True, False)) for p in paths)


def test_size_buckets_are_powers_of_two():
    assert [speed.size_bucket(t) for t in (1, 2, 3, 4, 255, 256, 511, 512)] == [1, 2, 2, 3, 8, 9, 9, 10]
    assert [speed.bucket_label(b) for b in (1, 2, 9)] == ["1", "2-3", "256-511"]


def test_on_the_cpu_no_gpu_call_check_is_claimed():
    if DEVICE == "cuda":
        pytest.skip("the CPU's claim")
    o = run_batch([CONVERT], "old", "new", DEVICE)[0]
    assert o.verdict.passed and not any("checked on the GPU" in i for i in o.verdict.info)


SYNC_ON_LARGE_DCP = '''
"""Reads the counts back to the host, only when a DCP batch has 256 rows or more."""
import kernels_new as k
from kernels_new import triton_convert_req_index_to_global_index  # noqa: F401


def triton_filter_and_convert_dcp_index(*a, **kw):
    r = k.triton_filter_and_convert_dcp_index(*a, **kw)
    counts = r[1] if isinstance(r, tuple) else None
    if counts is not None and counts.shape[0] >= 256:
        assert int(counts.max()) >= 0
    return r
'''

STREAM_ON_LARGE = '''
"""Launches on a stream of its own, without making the caller's stream wait, from 256 rows on."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(req_id, *a, **kw):
    if req_id.shape[0] < 256:
        return k.triton_convert_req_index_to_global_index(req_id, *a, **kw)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return k.triton_convert_req_index_to_global_index(req_id, *a, **kw)
'''


@pytest.mark.gpu
def test_a_sync_only_large_dcp_batches_make_fails_every_such_case_in_the_default_sweep(broken_impl):
    bad = broken_impl(SYNC_ON_LARGE_DCP)
    configs = [DCP.replace(tokens=t, topk=128, block_n=128, seed=i) for i, t in enumerate([3, 16, 128, 256, 512, 512])]
    batch.forget_checked_paths()
    outcomes = run_batch(configs, "old", bad, "cuda")  # call_checks="sample", the default
    failed = [o.config.tokens for o in outcomes if _failures(o.verdict, Check.SYNC)]
    assert failed == [256, 512, 512] and all(o.verdict.passed for o in outcomes if o.config.tokens < 256)


@pytest.mark.gpu
def test_the_stream_check_reaches_the_largest_batches_of_a_sampled_sweep(broken_impl):
    bad = broken_impl(STREAM_ON_LARGE)
    configs = [CONVERT.replace(tokens=t, topk=2048, blocks_per_req=256, seed=i) for i, t in enumerate([1, 3, 64, 1024])]
    batch.forget_checked_paths()
    outcomes = run_batch(configs, "old", bad, "cuda")
    assert [o.config.tokens for o in outcomes if _failures(o.verdict, Check.STREAM)] == [1024]


@pytest.mark.gpu
def test_every_gpu_call_is_sync_checked_and_the_verdict_says_so():
    batch.forget_checked_paths()
    configs = [CONVERT.replace(seed=i) for i in range(3)]
    outcomes = run_batch(configs, "old", "new", "cuda")
    assert all(o.verdict.passed for o in outcomes)
    said = [next(i for i in o.verdict.info if i.startswith("checked on the GPU")) for o in outcomes]
    assert said[0].startswith("checked on the GPU as vLLM calls it: graph, stream, sync")
    assert all(s.startswith("checked on the GPU as vLLM calls it: sync (") for s in said[1:])


# --------------------------------------------------------------------- speed, the sweep


def _records(pairs, path="convert-counts"):
    return [{"case_id": f"c{i}", "path": path, "a_ms": a, "b_ms": b} for i, (a, b) in enumerate(pairs)]


def test_the_sweeps_speed_ratio_is_the_median_per_path_k_and_bucket_and_says_it_is_indicative():
    configs = {f"c{i}": CONVERT.replace(tokens=t, seed=i) for i, t in enumerate([1, 1, 1, 300, 400])}
    rows = speed_table.speed_rows(_records([(1.0, 2.0), (1.0, 3.0), (2.0, 2.0), (1.0, 0.5), ("", 1.0)]), configs)
    assert [(r["tokens"], r["cases"], r["b_over_a"]) for r in rows] == [("1", 3, 2.0), ("256-511", 1, 0.5)]
    lines = speed_table.speed_lines(rows, "cuda", "old", "new")
    assert "indicative only, never a verdict" in lines[0]
    assert lines[1].split() == ["convert-counts", "K=256", "T", "1", "2.00x", "(3),", "T", "256-511", "0.50x", "(1)"]
    assert speed_table.speed_lines(rows, "cpu") == ["  " + speed.NOT_ON_CPU]
    assert "not judged on the CPU" in speed.NOT_ON_CPU


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_run_folders_summary_gives_the_ratio_on_a_gpu_and_says_speed_is_not_judged_on_the_cpu(tmp_path, device):
    import pandas as pd

    from remap_ab.subjects.remap.grid import grid
    from remap_ab.subjects.remap.subject import COLUMNS
    from remap_ab.sweep.run_folder import result_columns, write_run_json
    from remap_ab.sweep.summary import format_summary, summarise

    g = grid.load()
    pts = g.select(grid.parse_filters(g, ["tokens=1,512", "k=512", "oor=off", "invalid=0,0.3", "path=convert-counts"]))
    write_run_json(tmp_path, {"run": "x", "a": "old", "b": "new", "device": device, "filters": [], "max_tokens": None,
                              "selected": len(pts)})
    rows = [{"index": p.index, "case_id": p.case_id, **dict(p.labels), **{f: "" for f in COLUMNS},
             "status": "pass", "a_ms": 0.01, "b_ms": 0.005 if p.config.tokens == 1 else 0.02} for p in pts]
    pd.DataFrame(rows, columns=result_columns([a.name for a in g.axes], COLUMNS)).to_csv(tmp_path / "results.csv", index=False)
    s = summarise(tmp_path, g)
    text = format_summary(s)
    if device == "cpu":
        assert s["speed"] == [] and speed.NOT_ON_CPU in text
    else:
        assert [(r["tokens"], r["cases"], r["b_over_a"]) for r in s["speed"]] == [("1", 2, 0.5), ("512-1023", 2, 2.0)]
        assert "convert-counts K=512  T 1 0.50x (2), T 512-1023 2.00x (2)" in text and "indicative only" in text
    assert s["passed"]  # speed fails nothing


# -------------------------------------------------------------------- speed, the gate


def _noisy(median, spread, n=20, seed=0):
    rng = random.Random(seed)
    return [median * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_the_gate_fails_a_slow_b():
    j = speed.judge_speed(_noisy(10.0, 0.02), _noisy(13.0, 0.02, seed=1))
    assert j.judged and j.slower and 1.25 < j.low <= j.ratio <= j.high < 1.35
    assert "SLOWER" in j.line("old", "new") and j.line("old", "new").startswith(f"new/old {j.ratio:.3f}x (95 % CI {j.low:.3f}-")


def test_the_gate_passes_equal_timings_and_a_faster_b():
    assert not speed.judge_speed(_noisy(10.0, 0.02), _noisy(10.0, 0.02, seed=1)).slower
    j = speed.judge_speed(_noisy(10.0, 0.02), _noisy(4.0, 0.02, seed=1))
    assert j.judged and not j.slower and j.high < 0.45 and ": ok" in j.line()


def test_the_gate_passes_a_noisy_overlap_whose_point_estimate_is_past_the_margin():
    spread = [0.6 + 0.8 * i / 19 for i in range(20)]  # ±40 % around the median, evenly
    a, b = [10.0 * x for x in spread], [11.5 * x for x in reversed(spread)]  # medians 15 % apart
    j = speed.judge_speed(a, b)
    assert j.ratio == pytest.approx(1.15) and j.low < 1.05 < j.ratio < j.high and not j.slower


def test_the_gate_allows_a_real_slowdown_below_the_margin_and_fails_one_past_it():
    a = _noisy(10.0, 0.005)
    assert not speed.judge_speed(a, _noisy(10.3, 0.005, seed=1)).slower  # 3 %, under 5 %
    assert speed.judge_speed(a, _noisy(10.3, 0.005, seed=1), fail_slower=0.01).slower
    assert speed.judge_speed(a, _noisy(10.8, 0.005, seed=1)).slower  # 8 %


def test_the_gate_is_deterministic_and_does_not_judge_too_few_repeats():
    a, b = _noisy(10.0, 0.1), _noisy(12.0, 0.1, seed=1)
    assert speed.judge_speed(a, b) == speed.judge_speed(a, b)
    j = speed.judge_speed(a[:3], b)
    assert not j.judged and not j.slower and "too few repeats (A has 3; at least 5 each)" in j.line()
    assert not speed.judge_speed(a, [0.0] * 20).judged


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.1", 0.1), ("0%", 0.0), ("off", None), (" 12.5% ", 0.125)])
def test_fail_slower_parses_a_percentage_or_a_fraction(text, value):
    assert speed.parse_fail_slower(text) == pytest.approx(value) if value is not None else \
        speed.parse_fail_slower(text) is None


@pytest.mark.parametrize("text", ["five", "-5%", "nan", "", "1000%"])
def test_a_bad_fail_slower_is_a_one_line_usage_error(text):
    with pytest.raises(UsageError, match="--fail-slower"):
        speed.parse_fail_slower(text)


@pytest.mark.skipif(DEVICE == "cuda", reason="the pr section on the interpreter with the graph timing replaced")
def test_the_bench_pr_section_names_the_cells_the_gate_fails(tmp_path, monkeypatch):
    from remap_ab.bench import figures, measure
    from remap_ab.bench.timing import Timing
    from remap_ab.subjects.remap.parts.bench.suite import Suite, SuiteOptions

    cell = {}

    def capture(fn, calls, warmup=3):  # run once, eagerly; remember the cell's K
        result = fn()
        if isinstance(result, tuple):
            cell["k"] = result[0].shape[1]
        return object(), result

    def time_graphs(graphs, repeats):  # B twice A's time in the K = 512 cell only
        def us(which, name):
            slow = 2.0 if name == "b" and which == "warm" and cell["k"] == 512 else 1.0
            return (0.1 if which == "floor" else 1.0) * slow
        return {key: Timing(_noisy(us(*key), 0.01, n=repeats, seed=i)) for i, key in enumerate(graphs)}

    monkeypatch.setattr(measure, "capture", capture)
    monkeypatch.setattr(measure, "time_graphs", time_graphs)
    monkeypatch.setattr(measure, "floor_fn", lambda grid, warps: (lambda: None))
    monkeypatch.setattr(figures, "grouped_bars", lambda *a, **k: None)  # no chart: seconds of matplotlib
    runtime.select("cpu")
    opts = SuiteOptions(sections=["pr"], device="cuda", timing_device="cpu", calls=1, repeats=8, pr_topk=(256, 512),
                        pr_tokens=(1,), pr_paths=("counts",))
    suite = Suite(opts, tmp_path, {"device": "fake"}, say=lambda line: None)
    (section,) = suite.run()
    rows = {r["topk"]: r for r in section.tables[0].rows}
    assert rows[256]["speed_gate"] == "ok" and rows[512]["speed_gate"] == "SLOWER"
    assert len(suite.slower_cells) == 1 and suite.slower_cells[0].startswith("counts K=512 T=1: new/old 2.0")
    assert any(f.startswith("SLOWER counts K=512 T=1") for f in section.findings)
    assert any("1 of 2 judged cells fail" in f for f in section.findings)
