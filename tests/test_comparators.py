"""Every comparator fed a deliberately broken result, and seen to fire.

Broken implementations are real modules (written to a temporary directory and named
by dotted path, as a user would name vLLM's), each wrapping ``kernels_new`` and
breaking one thing. So these tests exercise the registry, the runner's poisoning and
the comparators together."""

import pytest
import torch

from remap_ab import runtime
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.compare import OrderContract, Output, Reference, compare
from remap_ab.subjects.remap.judge.runner import run_case


def test_in_place_lane_changed(broken_impl):
    impl = broken_impl(patch="out = out.clone(); out[2, 5] += 1")
    config = CaseConfig(mode="convert", topk=256, tokens=4, invalid_ratio=0.0)
    v = run_case(config, "old", impl).verdict
    assert v.status == "fail"
    m = v.first
    assert (m.check, m.impl, m.row, m.col, m.lanes, m.rows) == ("out", impl, 2, 5, 1, 1)
    assert m.values[impl] == m.values["old"] + 1 == m.values["oracle"] + 1


def test_count_off_by_one(broken_impl):
    impl = broken_impl(patch="counts = counts.clone(); counts[1] -= 1")
    config = CaseConfig(dcp_size=4, topk=512, tokens=3, compact=False)
    v = run_case(config, "old", impl).verdict
    m = v.first
    assert (m.check, m.row, m.col, m.rows) == ("counts", 1, -1, 1)
    assert m.values[impl] == m.values["oracle"] - 1


def test_prefix_value_replaced(broken_impl):
    impl = broken_impl(patch="out = out.clone(); out[0, 3] = 123456789")
    config = CaseConfig(dcp_size=2, topk=512, tokens=2, invalid_ratio=0.2)
    v = run_case(config, "old", impl).verdict
    m = v.first
    assert (m.check, m.row, m.col) == ("prefix_set", 0, 3)
    assert m.values[impl] == 123456789


def test_tail_overwritten(broken_impl):
    impl = broken_impl(patch="out = out.clone(); out[1, -1] = 7")
    config = CaseConfig(dcp_size=4, topk=512, tokens=3, invalid_ratio=0.3)
    v = run_case(config, "old", impl).verdict
    checks = {m.check for m in v.failures}
    assert "tail" in checks
    tail = next(m for m in v.failures if m.check == "tail")
    assert (tail.row, tail.col, tail.values[impl]) == (1, 511, 7)


def test_single_tile_order_broken(broken_impl):
    # Swap two prefix entries: same set, count and tail; only the order is wrong, and
    # the new kernel promises column order at K=2048.
    impl = broken_impl(patch="out = out.clone(); out[0, :2] = out[0, :2].flip(0).clone()")
    config = CaseConfig(dcp_size=4, topk=2048, tokens=2, invalid_ratio=0.1)
    v = run_case(config, "old", impl).verdict
    assert [m.check for m in v.failures] == ["order"]
    assert (v.first.row, v.first.col) == (0, 0)


def test_tiled_order_must_be_a_segment_permutation(broken_impl):
    # At K=384 the tiled order is free up to whole tile segments; swapping two lanes
    # inside the first segment is not one of the admissible orders.
    impl = broken_impl(patch="out = out.clone(); out[0, :2] = out[0, :2].flip(0).clone()")
    config = CaseConfig(dcp_size=2, topk=384, tokens=2, invalid_ratio=0.1)
    v = run_case(config, "old", impl).verdict
    assert [m.check for m in v.failures] == ["order"]
    assert "segments" in v.first.message


@pytest.mark.skipif(runtime.default_device() != "cpu", reason="needs the interpreter's column-ordered tiled output")
def test_tiled_segment_swap_is_allowed_and_reported(broken_impl):
    # Reversing whole segments is what a racy allocator may legitimately produce.
    body = """
    if compact:
        out = out.clone()
        for r in range(out.shape[0]):
            n = int((out[r] != -1).sum())
            row = out[r, :n].tolist()
            # Cut the column-ordered prefix into its tile segments, emit them reversed.
            segs, pos = [], 0
            for size in _SEGMENT_SIZES[r]:
                segs.append(row[pos:pos + size]); pos += size
            flat = [x for s in reversed(segs) for x in s]
            out[r, :n] = torch.tensor(flat, dtype=out.dtype)
    """
    impl = broken_impl(patch=body)
    config = CaseConfig(dcp_size=2, topk=384, tokens=3, invalid_ratio=0.2)
    from remap_ab.subjects.remap.case.inputs import generate_inputs
    from remap_ab.subjects.remap.judge.oracle import remap

    inputs = generate_inputs(config)
    _, valid = remap(inputs.req_id, inputs.block_table, inputs.token_indices, block_size=64, dcp_size=2)
    sizes = [[int(valid[r, j * 128:(j + 1) * 128].sum()) for j in range(3)] for r in range(3)]
    import sys

    __import__(impl)
    sys.modules[impl]._SEGMENT_SIZES = sizes
    v = run_case(config, "old", impl).verdict
    assert v.passed, v.describe()
    assert v.order_differs and v.order_differs_rows == 3
    assert "allowed" in v.info[0]


def test_unwritten_lane_is_caught_by_poisoning(broken_impl):
    # A kernel that leaves one column of an `empty` output unwritten: the poisoned
    # buffer makes that lane INT32_MAX instead of whatever memory held.
    broken_impl('''
        import torch
        import kernels_new as _real
        def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw):
            res = _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, **kw)
            out = res[0] if isinstance(res, tuple) else res
            fresh = torch.empty_like(out)
            fresh[:, :-1] = out[:, :-1]   # forgot the last column
            return (fresh, res[1]) if isinstance(res, tuple) else fresh
        triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index
    ''', name="brk_unwritten")
    config = CaseConfig(mode="convert", topk=256, tokens=2, counts=False)
    v = run_case(config, "old", "brk_unwritten").verdict
    m = v.first
    assert (m.check, m.col, m.values["brk_unwritten"]) == ("out", 255, 2**31 - 1)


def test_raising_implementation_is_an_error_verdict(broken_impl):
    impl = broken_impl(patch="raise RuntimeError('kernel exploded')")
    v = run_case(CaseConfig(topk=256, tokens=1), "old", impl).verdict
    assert v.status == "error" and "kernel exploded" in v.first.message


def test_wrong_dtype_is_a_shape_failure(broken_impl):
    impl = broken_impl(patch="out = out.to(torch.int64)")
    v = run_case(CaseConfig(topk=256, tokens=1), "old", impl).verdict
    assert v.first.check == "shape" and "int64" in v.first.message


def test_comparator_on_plain_data():
    """The comparator alone, on hand-made tensors (no kernels)."""
    lanes = torch.tensor([[5, -1, 7, 8]], dtype=torch.int32)
    valid = lanes != -1
    ref = Reference(lanes=lanes, valid=valid, out=torch.tensor([[5, 7, 8, -1]], dtype=torch.int32),
                    counts=torch.tensor([3], dtype=torch.int32))
    tiled = OrderContract(False, 2, "tiles of 2")
    good = Output("a", torch.tensor([[7, 8, 5, -1]], dtype=torch.int32), torch.tensor([3], dtype=torch.int32), tiled)
    bad = Output("b", torch.tensor([[8, 7, 5, -1]], dtype=torch.int32), torch.tensor([3], dtype=torch.int32), tiled)
    v = compare("x", good, good, ref, compacted=True, counts_returned=True)
    assert v.passed
    v = compare("x", good, bad, ref, compacted=True, counts_returned=True)
    assert v.status == "fail" and v.first.check == "order" and v.first.impl == "b"
