"""vLLM main's optional parameters (issue 32): BLOCK_STRIDE_ROWS and caller-owned
out= / valid_counts_out= as data (remap_ab/subjects/remap/judge/features.py), the grids that exercise them,
and the bugs they must catch, each planted in a main-style module (kernels_main) and
shown caught: a stride ignored by one wrapper, rows past 1024 left unconverted, a
valid_counts_out not zeroed where the tiled path accumulates."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from remap_ab import runtime
from remap_ab.errors import ConfigError
from remap_ab.status import Check
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.grid import grid
from remap_ab.subjects.remap.judge import features, oracle, registry
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.judge.call import call
from remap_ab.subjects.remap.judge.out_layout import CallerBuffers
from remap_ab.subjects.remap.judge.registry import get
from remap_ab.subjects.remap.judge.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
EDGE = 2147483  # the callers grid's stride whose base * stride crosses INT32_MAX

_SIGNATURES = '''
import torch
import kernels_main as _m
from kernels_main import _remap_tiling

def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, BLOCK_SIZE=64,
        BLOCK_STRIDE_ROWS=None, NUM_TOPK_TOKENS=2048, BLOCK_N=128, HAS_PREFILL_WORKSPACE=False,
        prefill_workspace_request_ids=None, prefill_workspace_starts=None, return_valid_counts=False,
        out=None, valid_counts_out=None):
    kw = dict(BLOCK_SIZE=BLOCK_SIZE, BLOCK_STRIDE_ROWS=CONVERT_STRIDE(BLOCK_STRIDE_ROWS),
              NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N, HAS_PREFILL_WORKSPACE=HAS_PREFILL_WORKSPACE,
              prefill_workspace_request_ids=prefill_workspace_request_ids,
              prefill_workspace_starts=prefill_workspace_starts, return_valid_counts=return_valid_counts)
    return CONVERT(req_id, block_table, token_indices, kw, out, valid_counts_out)

def triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, dcp_size, dcp_rank,
        cp_kv_cache_interleave_size=1, BLOCK_SIZE=64, BLOCK_STRIDE_ROWS=None, NUM_TOPK_TOKENS=2048, BLOCK_N=128,
        return_valid_counts=False, compact_valid_to_front=True):
    return _m.triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, dcp_size, dcp_rank,
        cp_kv_cache_interleave_size, BLOCK_SIZE=BLOCK_SIZE, BLOCK_STRIDE_ROWS=DCP_STRIDE(BLOCK_STRIDE_ROWS),
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N, return_valid_counts=return_valid_counts,
        compact_valid_to_front=compact_valid_to_front)

def _plain(req_id, block_table, token_indices, kw, out, valid_counts_out):
    return _m.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, out=out,
                                                       valid_counts_out=valid_counts_out, **kw)

def _keep(stride):
    return stride

def _drop(stride):
    return None
'''

# (a) the stride ignored by the convert wrapper, or by the DCP wrapper.
IGNORES_STRIDE_CONVERT = _SIGNATURES + "CONVERT, CONVERT_STRIDE, DCP_STRIDE = _plain, _drop, _keep\n"
IGNORES_STRIDE_DCP = _SIGNATURES + "CONVERT, CONVERT_STRIDE, DCP_STRIDE = _plain, _keep, _drop\n"
# (b) the convert wrapper's grid stops at 1024 rows: later rows keep what the buffer held.
FIRST_1024_ROWS = _SIGNATURES + '''
def _capped(req_id, block_table, token_indices, kw, out, valid_counts_out):
    rows = token_indices.shape[0]
    if rows <= 1024:
        return _plain(req_id, block_table, token_indices, kw, out, valid_counts_out)
    out = torch.empty_like(token_indices) if out is None else out
    counts = valid_counts_out
    if counts is None and kw["return_valid_counts"]:
        counts = torch.zeros(rows, dtype=torch.int32, device=token_indices.device)
    _plain(req_id[:1024], block_table, token_indices[:1024], kw, out[:1024],
           None if counts is None else counts[:1024])
    return (out, counts) if kw["return_valid_counts"] else out

CONVERT, CONVERT_STRIDE, DCP_STRIDE = _capped, _keep, _keep
'''


def _not_zeroing_source() -> str:
    """kernels_main with the tiled path's zeroing of valid_counts_out taken out (c)."""
    text = (ROOT / "kernels_main" / "_remap.py").read_text()
    line = "        if not single_tile:\n            given.zero_()\n"
    assert line in text, "kernels_main's zeroing line moved: update this variant"
    return text.replace(line, "")


def _sweep(tmp_path, b: str, grid_name: str, filters: list, max_tokens=None, a: str = "old") -> dict:
    from remap_ab.sweep.run import Sweep, SweepOptions

    sweep = Sweep(SweepOptions(a=a, b=b, device=runtime.current(), filters=tuple(filters), max_size=max_tokens, workers=0,
                               root=str(tmp_path), grid_file=grid_name, progress=False))
    sweep.prepare()
    return sweep.run()


# ----------------------------------------------------------------- features as data


def test_the_plan_follows_the_signatures(broken_impl):
    only_b = registry.feature_plan("old", "main")
    cv, dcp = features.CONVERT, features.DCP
    # main (kernels_main): the stride on both wrappers, the buffers on convert only (judged per wrapper)
    assert only_b.a_accepts == () and set(only_b.b_accepts) == {
        ("BLOCK_STRIDE_ROWS", cv), ("BLOCK_STRIDE_ROWS", dcp), ("out", cv), ("valid_counts_out", cv)}
    stride = CaseConfig(mode="convert", tokens=2, block_stride=4096)
    assert only_b.runs(stride) == (False, True) and only_b.runs(CaseConfig(tokens=2)) == (True, True)
    assert registry.feature_plan("main", "main").runs(stride) == (True, True)
    assert not registry.feature_plan("old", "new").runnable(stride)
    lines = features.lines(only_b, [stride, CaseConfig(tokens=2)])
    assert lines[0] == ("feature BLOCK_STRIDE_ROWS on convert, B only: 1 call judged against the oracle (A, old, "
                        "lacks it on convert)")
    assert lines[1] == "feature BLOCK_STRIDE_ROWS on dcp, B takes it: no call passes it, not exercised"
    assert features.lines(registry.feature_plan("main", "main"), [stride])[0] == (
        "feature BLOCK_STRIDE_ROWS on convert, A and B: 1 call, A vs B vs the oracle")
    assert features.lines(registry.feature_plan("old", "new"), [stride])[0] == (
        "feature BLOCK_STRIDE_ROWS on convert, neither A's nor B's convert wrapper takes it: 1 call not run")
    # A run.json of before per-wrapper plans (bare names) reads as taken on every wrapper.
    legacy = {"a": "old", "b": "main", "a_accepts": [], "b_accepts": ["BLOCK_STRIDE_ROWS"], "unknown": []}
    assert features.lines(legacy, [stride])[0] == lines[0]


def test_an_unknown_new_parameter_is_named_not_exercised(broken_impl):
    later = broken_impl(_SIGNATURES.replace("out=None, valid_counts_out=None):",
                                            "out=None, valid_counts_out=None, FUSED_WITNESS=False):")
                        + "CONVERT, CONVERT_STRIDE, DCP_STRIDE = _plain, _keep, _keep\n")
    lines = features.lines(registry.feature_plan("new", later), [])
    assert lines[-1].startswith("not exercised: FUSED_WITNESS on convert (B's triton_convert_req_index_to_global_index "
                                "takes it")


def test_a_case_neither_side_takes_is_refused_not_passed():
    with pytest.raises(ConfigError, match="neither old's nor new's convert wrapper takes BLOCK_STRIDE_ROWS"):
        run_case(CaseConfig(mode="convert", tokens=1, topk=128, block_stride=4096), "old", "new")


def test_the_oracle_wraps_base_times_stride_in_int32():
    table = torch.tensor([[1000, 1001, 1023]], dtype=torch.int32)
    tokens = torch.tensor([[5, 64 + 6, 128 + 7]], dtype=torch.int32)
    got = oracle.triton_convert_req_index_to_global_index(torch.zeros(1, dtype=torch.int32), table, tokens,
                                                          BLOCK_SIZE=64, BLOCK_STRIDE_ROWS=EDGE, NUM_TOPK_TOKENS=3,
                                                          BLOCK_N=1)
    want = [((b * EDGE + o + 2**31) % 2**32) - 2**31 for b, o in ((1000, 5), (1001, 6), (1023, 7))]
    assert got.tolist() == [want] and want[0] > 0 > want[1]
    assert oracle.triton_convert_req_index_to_global_index(
        torch.zeros(1, dtype=torch.int32), table, tokens, BLOCK_SIZE=64, NUM_TOPK_TOKENS=3, BLOCK_N=1).tolist() == [
        [1000 * 64 + 5, 1001 * 64 + 6, 1023 * 64 + 7]]


def test_main_agrees_with_the_oracle_at_every_stride_of_the_grid():
    for stride, block in ((64, 64), (4096, 64), (320, 256), (12, 4), (EDGE, 64)):
        for c in (CaseConfig(mode="convert", tokens=3, topk=256, block_size=block, blocks_per_req=8, num_reqs=3,
                             block_stride=stride, counts=True, table="persistent"),
                  CaseConfig(mode="dcp", tokens=3, topk=384, block_size=block, blocks_per_req=8, dcp_size=2,
                             dcp_rank=1, block_stride=stride, counts=True)):
            v = run_case(c, "main", "main").verdict
            assert v.passed, (stride, v.first_line())


# ----------------------------------------------------------------- caller-owned buffers


def test_buffers_are_handed_poisoned_and_the_returned_tensors_checked(broken_impl):
    c = CaseConfig(mode="convert", tokens=3, topk=384, counts=True, out_buffers=True, block_stride=4096)
    buffers = CallerBuffers(c, torch.device("cpu"))
    assert bool((buffers.out == -123_456_789).all()) and int(buffers.counts.abs().sum()) > 0
    assert run_case(c, "main", "main").verdict.passed
    fresh = broken_impl(_SIGNATURES + '''
def _copy(req_id, block_table, token_indices, kw, out, valid_counts_out):
    got = _plain(req_id, block_table, token_indices, kw, out, valid_counts_out)
    return tuple(t.clone() for t in got) if isinstance(got, tuple) else got.clone()

CONVERT, CONVERT_STRIDE, DCP_STRIDE = _copy, _keep, _keep
''')
    o = call(get(fresh), c, generate_inputs(c, runtime.current()))
    assert [f.check for f in o.findings] == [Check.BUFFERS, Check.BUFFERS]
    assert "returned out that is not the caller's buffer" in o.findings[0].message
    outside = broken_impl(_SIGNATURES + '''
def _spill(req_id, block_table, token_indices, kw, out, valid_counts_out):
    got = _plain(req_id, block_table, token_indices, kw, out, valid_counts_out)
    torch.as_strided(out, (out.numel() + 1,), (1,))[-1] = 7
    return got

CONVERT, CONVERT_STRIDE, DCP_STRIDE = _spill, _keep, _keep
''')
    v = run_case(c, "main", outside).verdict
    assert not v.passed and any(m.check is Check.BUFFERS and "outside the caller's out buffer" in m.message
                                for m in v.failures)


def test_c_valid_counts_out_not_zeroed_on_the_tiled_path_is_caught(broken_impl):
    stale = broken_impl(_not_zeroing_source())
    tiled = CaseConfig(mode="convert", tokens=4, topk=384, counts=True, out_buffers=True)  # 384: tiled
    v = run_case(tiled, "main", stale).verdict
    assert not v.passed and v.failures[0].check is Check.COUNTS, v.first_line()
    # The single tile stores its counts: the missing zeroing cannot show there.
    assert run_case(tiled.replace(topk=512), "main", stale).verdict.passed
    # And the callers grid's index-group call at K = 2176 (tiled) catches it, judged against the oracle.
    points = [p for p in grid.load("callers").points()
              if p.label("call") == "index-group-A-b64-k2176-s64-out" and p.label("batch") == "decode-8"]
    outcomes = run_batch([p.config for p in points], "old", stale, runtime.current())
    assert outcomes and not outcomes[0].verdict.passed
    assert outcomes[0].verdict.first_line().startswith("index group, pattern A, block 64, BLOCK_STRIDE_ROWS 64, "
                                                       "caller-owned out: [counts]")


# ----------------------------------------------------------------- the variants, caught by the grids


@pytest.mark.parametrize("variant, wrapper", [(IGNORES_STRIDE_CONVERT, "convert"), (IGNORES_STRIDE_DCP, "dcp")])
def test_a_stride_ignored_by_one_wrapper_is_caught_by_the_callers_sweep(broken_impl, tmp_path, variant, wrapper):
    b = broken_impl(variant)
    # The default callers sweep (A old) on a few of its calls (the whole sweep catches it too: see the
    # closing report of issue 32): calls with and without a stride, on each wrapper.
    calls = ["fa3-A-b64", "xpu-C-b4-s12", "flashmla-bf16-A-b64-s4096", "flashmla-bf16-E-b64-dcp2r0-i1-s4096",
             "flashinfer-sm100-D-b32-dcp4r1-i8", "flashinfer-sm100-D-b64-dcp2r1-i32-s4096"]
    s = _sweep(tmp_path, b, "callers", ["batch=decode-8", "call=" + ",".join(calls)])
    assert not s["passed"]
    assert f"  feature BLOCK_STRIDE_ROWS on {wrapper}, B only" in "\n".join("  " + line for line in s["features"])
    assert any(line.startswith(f"feature BLOCK_STRIDE_ROWS on {wrapper}: ") and line.endswith("passing it failed")
               for line in s["features"]), s["features"]
    first = s["failures"][0]["first_mismatch"]
    assert "BLOCK_STRIDE_ROWS" in first, first
    failed = {f["case_id"] for f in s["failures"]}
    by_id = {p.case_id: p.config for p in grid.load("callers").points()}
    bad = [by_id[i] for i in failed if i in by_id]
    # Exactly the calls whose stride is not the block size, on the wrapper that ignores it.
    assert bad and all(c.block_stride not in (0, c.block_size) for c in bad)
    assert {c.mode for c in bad} == {wrapper}


def test_b_rows_past_1024_left_unconverted_are_caught_by_callers_and_models(broken_impl, tmp_path):
    b = broken_impl(FIRST_1024_ROWS)
    s = _sweep(tmp_path / "callers", b, "callers", ["batch=prefill-2048", "call=flashmla-bf16-A-b64-s64"])
    assert not s["passed"] and s["counts"]["fail"] == 1
    # The verdict names the first row the variant left alone.
    assert all(" row 1024" in f["first_mismatch"] for f in s["failures"]), s["failures"]
    m = _sweep(tmp_path / "models", b, "models", ["tokens=2048", "k=1024/128", "path=convert-counts"],
               max_tokens=2048)
    assert not m["passed"] and m["counts"]["fail"] == 1
    # Below 1024 rows the variant is main itself.
    assert _sweep(tmp_path / "decode", b, "callers", ["batch=decode-8", "call=fa3-A-b64"])["passed"]


def test_the_grids_hold_main_s_calls_and_the_pr_grid_stays():
    assert len(grid.load("pr").points()) == 1728
    assert max(p.config.tokens for p in grid.load("pr").points()) == 1024
    callers = [p.config for p in grid.load("callers").points()]
    assert {c.tokens for c in callers} >= {2048, 8192, 16384}
    strides = {(c.block_stride, c.block_size) for c in callers}
    assert {(4096, 64), (320, 256), (12, 4), (64, 64), (EDGE, 64)} <= strides
    assert {c.mode for c in callers if c.block_stride} == {"convert", "dcp"}
    assert any(c.out_buffers and c.counts and not c.topk_is_pow2 for c in callers)  # the tiled path's zeroing
    assert any(c.backend == "hisparse" and c.block_n == c.topk and c.topk % 128 for c in callers)
    models = [p.config for p in grid.load("models").points()]
    assert {c.tokens for c in models} >= {2048, 8192, 16384}
    own = [p.config for p in grid.load("models").points() if p.label(grid.ENVELOPE_AXIS) == "-"]
    assert len([c for c in own if c.tokens <= 1024]) == 3888  # and the call envelope's points (test_envelope.py)


def test_old_against_new_skips_what_neither_takes_and_says_so(tmp_path):
    s = _sweep(tmp_path, "new", "callers", ["batch=decode-1", "call=fa3-A-b64,flashmla-bf16-A-b64-s4096"])
    assert s["passed"] and s["cases"] - s["rejections"]["calls"] == 1
    assert s["features"][0] == ("feature BLOCK_STRIDE_ROWS on convert, neither A's nor B's convert wrapper takes it: "
                                "1 call not run")


@pytest.mark.gpu
def test_a_graph_replayed_on_the_same_buffers_is_right(broken_impl):
    from remap_ab.subjects.remap.judge.call import _graph_check

    for topk in (384, 2048):  # tiled (zeroed by the wrapper) and single tile
        c = CaseConfig(mode="convert", tokens=8, topk=topk, counts=True, out_buffers=True, block_stride=4096)
        x = generate_inputs(c, "cuda")
        assert _graph_check(get("main"), c, x, True) == []


def test_the_soak_draws_prefill_steps_rarely_on_the_cpu():
    from remap_ab.subjects.remap.parts import soak

    assert 0 < soak.CPU_PREFILL_SHARE < soak.GPU_PREFILL_SHARE
    always = [d.config.tokens for d, _ in zip(soak.draws(1, 0, 16, prefill_share=1.0), range(20))]
    assert set(always) <= set(soak.prefill_steps()) and len(set(always)) > 1
    never = [d.config.tokens for d, _ in zip(soak.draws(1, 0, 16), range(200))]
    assert max(never) <= 16
