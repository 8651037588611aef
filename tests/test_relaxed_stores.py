"""Relaxed stores (remap_ab/interpreter/barriers.py): a program's stores between barriers
land last-issued first, so a kernel that needs a barrier between two stores to one
address shows it on the CPU, and one that has it does not; Triton's builder and executor
are as they were after the block; the topology's missing_barrier mutant is killed by it,
in this process and in the CPU child a GPU run uses."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from remap_ab import runtime
from remap_ab.interpreter.barriers import relaxed_stores
from remap_ab.status import Outcome
from remap_ab.subjects.topology import mutants

pytestmark = pytest.mark.skipif(runtime.default_device() != "cpu", reason="a schedule of the CPU interpreter")


@triton.jit
def _overwrite(out_ptr, BARRIER: tl.constexpr):
    cols = tl.arange(0, 8)
    tl.store(out_ptr + cols, cols)  # every column
    if BARRIER:
        tl.debug_barrier()
    tl.store(out_ptr + cols, cols + 100, mask=cols < 4)  # the first four again, later


def _run(barrier: bool) -> list[int]:
    out = torch.zeros(8, dtype=torch.int32)
    _overwrite[(2,)](out, BARRIER=barrier)
    return out.tolist()


def test_a_missing_barrier_lets_the_earlier_store_win_and_a_barrier_orders_them():
    runtime.select("cpu")
    after = [100, 101, 102, 103, 4, 5, 6, 7]
    assert _run(False) == _run(True) == after  # the interpreter's own order, either way
    with relaxed_stores():
        assert _run(True) == after
        assert _run(False) == list(range(8))  # the first store landed last: the overwrite lost


def test_triton_is_as_it_was_after_the_block():
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    before = dict(vars(builder))
    owner = next(c for c in interpreter.GridExecutor.__mro__ if "_restore_args_dev" in vars(c))
    restore = vars(owner)["_restore_args_dev"]
    with relaxed_stores():
        pass
    assert dict(vars(builder)).keys() == before.keys() and vars(owner)["_restore_args_dev"] is restore
    with pytest.raises(RuntimeError), relaxed_stores():
        raise RuntimeError("inside")
    assert dict(vars(builder)).keys() == before.keys() and vars(owner)["_restore_args_dev"] is restore


@pytest.mark.parametrize("in_a_child", [False, True], ids=["here", "cpu-child"])
def test_the_topology_missing_barrier_is_killed_by_relaxed_stores(tmp_path, in_a_child):
    runtime.select("cpu")
    mutant = {m.id: m for m in mutants.mutants()}["missing_barrier"]
    path = str(mutants.write(mutant, tmp_path))
    run = mutants._scheduled_in_a_cpu_child if in_a_child else mutants._scheduled
    verdict, detail = run(mutant.schedule, path, mutant.witness_case)
    assert verdict == Outcome.KILLED.value, detail
    assert "it differs from A, where the real kernel equals A" in detail
    # The real kernel as the "mutant": it survives the same schedule (no false kill).
    verdict, detail = mutants._scheduled(mutant.schedule, str(mutants.TARGET), mutant.witness_case)
    assert verdict == Outcome.SURVIVED.value, detail
