"""Permuted interpreter schedules: the tiled compaction order moves, the single tile
does not, and every order stays admissible."""

import pytest
import torch

from remap_ab import runtime
from remap_ab.interpreter.schedule import interpreter_schedule, program_order
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.runner import run_case

pytestmark = pytest.mark.skipif(runtime.default_device() != "cpu", reason="schedules permute the CPU interpreter")


def test_program_orders_are_permutations():
    grid = (3, 4, 1)
    every = sorted(program_order("row_major", grid))
    for policy in ("reversed", "random", "tiles_reversed", "tiles_rotated"):
        order = program_order(policy, grid, seed=5)
        assert sorted(order) == every and order != program_order("row_major", grid)


def test_tiles_reversed_moves_old_and_not_new():
    config = CaseConfig(topk=1024, tokens=4, invalid_ratio=0.3, dcp_size=2)
    plain = run_case(config)
    flipped = run_case(config, schedule=lambda: interpreter_schedule("tiles_reversed"))
    assert plain.verdict.passed and flipped.verdict.passed
    assert torch.equal(plain.b.out, flipped.b.out)  # single tile: schedule-independent
    assert not torch.equal(plain.a.out, flipped.a.out)  # tiled: the segments moved
    assert torch.equal(plain.a.counts, flipped.a.counts)
