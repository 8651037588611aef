"""The attention backends' calls (issue 24): the callers grid is exactly their calls,
the inputs are built as the backends build them, each backend's view of the outputs
is checked, and a bug only one backend's calls reach is caught and named by it."""

import dataclasses

import pytest
import torch

from remap_ab import runtime
from remap_ab.errors import ConfigError
from remap_ab.status import Status
from remap_ab.subjects.remap.case import backend_views
from remap_ab.subjects.remap.case.backend_views import backend_views as views_of
from remap_ab.subjects.remap.case.checks import RemapCheck
from remap_ab.subjects.remap.case.config import BACKEND_CALLS, BACKEND_NAMES, CaseConfig, caller_width
from remap_ab.subjects.remap.case.inputs import generate_inputs, generate_inputs_batch
from remap_ab.subjects.remap.grid import grid
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.judge.compare import compare
from remap_ab.subjects.remap.judge.runner import run_case

CALLERS = "callers"  # remap_ab/subjects/remap/grid/grids/callers.toml, by its --grid NAME


@pytest.fixture(scope="module")
def points():
    # The backends' calls (not the points added for the call envelope's other values:
    # tests/test_envelope.py).
    return [p for p in grid.load(CALLERS).points() if p.label(grid.ENVELOPE_AXIS) == "-"
            and p.label("batch") != "pairwise"]  # the envelope's pairs: tests/test_pairwise.py


def test_the_callers_grid_is_every_backend_call(points):
    assert len(points) == 680 and len({p.case_id for p in points}) == 680
    configs = [p.config for p in points]
    assert all(c.backend != "none" and c.caller for c in configs)
    # Every backend in every pattern it makes, at exactly its block sizes (XPU: any; 4 to 256 here, with its
    # strides; HiSparse and the index group: 64).
    seen = {(c.backend, c.pattern) for c in configs}
    assert seen == {(b, p) for b, (patterns, _) in BACKEND_CALLS.items() for p in patterns}
    for b, (_, sizes) in BACKEND_CALLS.items():
        got = {c.block_size for c in configs if c.backend == b}
        assert got == (set(sizes) if sizes else {4, 16, 64, 128, 256} if b == "xpu" else {64}), b
    # No caller but HiSparse passes BLOCK_N (top_k when not a multiple of 128); NUM_TOPK_TOKENS is 2048
    # (HiSparse's 64, the index group's GLM width 2176), the DCP indexer's 512/1024/2048 under DCP.
    assert {c.block_n for c in configs} == {64, 128}
    assert {c.backend for c in configs if c.block_n != 128} == {"hisparse"}
    assert {c.topk for c in configs if c.pattern not in ("D", "E")} == {64, 2048, 2176}
    assert {c.topk for c in configs if c.pattern in ("D", "E")} == {512, 1024, 2048}
    # D: sizes 2, 4, 8 with every rank and interleaves {1, 8, 32, block size}, at both block sizes.
    d = {(c.block_size, c.dcp_size, c.dcp_rank, c.interleave) for c in configs if c.pattern == "D"}
    want = {(b, s, r, i) for b in (32, 64) for s in (2, 4, 8) for r in range(s) for i in {1, 8, 32, b}}
    assert d == want
    # The persistent table at the width the backends allocate (max_model_len 4000).
    assert all(c.table == "persistent" and c.blocks_per_req == caller_width(4000, c.block_size) for c in configs)
    # Graph padding and speculative runs, with and without each other; B's prefill starts rebased.
    assert {(c.graph_padding > 0, c.tokens_per_req > 1) for c in configs} == {(a, b) for a in (0, 1) for b in (0, 1)}
    assert {c.prefill_chunk for c in configs if c.pattern == "B"} == {1, 2}


def test_caller_width_rounds_up_to_128_tokens_of_blocks():
    assert [caller_width(4000, b) for b in (16, 32, 64, 128, 256)] == [256, 128, 64, 32, 16]
    assert caller_width(100, 64) == 2 and caller_width(129, 64) == 4 and caller_width(1, 1) == 128


def test_inputs_are_built_as_the_backends_build_them():
    c = CaseConfig(mode="convert", counts=True, tokens=12, topk=128, num_reqs=6, graph_padding=4, tokens_per_req=2,
                   prefill_fraction=0.5, prefill_chunk=2, table="persistent", blocks_per_req=4, negatives="any",
                   backend="flashmla-fp8")
    x = generate_inputs(c)
    # Runs of 2 rows per request; the 4 graph-padding rows read request 0 with every index -1.
    assert x.req_id.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0]
    assert bool((x.token_indices[8:] == -1).all()) and not bool((x.token_indices[:8] == -1).all())
    # Decode requests first, the last half prefill (numbered from 0), -1 for decode and padding rows.
    assert x.prefill_request_ids.tolist() == [-1, -1, -1, -1, 0, 0, 1, 1, -1, -1, -1, -1]
    # Starts rebased to 0 every 2 prefill requests.
    s = x.prefill_starts.tolist()
    assert s[0] == 0 and s[2] == 0 and s[4] == 0 and s[1] > 0 and s[3] > 0
    # The persistent table: each real request's used blocks, then 0; padded requests all 0.
    table = x.block_table.tolist()
    for row in table[:4]:
        used = next((i for i, v in enumerate(row) if v == 0), len(row))
        assert used >= 1 and all(v == 0 for v in row[used:])
    assert table[4] == [0] * 4 and table[5] == [0] * 4
    # The same bytes in a batch of other cases, and one case per call.
    y = generate_inputs_batch([CaseConfig(), c, CaseConfig(mode="convert", prefill_fraction=0.5)])[1]
    assert all(torch.equal(t, x.tensors()[n]) for n, t in y.tensors().items())


def test_the_persistent_layout_is_the_backends_buffers():
    from remap_ab.subjects.remap.case.inputs import in_layout as apply

    c = CaseConfig(mode="convert", tokens=3, topk=128, num_reqs=2, blocks_per_req=4, layout="persistent")
    x = generate_inputs(c)
    y = apply("persistent", x)
    assert all(torch.equal(y.tensors()[n], t) for n, t in x.tensors().items())  # the same values
    # Each a view of the first rows of a larger buffer: what lies past it is what the caller's buffer holds.
    def past(t):
        whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (t.untyped_storage().nbytes() // 4,), (1,))
        return whole[t.storage_offset() + t.numel():]
    assert past(y.token_indices).numel() == 16 * 128 and bool((past(y.token_indices) == -1).all())
    assert past(y.req_id).numel() == 16 and bool((past(y.req_id) == 0).all())
    assert past(y.block_table).numel() == 16 * 4
    assert y.block_table.stride() == (4, 1) and y.token_indices.is_contiguous()


def test_a_backend_refuses_a_call_it_does_not_make():
    with pytest.raises(ConfigError, match="makes only call pattern"):
        CaseConfig(mode="dcp", backend="fa3")
    with pytest.raises(ConfigError, match="uses block sizes 64, 256, not 32"):
        CaseConfig(mode="convert", counts=False, backend="flashinfer-sm120", block_size=32)
    with pytest.raises(ConfigError, match="raise num_reqs"):
        CaseConfig(mode="convert", tokens=8, num_reqs=2, tokens_per_req=2)


def test_new_fields_at_their_defaults_keep_every_case_id():
    c = CaseConfig(mode="convert", tokens=3)
    assert c.case_id == c.replace(backend="none", graph_padding=0, tokens_per_req=0, prefill_chunk=0).case_id
    assert c.case_id != c.replace(backend="fa3").case_id != c.replace(graph_padding=1).case_id


# ----------------------------------------------------------------------------- views

_D = CaseConfig(mode="dcp", counts=True, compact=True, dcp_size=2, dcp_rank=1, tokens=3, topk=512,
                backend="flashinfer-sm100", block_size=32, blocks_per_req=128, table="persistent")


needs_interpreter = pytest.mark.skipif(runtime.current() != "cpu", reason="program schedules need the Triton interpreter")


@needs_interpreter
def test_the_racy_compaction_order_is_invisible_to_flashinfer_sm100():
    # Under tiles_reversed the old kernel's compacted prefix comes out in another order
    # than new's: the wrapper contract allows it and SM100 reads a set, so the same view.
    from remap_ab.interpreter.schedule import interpreter_schedule

    r = run_case(_D, "old", "new", schedule=lambda: interpreter_schedule("tiles_reversed", 0))
    assert r.verdict.passed and r.verdict.order_differs, r.verdict.describe()
    assert r.verdict.backend_view == "same"


@needs_interpreter
def test_an_order_sensitive_reader_of_that_output_fails_naming_the_backend(monkeypatch):
    # The same outputs read in order: the check must fail, say the wrapper allowed it,
    # and name the backend — the path a backend that read order would take.
    from remap_ab.interpreter.schedule import interpreter_schedule

    ordered = dataclasses.replace(backend_views.MODELS["flashinfer-sm100"], ordered=True)
    monkeypatch.setitem(backend_views.MODELS, "flashinfer-sm100", ordered)
    r = run_case(_D, "old", "new", schedule=lambda: interpreter_schedule("tiles_reversed", 0))
    v = r.verdict
    assert v.status is Status.FAIL and v.backend_view == "differs"
    assert [m.check for m in v.failures] == [RemapCheck.BACKEND_VIEW]
    line = v.first_line()
    assert line.startswith("FlashInfer SM100, DCP 2, rank 1, interleave 1, pattern D, block 32: [backend_view]")
    assert "the wrapper-level contract allows" in line


def _info_but_the_gpu_call_checks(v) -> list:
    """The verdict's info less the line a GPU run adds for its production call checks
    (call.py: graph, stream, sync), which is no hazard; on the CPU that is all of it."""
    return [i for i in v.info if not i.startswith("checked on the GPU as vLLM calls it: ")]


def test_caller_hazards_are_info_counted_and_never_fail():
    # FA3 reads the first `count` entries: with -1 scattered through an in-place row it
    # reads -1 there and misses valid lanes past the count, for old and new alike.
    scattered = CaseConfig(mode="convert", counts=True, tokens=4, topk=256, backend="fa3", row_layout="uniform")
    v = run_case(scattered).verdict
    assert v.passed and v.hazard_rows == 4 and v.backend_view == "same"
    assert any(i.startswith("caller hazard (FA3 SM90") and "not an A/B difference" in i for i in v.info)
    # The indexer's own rows (valid lanes first, then -1) are no hazard.
    tail = run_case(scattered.replace(row_layout="tail_padded")).verdict
    assert tail.passed and tail.hazard_rows == 0 and not _info_but_the_gpu_call_checks(tail)
    # SM120 skips entries < 0: a valid lane whose value wrapped negative is a hazard for it.
    wrapped = CaseConfig(mode="convert", counts=False, tokens=2, topk=256, backend="flashinfer-sm120",
                         block_size=256, table="huge")
    w = run_case(wrapped).verdict
    assert w.passed and w.hazard_rows > 0 and "skips" in _info_but_the_gpu_call_checks(w)[0]


def test_a_hazard_on_one_side_only_is_an_ab_difference_not_a_hazard():
    # B returns A's lanes with the row's -1s moved to the front: the wrapper check
    # fails, FA3's view differs, and no hazard is claimed (only one side's view is off).
    c = CaseConfig(mode="convert", counts=True, tokens=2, topk=128, backend="fa3", row_layout="tail_padded")
    r = run_case(c)
    b = dataclasses.replace(r.b, out=torch.flip(r.b.out, dims=[1]))
    views = views_of(c, r.a, b, r.reference)
    v = compare(c.case_id, r.a, b, r.reference, compacted=False, counts_returned=True, views=views, caller=c.caller)
    assert v.status is Status.FAIL and v.hazard_rows == 0
    assert RemapCheck.BACKEND_VIEW in [m.check for m in v.failures]


# ------------------------------------------------------------------- planted bug

_BLOCK_256_BUG = '''
import torch
import kernels_new as _real
_remap_tiling = _real._remap_tiling

def _spoil(res, block_size):
    if block_size < 256:
        return res
    out, counts = res if isinstance(res, tuple) else (res, None)
    # The bug: the offset inside a block kept in 7 bits (fine for every block size up to 128).
    off = torch.remainder(out, block_size)
    out = torch.where(out >= 0, out - off + off % 128, out)
    return (out, counts) if counts is not None else out

def triton_convert_req_index_to_global_index(*args, BLOCK_SIZE=64, **kwargs):
    return _spoil(_real.triton_convert_req_index_to_global_index(*args, BLOCK_SIZE=BLOCK_SIZE, **kwargs), BLOCK_SIZE)

def triton_filter_and_convert_dcp_index(*args, BLOCK_SIZE=64, **kwargs):
    return _spoil(_real.triton_filter_and_convert_dcp_index(*args, BLOCK_SIZE=BLOCK_SIZE, **kwargs), BLOCK_SIZE)
'''


def test_a_bug_only_sm120_calls_reach_is_caught_and_named_by_backend(points, broken_impl, tmp_path):
    planted = broken_impl(_BLOCK_256_BUG)
    # Every backend's non-DCP calls and one DCP call per size, at one batch shape.
    # (The calls neither side can make, a stride other than the block size, are left out as the sweep leaves them.)
    plan = registry.feature_plan("old", planted)
    chosen = [p for p in points if p.label("batch") == "decode-8" and plan.runnable(p.config)
              and (p.config.pattern != "D" or (p.config.dcp_rank == 0 and p.config.interleave == 1))]
    outcomes = run_batch([p.config for p in chosen], "old", planted, runtime.current())
    failed = [o for o in outcomes if not o.verdict.passed]
    assert failed, "the planted block-256 bug went unnoticed"
    assert {(o.config.backend, o.config.block_size) for o in failed} == {("flashinfer-sm120", 256)}
    assert all(o.verdict.passed for o in outcomes if o.config.block_size != 256)
    line = failed[0].verdict.first_line()
    assert line.startswith("FlashInfer SM120, pattern C, block 256: [out]"), line
    # SM120 reads the entries >= 0 in order: it sees the bug too, and says so.
    assert [m.check for m in failed[0].verdict.failures][-1] is RemapCheck.BACKEND_VIEW
    assert "FlashInfer SM120 would attend to other KV rows" in failed[0].verdict.failures[-1].message


def test_the_summary_has_a_by_backend_table(points, broken_impl, tmp_path):
    from remap_ab.sweep.run import Sweep, SweepOptions
    from remap_ab.sweep.summary import format_summary

    planted = broken_impl(_BLOCK_256_BUG)
    calls = "flashinfer-sm120-C-b256,flashinfer-sm120-C-b64,fa3-A-b64,flashinfer-sm100-D-b32-dcp4r1-i8"
    sweep = Sweep(SweepOptions(b=planted, device=runtime.current(), filters=[f"call={calls}", "batch=decode-1,spec-2-graph-4"],
                               workers=0, root=str(tmp_path), grid_file=CALLERS, progress=False))
    sweep.prepare()
    s = sweep.run()
    table = s["by_backend"]
    assert set(table) == {"FlashInfer SM120", "FA3 SM90", "FlashInfer SM100"}
    assert table["FlashInfer SM120"]["failed"] >= 1 and table["FlashInfer SM120"]["view_differs"] >= 1
    assert table["FA3 SM90"]["failed"] == 0 and table["FlashInfer SM100"]["failed"] == 0
    assert table["FlashInfer SM100"]["patterns"] == "D" and table["FA3 SM90"]["cases"] == 2
    text = format_summary(s)
    assert "by backend" in text and "FlashInfer SM120 [C]  4 cases" in text
    assert any(f["first_mismatch"].startswith("FlashInfer SM120, pattern C, block 256") for f in s["failures"])
    assert BACKEND_NAMES["fa3"] in text


@pytest.mark.gpu
def test_caller_inputs_identical_on_cpu_and_gpu(points):
    # The new fields (graph padding, runs per request, rebased starts, the persistent
    # table) keep inputs a function of the configuration alone, on every device.
    for p in points[::11]:
        c = p.config
        assert generate_inputs(c, "cpu").sha256() == generate_inputs(c, "cuda").sha256(), p.line()
    batch = [p.config for p in points[::7]]
    for c, x in zip(batch, generate_inputs_batch(batch, "cuda")):
        assert x.sha256() == generate_inputs(c, "cpu").sha256(), c.case_id


@pytest.mark.parametrize("name", ["callers", "models"])
def test_every_case_has_a_stand_in_the_compile_workers_can_build_with_its_kernels(name):
    # A compile worker builds a case's stand-in (two rows at most) to compile its
    # variant ahead; a stand-in that is no valid case leaves the variant to the device
    # at its launch, one at a time (CUDA-graph padding of 4 and 5 rows did).
    from remap_ab.subjects.remap.case.config import validate, variant_key
    from remap_ab.subjects.remap.judge.compile_ahead import stand_in

    configs = [p.config for p in grid.load(name).points() if isinstance(p.config, CaseConfig)]
    assert any(c.graph_padding > 1 for c in configs) or name == "models"
    for c in configs:
        small = stand_in(c)
        validate(small)
        assert variant_key(small) == variant_key(c), c.case_id
