"""The slot-mapping kernels (kernels_slotmap): the adapter between the two calling
conventions, both versions against the torch oracle, and the differences the subject
reports (the PAD tail, the host's int32 wrap, positions past a request's row)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from remap_ab import runtime

DEVICE = runtime.select(runtime.default_device())  # the interpreter switch on CPU, before the kernel is imported

from kernels_slotmap import adapter, device, host, oracle  # noqa: E402

SENTINEL = 77


def make_batch(counts, columns, stride, block_size, world=1, tail=3, low=0, seed=0):
    rng = np.random.default_rng(seed)
    qsl = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    table = rng.integers(low, low + 1000, (len(counts) + 1, stride)).astype(np.int32)
    span = columns * block_size * world
    positions = np.concatenate([rng.integers(0, span, c) for c in counts]).astype(np.int64)
    return adapter.Batch(table, columns, qsl, positions, int(qsl[-1]) + tail)


def run_both(batch, params):
    a = np.full(batch.max_num_tokens, SENTINEL, np.int64)
    args, kwargs = adapter.host_args(batch, params, a)
    host.compute_slot_mapping(*args, **kwargs)
    b = torch.full((batch.max_num_tokens,), SENTINEL, dtype=torch.int64, device=DEVICE)
    args, kwargs = adapter.device_args(batch, params, b, DEVICE)
    device.compute_slot_mapping(*args, **kwargs)
    o = oracle.slot_mapping(torch.from_numpy(batch.block_table.copy()), torch.from_numpy(batch.query_start_loc),
                            torch.from_numpy(batch.positions), params.block_size, params.dcp_world_size, params.dcp_rank,
                            params.cp_kv_cache_interleave_size, params.pad_slot_id, params.blocks_per_kv_block)
    return a, b.cpu().numpy(), o.numpy()


def test_request_rows_and_query_start_loc_describe_the_same_batch():
    qsl = np.array([0, 3, 3, 4, 9], np.int32)
    rows = adapter.req_indices(qsl)
    assert rows.tolist() == [0, 0, 0, 2, 3, 3, 3, 3, 3]
    assert adapter.query_start_loc(rows, 4).tolist() == qsl.tolist()
    with pytest.raises(ValueError, match="non-decreasing"):
        adapter.query_start_loc(np.array([1, 0]), 2)
    with pytest.raises(ValueError, match="must not decrease"):
        adapter.req_indices(np.array([0, 2, 1], np.int32))


def test_both_calls_come_from_one_batch():
    batch = make_batch([2, 1, 3], columns=4, stride=6, block_size=16)
    params = adapter.Params(16, 2, 1, 16)
    slots = np.zeros(batch.max_num_tokens, np.int64)
    (table, rows, positions, bs, buf), kw = adapter.host_args(batch, params, slots)
    assert rows.tolist() == [0, 0, 1, 2, 2, 2] and table.shape == (4, 4) and buf is slots and bs == 16
    (qsl, pos, dtable, _, _), dkw = adapter.device_args(batch, params, torch.zeros(9, dtype=torch.int64, device=DEVICE), DEVICE)
    assert qsl.dtype == torch.int32 and qsl.tolist() == [0, 2, 3, 6] and pos.tolist() == positions.tolist()
    assert dtable.stride(0) == 6 and dtable.shape == (4, 4)  # the table stays a slice of its buffer
    assert torch.equal(dtable.cpu(), torch.from_numpy(table.copy())) and kw == dkw


@pytest.mark.parametrize("counts, block_size, world, interleave, split", [
    ([3, 1, 5], 16, 1, 1, 1),
    ([1, 1, 1, 1], 32, 2, 16, 1),
    ([7, 2], 64, 4, 1, 2),
    ([4, 6, 1], 128, 8, 64, 4),
    ([1030, 2], 16, 2, 16, 1),  # one request past the 1024-token chunk
])
def test_both_versions_equal_the_oracle(counts, block_size, world, interleave, split):
    batch = make_batch(counts, columns=5, stride=7, block_size=block_size // split, world=world, seed=len(counts))
    n = len(batch.positions)
    owners = np.zeros(n, np.int64)
    for rank in range(world):
        params = adapter.Params(block_size // split, world, rank, interleave, -1, split)
        a, b, o = run_both(batch, params)
        assert (a[:n] == o).all() and (b[:n] == o).all(), (rank, np.flatnonzero(a[:n] != o)[:3], np.flatnonzero(b[:n] != o)[:3])
        owners += o != -1
    assert (owners == 1).all()  # each token's slot is on exactly one rank


def test_device_writes_the_pad_tail_and_host_leaves_it():
    batch = make_batch([2, 3], columns=3, stride=3, block_size=16, tail=1500)  # a tail past one 1024 chunk
    a, b, _ = run_both(batch, adapter.Params(16))
    assert (a[5:] == SENTINEL).all() and (b[5:] == -1).all()


def test_host_wraps_past_two_to_the_31_and_the_device_does_not():
    batch = make_batch([4, 4], columns=2, stride=2, block_size=64, low=2**31 // 64 - 500)
    a, b, o = run_both(batch, adapter.Params(64))
    assert (o >= 2**31).any() and (b[:8] == o).all()
    wrapped = ((o + 2**31) % 2**32) - 2**31
    assert (a[:8] == wrapped).all() and (a[:8] != o).any()


def test_a_position_past_its_row_reads_the_next_row_and_the_oracle_refuses_it():
    batch = make_batch([1, 1], columns=2, stride=2, block_size=16)
    batch = adapter.Batch(batch.table_buffer, 2, batch.query_start_loc, np.array([2 * 16, 0], np.int64), 2)
    with pytest.raises(ValueError, match="past its row"):
        run_both(batch, adapter.Params(16))
    a = np.zeros(2, np.int64)
    host.compute_slot_mapping(*adapter.host_args(batch, adapter.Params(16), a)[0])
    assert a[0] == batch.table_buffer[1, 0] * 16  # request 0's third block is request 1's first
    last = adapter.Batch(batch.table_buffer, 2, batch.query_start_loc, np.array([0, 4 * 16], np.int64), 2)  # entry 6 of 6
    with pytest.raises(IndexError):  # only past the table's end does the host raise
        host.compute_slot_mapping(*adapter.host_args(last, adapter.Params(16), a)[0])


@pytest.mark.skipif(DEVICE != "cpu", reason="the Triton interpreter's behaviour")
def test_a_loaded_scalar_as_a_loop_bound_runs_under_an_interpreter_that_converts_it_with_int(monkeypatch):
    # Triton 3.6's interpreter takes a tensor's index as int() of its one-element array,
    # which NumPy 2.4 refuses; remap-ab's executor (interpreter/batched.py) squeezes it.
    from triton.runtime import interpreter

    from remap_ab.interpreter import batched

    own = interpreter._patch_lang_tensor

    def like_triton_3_6(tensor, scope):
        own(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", like_triton_3_6)
    batch = make_batch([2, 1, 3], columns=4, stride=6, block_size=16)
    with batched.installed():
        a, b, o = run_both(batch, adapter.Params(16, 2, 1, 16))
    assert (b[:6] == o[:6]).all() and interpreter._patch_lang_tensor is like_triton_3_6  # put back after the launch


@pytest.mark.skipif(DEVICE != "cpu", reason="the Triton interpreter's behaviour")
def test_the_interpreter_s_own_patch_goes_back_when_a_launch_fails_before_it_runs(monkeypatch):
    from triton.runtime import interpreter

    from remap_ab.interpreter import batched

    own = interpreter._patch_lang_tensor

    def refuses(fn):
        raise RuntimeError("patching refused")

    monkeypatch.setattr(interpreter, "_patch_lang", refuses)
    batch = make_batch([1], columns=2, stride=2, block_size=16)
    with batched.installed(), pytest.raises(RuntimeError, match="patching refused"):
        run_both(batch, adapter.Params(16))
    assert interpreter._patch_lang_tensor is own
