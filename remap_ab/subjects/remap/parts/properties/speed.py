"""B is not slower than A beyond noise: ``remap-ab bench``'s speed gate
(remap_ab/speed.py) on the bench's pr cells, through pytest.

Off unless ``--remap-fail-slower PCT`` (env ``REMAP_AB_FAIL_SLOWER``) is given. Speed is
judged on a GPU only: on the CPU every cell is skipped, saying so.
"""

import pytest
import torch

from remap_ab.speed import judge_speed
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import pr_table

# The bench's pr cells: every path at every row count of the call envelope (to 16384).
CELLS = pr_table.bench_cases((512, 2048), envelope.load().rows)
CALLS, REPEATS = 100, 20


@pytest.mark.parametrize("config", CELLS, ids=lambda c: f"{pr_table.path_of(c)}-K{c.topk}-T{c.tokens}")
def test_b_is_not_slower_than_a_beyond_noise(impl_names, remap_fail_slower, config):
    if not torch.cuda.is_available():
        pytest.skip("speed is not judged on the CPU (the Triton interpreter's times say nothing about a GPU's)")
    if remap_fail_slower is None:
        pytest.skip("the speed gate is off (--remap-fail-slower PCT turns it on)")
    a, b = impl_names
    cell = pr_table.bench_cell(config, registry.get(a), registry.get(b), calls=CALLS, repeats=REPEATS)
    assert cell.status == "timed", f"{config.case_id}: not timed: {cell.why}"
    j = judge_speed(cell.times["a"].samples, cell.times["b"].samples, fail_slower=remap_fail_slower)
    assert not j.slower, f"{pr_table.path_of(config)} K={config.topk} T={config.tokens}: {j.line(a, b)}"
