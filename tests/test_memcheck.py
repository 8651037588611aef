"""--memcheck on the CPU: an implementation that reads past the block table passes
every output check and fails memcheck, naming the tensor and the distance; the real
kernels are clean; the batched entry point (Session.access) checks what it is given."""

import numpy as np
import pytest
import torch
from memcheck_support import oob_implementation

from remap_ab import runtime
from remap_ab.errors import InternalError
from remap_ab.sanitizer import memcheck
from remap_ab.status import Check, Status
from remap_ab.subjects.remap.case.config import CaseConfig

cpu_only = pytest.mark.skipif(runtime.default_device() != "cpu", reason="memcheck of interpreted launches needs the CPU interpreter")

def _run(config, a, b, memcheck_on):
    from remap_ab.subjects.remap.judge.runner import run_case

    return run_case(config, a, b, device="cpu", memcheck=memcheck_on)


@cpu_only
def test_read_past_the_block_table_passes_outputs_and_fails_memcheck(tmp_path, monkeypatch):
    oob = oob_implementation(tmp_path, monkeypatch, "row_end")
    config = CaseConfig(mode="convert", tokens=2, topk=256, num_reqs=1, blocks_per_req=8, block_size=16)
    assert _run(config, "old", oob, False).verdict.passed  # equal outputs cannot see it

    result = _run(config, "old", oob, True)
    v = result.verdict
    assert v.status == Status.FAIL
    assert [m.check for m in v.failures] == [Check.MEMCHECK]
    m = v.first
    assert m.impl == oob and m.row == 0 and m.col == -1  # a one-lane-per-program load
    assert "load of 4 bytes" in m.message and "_convert_req_index_to_global_index_kernel" in m.message
    assert "1 element past the last element of block_table (8 elements of 4 bytes; 0 bytes after its end)" in m.message
    assert f"remap-ab run --a old --b {oob} {config.cli_args()} --device cpu --memcheck" in m.message
    # Every program read it once: 2 rows x 2 tiles.
    assert m.lanes == 4 and m.rows == 2
    assert result.a.memcheck.clean and result.a.memcheck.launches == 1
    assert any(i.startswith("memcheck old: clean") for i in v.info)


@cpu_only
def test_the_column_of_a_lane_is_its_own(tmp_path, monkeypatch):
    oob = oob_implementation(tmp_path, monkeypatch, "next_block")
    config = CaseConfig(mode="convert", tokens=2, topk=256, num_reqs=1, blocks_per_req=4, block_size=16, seed=3)
    result = _run(config, oob, "new", True)
    assert result.verdict.status == Status.FAIL
    report = result.a.memcheck
    assert report.bad_elements > 0 and result.b.memcheck.clean
    for f in report.findings:
        token = int(result.inputs.token_indices[f.row, f.col])
        assert token // config.block_size == config.blocks_per_req - 1  # the lane whose next block is past the end
        assert f.program == (f.row, f.col // config.block_n, 0)
        assert f.nearest == "block_table" and f.bytes_after_end == 0
    # Every lane whose block is the last one reads past the end (a single request row).
    tok = result.inputs.token_indices
    assert report.bad_elements == int(((tok >= 0) & (tok // config.block_size == config.blocks_per_req - 1)).sum())


REAL_CASES = [
    CaseConfig(mode="convert", tokens=2, topk=256, counts=False),
    CaseConfig(mode="convert", tokens=2, topk=256, counts=True, prefill_fraction=0.5, out_of_range=0.2),
    CaseConfig(mode="dcp", tokens=2, topk=512, dcp_size=2, compact=True),  # new: single tile
    CaseConfig(mode="dcp", tokens=1, topk=384, dcp_size=4, interleave=4, compact=True),  # tiled in both
    CaseConfig(mode="dcp", tokens=2, topk=256, dcp_size=2, compact=False, counts=False, table="padded"),
]


@cpu_only
@pytest.mark.parametrize("config", REAL_CASES, ids=lambda c: f"{c.mode}-{c.topk}-{c.case_id}")
def test_real_kernels_are_clean(config):
    result = _run(config, "old", "new", True)
    assert result.verdict.passed, result.verdict.describe()
    for out in (result.a, result.b):
        assert out.memcheck is not None and out.memcheck.clean and out.memcheck.launches == 1
        assert out.memcheck.elements_checked > 0


@cpu_only
def test_run_command_fails_with_memcheck(tmp_path, monkeypatch, capsys):
    from remap_ab.cli import main

    oob = oob_implementation(tmp_path, monkeypatch, "row_end")
    args = ["run", "--a", "old", "--b", oob, "--device", "cpu", "--mode", "convert", "--tokens", "1",
            "--topk", "128", "--num-reqs", "1", "--blocks-per-req", "4"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args + ["--memcheck"]) == 1
    text = capsys.readouterr().out
    assert "FAIL [memcheck]" in text and "past the last element of block_table" in text


# ---------------------------------------------------------------- the batched entry point


def _session(**tensors):
    s = memcheck.Session("impl")
    s.begin_launch("k", tensors)
    return s


def test_access_checks_only_active_lanes_and_reports_rows_and_columns():
    t = torch.zeros(4, 8, dtype=torch.int32)
    u = torch.zeros(3, dtype=torch.int32)
    s = _session(t_ptr=t, u_ptr=u)
    base = t.data_ptr()
    # Two programs (rows 5 and 6, tile 1) of 4 lanes each; lane 3 of row 6 is 2 elements past t's end.
    addresses = np.array([[base, base + 4, base + 8, base + 12], [base + 120, base + 124, base + 500, base + 136]])
    mask = np.array([[True, True, True, True], [True, True, False, True]])
    programs = np.zeros(addresses.shape + (3,), dtype=np.int64)
    programs[0, :, 0], programs[1, :, 0], programs[..., 1] = 5, 6, 1
    ok = s.access("load", addresses, mask, programs, itemsize=4)
    assert ok.tolist() == [[True] * 4, [True, True, False, False]]
    r = s.report
    assert r.elements_checked == 7 and r.bad_elements == 1 and r.bad_rows == {6}
    (f,) = r.findings
    assert (f.row, f.col, f.nearest, f.bytes_after_end, f.elements_past_last) == (6, 1 * 4 + 3, "t", 8, 3)


def test_access_before_a_tensor_and_one_lane_per_program():
    t = torch.zeros(16, dtype=torch.int32)
    s = _session(t_ptr=t)
    addresses = np.array([t.data_ptr() - 8, t.data_ptr()])  # one lane in each of two programs
    programs = np.array([[0, 0, 0], [1, 0, 0]])
    s.access("store", addresses, np.ones(2, dtype=bool), programs, itemsize=4)
    (f,) = s.report.findings
    assert f.kind == "store" and f.col == -1 and f.bytes_before_start == 8 and f.bytes_after_end == -1
    assert "2 elements before the first element of t" in f.describe()


def test_an_access_straddling_the_end_is_out_of_bounds():
    t = torch.zeros(4, dtype=torch.int32)
    s = _session(t_ptr=t)
    ok = s.access("load", np.array([t.data_ptr() + 14]), np.array([True]), np.zeros((1, 3), dtype=np.int64), itemsize=4)
    assert not ok.any() and s.report.findings[0].bytes_after_end == 0


def test_an_access_without_a_launch_is_an_internal_error():
    s = memcheck.Session("impl")
    with pytest.raises(InternalError):
        s.access("load", np.array([0]), np.array([True]), np.zeros((1, 3), dtype=np.int64))


def test_a_strided_view_spans_its_elements_only():
    t = torch.zeros(6, 8, dtype=torch.int32)
    view = t[1:3, ::2]
    (region,) = memcheck._regions({"v": view})
    assert region.start == view.data_ptr() and region.end == t[2, 6].data_ptr() + 4


def test_unchecked_outputs_are_said_so():
    from remap_ab.subjects.remap.judge.compare import OrderContract, Output, Reference, compare

    t = torch.tensor([[1, 2]], dtype=torch.int32)
    ref = Reference(lanes=t, valid=t >= 0, out=t, counts=torch.tensor([2], dtype=torch.int32))
    outs = [Output("a", t.clone(), None, OrderContract(True, 1)), Output("b", t.clone(), None, OrderContract(True, 1))]
    outs[1].memcheck = memcheck.MemcheckReport("b", launches=1, elements_checked=10)
    v = compare("c", *outs, ref, compacted=False, counts_returned=False, memchecked=True, replay="remap-ab run --memcheck")
    assert v.passed and v.info == ["memcheck a: not checked", "memcheck b: clean (10 active elements in 1 launch checked)"]


@cpu_only
def test_findings_follow_the_program_under_a_permuted_schedule(tmp_path, monkeypatch):
    from remap_ab.interpreter.schedule import interpreter_schedule
    from remap_ab.subjects.remap.judge.runner import run_case

    oob = oob_implementation(tmp_path, monkeypatch, "next_block")
    config = CaseConfig(mode="convert", tokens=2, topk=256, num_reqs=1, blocks_per_req=4, block_size=16, seed=3)
    plain = run_case(config, oob, "new", device="cpu", memcheck=True).a.memcheck
    result = run_case(config, oob, "new", device="cpu", memcheck=True, schedule=lambda: interpreter_schedule("reversed"))
    flipped = result.a.memcheck
    assert plain.bad_elements == flipped.bad_elements > 0 and plain.bad_rows == flipped.bad_rows == {0, 1}
    # Reversed, the last program runs first: the first finding is in the last row.
    assert plain.findings[0].row == 0 and flipped.findings[0].row == 1
    for f in flipped.findings:
        assert int(result.inputs.token_indices[f.row, f.col]) // config.block_size == config.blocks_per_req - 1


def test_many_bad_lanes_are_all_counted_and_grouped_by_nearest_tensor():
    t = torch.zeros(8, dtype=torch.int32)
    u = torch.zeros(8, dtype=torch.int32)
    s = _session(t_ptr=t, u_ptr=u)
    n = 100_000
    below_both = min(t.data_ptr(), u.data_ptr()) - 4096 - 4 * (np.arange(n) % 16)
    programs = np.zeros((n, 3), dtype=np.int64)
    programs[:, 0] = np.arange(n) % 7
    s.access("store", below_both, np.ones(n, dtype=bool), programs, itemsize=4)
    r = s.report
    assert r.bad_elements == n and r.bad_rows == set(range(7)) and len(r.findings) == memcheck.DETAILED_FINDINGS
    assert r.bad_by_group == {("store", "k", "t" if t.data_ptr() < u.data_ptr() else "u"): n}


def test_a_launch_without_tensors_reports_every_access():
    s = memcheck.Session("impl")
    s.begin_launch("k", {"n": 3})
    s.access("load", np.array([1234]), np.array([True]), np.zeros((1, 3), dtype=np.int64), itemsize=4)
    assert s.report.bad_elements == 1 and "no tensor argument" in s.report.findings[0].describe()


@cpu_only
def test_out_of_bounds_lanes_are_masked_off_before_the_access_runs():
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    class RecordingBuilder:
        grid_idx = (2, 1, 0)

        def __init__(self):
            self.seen = []

        def create_masked_load(self, ptrs, mask, other, *rest):
            self.seen.append(mask.data.tolist())

        create_masked_store = create_atomic_rmw = create_atomic_cas = None

    t = torch.zeros(4, dtype=torch.int32)
    s = _session(t_ptr=t)
    builder = RecordingBuilder()
    load = memcheck._builder_hooks(builder, s)["create_masked_load"]
    pointer = tl.pointer_type(tl.int32)
    inside, past = t.data_ptr() + 12, t.data_ptr() + 16
    both = TensorHandle(np.array([inside, past], dtype=np.uint64), pointer)
    load(both, TensorHandle(np.array([True, True]), tl.int1), None, None, None, False)
    load(TensorHandle(np.array([past], dtype=np.uint64), pointer), TensorHandle(np.array([True]), tl.int1), None, None, None, False)
    load(TensorHandle(np.array([inside], dtype=np.uint64), pointer), TensorHandle(np.array([True]), tl.int1), None, None, None, False)
    assert builder.seen == [[True, False], [False], [True]]
    assert s.report.bad_elements == 2 and s.report.findings[0].program == (2, 1, 0)
    assert s.report.findings[0].col == 1 * 2 + 1  # program_id 1 x width 2 + lane 1
