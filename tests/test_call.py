"""The call primitive (remap_ab/subjects/remap/judge/call.py) and the layouts (remap_ab/subjects/remap/case/layouts.py): each
check fed an implementation that breaks it, and the blame on the one that did."""

from __future__ import annotations

import pytest
import torch

from remap_ab import runtime
from remap_ab.status import Check
from remap_ab.subjects.remap.case import layouts
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.judge.call import PrivateInputs
from remap_ab.subjects.remap.judge.runner import run_case

DEVICE = runtime.default_device()

IN_PLACE = '''
"""An 'in-place' convert: its result is copied into token_indices, which it returns."""
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw):
    r = k.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw)
    out = r[0] if isinstance(r, tuple) else r
    token_indices.copy_(out)
    return (token_indices, r[1]) if isinstance(r, tuple) else token_indices
'''

SLACK_WRITER = '''
"""Right in its outputs, but it scribbles into the buffer slack after token_indices' first row."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw):
    r = k.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw)
    token_indices.as_strided((1,), (1,), token_indices.storage_offset() + token_indices.shape[1]).fill_(-7)
    return r
'''

STRIDE_IGNORER = '''
"""Reads token_indices as if its rows were K elements apart (no .contiguous())."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw):
    t, w = token_indices.shape
    raw = torch.empty(0, dtype=token_indices.dtype, device=token_indices.device).set_(
        token_indices.untyped_storage(), token_indices.storage_offset(), (t, w), (w, 1))
    return k.triton_convert_req_index_to_global_index(req_id, block_table, raw, **kw)
'''

CONVERT = CaseConfig(mode="convert", tokens=3, topk=256, counts=True, num_reqs=2, blocks_per_req=16, block_size=16)


def _checks(verdict, impl: str) -> set:
    return {m.check for m in verdict.failures if m.impl == impl}


@pytest.mark.parametrize("a_is_bad", [False, True], ids=["bad-as-b", "bad-as-a"])
def test_an_implementation_that_writes_its_inputs_is_blamed_and_the_other_is_not(broken_impl, a_is_bad):
    bad = broken_impl(IN_PLACE)
    a, b = (bad, "old") if a_is_bad else ("old", bad)
    v = run_case(CONVERT, a, b, device=DEVICE).verdict
    assert _checks(v, bad) >= {Check.INPUTS_WRITTEN, Check.ALIASED}
    assert _checks(v, "old") == set()  # its own copy of the inputs: nothing reached it
    written = next(m for m in v.failures if m.check == Check.INPUTS_WRITTEN)
    assert f"{bad} wrote into its input token_indices:" in written.message and "the first at [" in written.message


def test_the_batch_engine_finds_the_write_too(broken_impl):
    bad = broken_impl(IN_PLACE)
    (outcome,) = run_batch([CONVERT], "old", bad, DEVICE)
    assert _checks(outcome.verdict, bad) >= {Check.INPUTS_WRITTEN, Check.ALIASED}
    assert _checks(outcome.verdict, "old") == set()


def test_a_write_into_a_strided_views_slack_is_found(broken_impl):
    bad = broken_impl(SLACK_WRITER)
    v = run_case(CONVERT.replace(layout="token_rows"), "old", bad, device=DEVICE).verdict
    (m,) = [m for m in v.failures if m.impl == bad]
    assert m.check == Check.INPUTS_WRITTEN and "slack between its elements" in m.message and "-> -7" in m.message


SPARE_ROW_WRITER = '''
"""Right in its outputs, but it scribbles into the first buffer row after token_indices' last."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw):
    r = k.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw)
    t = token_indices
    t.as_strided((1,), (1,), t.storage_offset() + t.shape[0] * t.stride(0)).fill_(-7)
    return r
'''


def test_a_write_past_a_views_last_row_is_found_in_a_batch_on_the_case_that_made_it(broken_impl):
    # In a batch the layouts' buffers are shared by the cases; each case's part of
    # them (its spare rows too) is what its writes are looked for in.
    bad = broken_impl(SPARE_ROW_WRITER)
    configs = [CONVERT.replace(layout="persistent", seed=s) for s in range(3)]
    for outcome in run_batch(configs, "old", bad, DEVICE):
        (m,) = [m for m in outcome.verdict.failures if m.impl == bad]
        assert m.check == Check.INPUTS_WRITTEN, m.message
        assert "after its last row" in m.message and "-> -7" in m.message
        assert "1 of its elements changed" in m.message  # its own row, not a neighbour's too
        assert _checks(outcome.verdict, "old") == set()


def test_a_tensor_replaced_after_placement_is_copied_by_its_own_extent():
    x = generate_inputs(CONVERT.replace(layout="persistent"), device=DEVICE)
    # owned still names the old buffer's part, [0, 19): this view lies far past it.
    x.req_id = torch.arange(100, dtype=torch.int32, device=DEVICE)[50:53]
    copy = PrivateInputs([x]).cases[0]
    assert torch.equal(copy.req_id, x.req_id) and copy.req_id.storage_offset() == 0
    assert torch.equal(copy.token_indices, x.token_indices)


def test_a_batch_places_each_case_in_its_own_part_with_its_layouts_filler():
    from remap_ab.subjects.remap.case.inputs import generate_inputs_batch

    names = ("persistent", "contiguous", "token_rows", "persistent", "mixed")
    configs = [CONVERT.replace(layout=name, seed=i) for i, name in enumerate(names)]
    batch = generate_inputs_batch(configs, device=DEVICE)
    for name, c, x in zip(names, configs, batch):
        alone = generate_inputs(c, device=DEVICE)
        t = x.token_indices
        assert torch.equal(t, alone.token_indices) and t.stride() == alone.token_indices.stride()
        assert t.data_ptr() % 16 == alone.token_indices.data_ptr() % 16  # the alignment Triton specialises on
        address, lo, hi = x.owned["token_indices"]
        assert address == t.untyped_storage().data_ptr()
        part = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), lo, (hi - lo,), (1,))
        inside = torch.zeros(hi - lo, dtype=torch.bool, device=t.device)
        inside.as_strided(t.shape, t.stride(), t.storage_offset() - lo).fill_(True)
        filler = -1 if name == "persistent" else 3
        assert (part[~inside] == filler).all(), name  # every element of its part that is not its view's
    assert len({x.token_indices.untyped_storage().data_ptr() for x in batch}) == 1  # one buffer for the batch


@pytest.mark.parametrize("name", layouts.LAYOUT_NAMES)
def test_every_layout_holds_the_cases_values(name):
    config = CaseConfig(mode="convert", tokens=3, topk=256, counts=True, prefill_fraction=0.5, layout=name)
    placed = generate_inputs(config, device=DEVICE)
    plain = generate_inputs(config.replace(layout="contiguous"), device=DEVICE)
    layout = layouts.LAYOUTS[name]
    for field, t in plain.tensors().items():
        assert torch.equal(getattr(placed, field), t), field
    assert placed.token_indices.stride() == (256 * layout.token_col_step + layout.token_row_pad, layout.token_col_step)
    assert placed.req_id.stride() == (layout.req_step,) and placed.req_id.storage_offset() == layout.offset
    assert placed.prefill_request_ids is not None and placed.prefill_request_ids.is_contiguous()  # §6 asserts it
    assert run_case(config, "old", "new", device=DEVICE).verdict.passed


def test_a_stride_ignoring_implementation_passes_contiguous_inputs_and_fails_strided_ones(broken_impl):
    bad = broken_impl(STRIDE_IGNORER)
    assert run_case(CONVERT, "old", bad, device=DEVICE).verdict.passed
    for name in ("token_rows", "token_cols", "mixed"):
        v = run_case(CONVERT.replace(layout=name), "old", bad, device=DEVICE).verdict
        assert Check.OUT in _checks(v, bad) and _checks(v, "old") == set(), name


def test_private_inputs_keep_the_layout_and_compare_every_byte():
    x = generate_inputs(CONVERT.replace(layout="mixed"), device=DEVICE)
    own = PrivateInputs([x])
    copy = own.cases[0]
    for field, t in x.tensors().items():
        c = getattr(copy, field)
        assert c.stride() == t.stride() and c.storage_offset() == t.storage_offset() and torch.equal(c, t)
        assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert not bool(own.any_changed()) and own.writes(0, "x") == []
    copy.block_table[1, 2] += 1
    assert bool(own.any_changed())
    (finding,) = own.writes(0, "x")
    assert finding.check == Check.INPUTS_WRITTEN and "block_table" in finding.message and "[1, 2]" in finding.message


# ----------------------------------------------------------------------------- on CUDA

HOST_SYNC = '''
"""A debug check left in: the counts read back to the host."""
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(*a, **kw):
    out, counts = k.triton_convert_req_index_to_global_index(*a, **kw)
    assert int(counts.sum()) >= 0
    return out, counts
'''

PRIVATE_STREAM = '''
"""Launches on a stream of its own and returns without making the caller's stream wait."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(*a, **kw):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return k.triton_convert_req_index_to_global_index(*a, **kw)
'''

# Its outputs hold the right values before the call returns; then the kernel runs again
# on a stream of its own and writes them once more, the caller's stream not made to wait.
SAME_VALUES_LATE = '''
"""Right values on the caller's stream, then the same values written again from a private stream."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(*a, **kw):
    r = k.triton_convert_req_index_to_global_index(*a, **kw)
    out = r[0] if isinstance(r, tuple) else r
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        again = k.triton_convert_req_index_to_global_index(*a, **kw)
        out.copy_(again[0] if isinstance(again, tuple) else again)
    return r
'''

# A stream of its own, and the caller's stream made to wait for it: what vLLM may do.
WAITED_STREAM = '''
"""Launches on a stream of its own and makes the caller's stream wait before returning."""
import torch
import kernels_new as k
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(*a, **kw):
    caller = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        r = k.triton_convert_req_index_to_global_index(*a, **kw)
    caller.wait_stream(side)
    return r
'''


@pytest.mark.gpu
def test_a_host_sync_fails_sync_and_graph_and_blames_its_side(broken_impl):
    bad = broken_impl(HOST_SYNC)
    v = run_case(CONVERT, "old", bad, device="cuda").verdict
    assert {Check.SYNC, Check.GRAPH} <= _checks(v, bad) and _checks(v, "old") == set()


@pytest.mark.gpu
def test_a_failed_capture_leaves_the_process_able_to_draw_random_numbers(broken_impl):
    """A capture broken by a host sync ends without torch's epilogue; the check
    recovers, or every later torch.randn on the device (the side-stream load, the
    bench) raises "Offset increment outside graph capture"."""
    bad = broken_impl(HOST_SYNC)
    v = run_case(CONVERT, "old", bad, device="cuda").verdict
    assert Check.GRAPH in _checks(v, bad)
    assert torch.randn(4, device="cuda").shape == (4,)
    with torch.cuda.stream(torch.cuda.Stream()):
        assert torch.randn(8, 8, device="cuda", dtype=torch.bfloat16).shape == (8, 8)
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_a_private_stream_fails_the_stream_check(broken_impl):
    bad = broken_impl(PRIVATE_STREAM)
    v = run_case(CONVERT.replace(tokens=64, topk=2048, blocks_per_req=256), "old", bad, device="cuda").verdict
    assert Check.STREAM in _checks(v, bad) and _checks(v, "old") == set()


@pytest.mark.gpu
def test_work_left_on_another_stream_fails_the_stream_check_when_the_memory_already_holds_its_values(broken_impl):
    """What a snapshot of the outputs cannot see: the caller's read and the late write
    agree on every value; the event at the call's return says the write came after it."""
    bad = broken_impl(SAME_VALUES_LATE)
    v = run_case(CONVERT, "old", bad, device="cuda").verdict
    assert Check.STREAM in _checks(v, bad) and _checks(v, "old") == set()
    assert any("ms after the call returned" in f.message for f in v.failures if f.impl == bad)


@pytest.mark.gpu
def test_a_stream_the_caller_is_made_to_wait_for_passes_the_stream_check(broken_impl):
    ok = broken_impl(WAITED_STREAM)
    v = run_case(CONVERT.replace(tokens=64, topk=2048, blocks_per_req=256), "old", ok, device="cuda").verdict
    assert v.passed and _checks(v, ok) == set()


@pytest.mark.gpu
def test_the_real_kernels_pass_every_call_check():
    v = run_case(CONVERT, "old", "new", device="cuda").verdict
    assert v.passed and any("checked on the GPU as vLLM calls it: graph, stream, sync" in i for i in v.info)


def test_the_first_call_waits_for_tritons_background_hash_instead_of_hashing_again():
    import sys

    from triton.runtime import cache

    from remap_ab.subjects.remap.judge.call import calling

    interval = sys.getswitchinterval()
    cache.triton_key.cache_clear()
    runtime.hash_triton_in_background()
    assert runtime._triton_key_thread is not None
    with calling(torch.device("cuda"), "new"):  # a CUDA call's block (nothing is allocated in it)
        assert runtime._triton_key_thread is None
        assert cache.triton_key.cache_info().currsize == 1
    misses = cache.triton_key.cache_info().misses
    cache.triton_key()  # what the first kernel lookup asks for: found, not hashed again
    assert cache.triton_key.cache_info().misses == misses
    assert sys.getswitchinterval() == interval


def test_the_switch_interval_is_short_while_any_helper_holds_it_and_restored_by_the_last():
    import sys

    from remap_ab.host import gil

    interval = sys.getswitchinterval()
    first, second = gil.hand_over_quickly(), gil.hand_over_quickly()
    assert sys.getswitchinterval() < interval
    first()
    first()  # twice is once
    assert sys.getswitchinterval() < interval
    second()
    assert sys.getswitchinterval() == interval


def test_a_batchs_graph_checks_get_the_fresh_inputs_made_with_the_batch_and_their_values(monkeypatch):
    from remap_ab.subjects.remap.case import inputs as inputs_module
    from remap_ab.subjects.remap.judge import call as call_module
    configs = [CONVERT.replace(layout=name, seed=i) for i, name in enumerate(layouts.LAYOUT_NAMES)]
    want = [generate_inputs(c.replace(seed=c.seed + 1), device=DEVICE) for c in configs]
    made = inputs_module.generate_inputs_batch(configs[:2] + call_module.fresh_configs(configs), device=DEVICE)
    call_module.remember_fresh_inputs(configs, made[2:])
    monkeypatch.setattr(inputs_module, "generate_inputs", lambda *a, **k: pytest.fail("made one case at a time"))
    for c, w in zip(configs, want):
        got = call_module.fresh_inputs(c, w.device)  # as the graph check asks: its case's inputs' device
        for name, t in w.tensors().items():
            assert torch.equal(getattr(got, name), t) and getattr(got, name).stride() == t.stride(), (c.layout, name)


_FAULTS_AFTER_WARMUP = """
import resource, sys, torch
from remap_ab import runtime
from remap_ab.host import tuning
torch.set_num_threads(1)
if sys.argv[1] == "selected":  # a process remap-ab started (the command line, a worker), on the CPU
    tuning.tune_this_process()
    runtime.select("cpu")
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def case(n):  # a case's buffers: four of about 8 MB (a little larger each case), written, then freed
    for t in [torch.empty(n, dtype=torch.int32) for _ in range(4)]:
        t.fill_(1)
for r in range(5):
    case((2 << 20) + r * 1024)
before = faults()
for r in range(5, 15):
    case((2 << 20) + r * 1024)
print(faults() - before)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="the malloc tuning is glibc's (a no-op elsewhere)")
def test_a_cpu_process_that_runs_kernels_reuses_the_memory_its_cases_freed_instead_of_faulting_it_in_again():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # the interpreter, also on a machine with a GPU

    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _FAULTS_AFTER_WARMUP, mode], env=env, capture_output=True, text=True,
                              check=True)
        return int(done.stdout.split()[-1])

    pages = 10 * 4 * (8 << 20) // 4096  # what ten more cases touch
    assert faults("selected") < pages // 20
    assert faults("plain") > pages // 2  # the control: glibc alone hands large freed blocks back
