"""The fused kernel's seeded mutants (remap_ab/subjects/topology/mutants.toml): each
is killed, by its witness grid case differing from the oracle or by a rejection
that no longer raises; the missing barrier, which no plain run shows, by its witness
under relaxed stores (remap_ab/interpreter/barriers.py) on the CPU."""

from __future__ import annotations

import pytest
import torch

from kernels_topology import fused
from remap_ab import runtime
from remap_ab.subjects.topology import calls, check, grid, mutants, rejections
from remap_ab.subjects.topology.inputs import generate

DEVICE = runtime.current()
MUTANTS = mutants.mutants()
GPU_REPEATS = 50  # a race may show in few runs: the missing-barrier witness runs this often


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("topology_mutants")
    return {m.id: mutants.materialize(m, folder) for m in MUTANTS}


def test_catalogue_declares_the_issue_mutants_and_every_edit_applies():
    ids = {m.id for m in MUTANTS}
    assert len(ids) == len(MUTANTS) >= 6
    assert {"missing_barrier", "edge_rounded_down", "occupancy_kept_prefix", "budget_off_by_one", "no_segment_cap",
            "int32_shift"} <= ids
    source = mutants.TARGET.read_text()
    for m in MUTANTS:
        assert mutants.mutated_source(m) != source, m.id


def test_an_edit_that_no_longer_applies_is_refused():
    m = MUTANTS[1]
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.mutated_source(m, source="# a refactored kernel\n")


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.caught_by == "output"], ids=lambda m: m.id)
def test_output_mutant_is_killed_on_its_grid_witness(built, mutant):
    case = mutant.witness_case
    assert case in grid.cases(), f"{mutant.id}'s witness must be a grid case, so the grid kills it"
    if mutant.needs_gpu and DEVICE != "cuda":
        pytest.skip(f"needs a GPU: {mutant.needs_gpu}")
    assert check.check_case(case, DEVICE).equal, "the real kernel must pass the witness case"
    if mutant.schedule:
        if DEVICE != "cpu":
            pytest.skip(f"{mutant.schedule} is a CPU interpreter schedule (the command runs it in a CPU child)")
        from remap_ab.interpreter.barriers import relaxed_stores

        inputs = generate(case, DEVICE)
        want = calls.call("a", inputs, case)
        assert torch.equal(calls.call_module(built[mutant.id], inputs, case), want), "no plain run shows it"
        with relaxed_stores():
            assert torch.equal(calls.call_module(fused, inputs, case), want), "the real kernel holds under the schedule"
            assert not torch.equal(calls.call_module(built[mutant.id], inputs, case), want), mutant.schedule_why
        return
    if mutant.needs_gpu:
        # A race: the same launch again and again against A's result (equal to the
        # oracle's, just checked), without the oracle's minutes per run.
        inputs = generate(case, DEVICE)
        want = calls.call("a", inputs, case)
        for _ in range(GPU_REPEATS):
            if not torch.equal(calls.call_module(built[mutant.id], inputs, case), want):
                return
        pytest.xfail(f"{mutant.id} not observed in {GPU_REPEATS} runs of its witness on {DEVICE} ({mutant.needs_gpu})")
    result = check.check_case(case, DEVICE, b_module=built[mutant.id])
    assert any(side == "b" for side, _ in result.mismatches), f"{mutant.id} survives its witness case:\n" + "\n".join(result.lines())


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.caught_by == "rejection"], ids=lambda m: m.id)
def test_rejection_mutant_is_killed_by_its_rejection(built, mutant):
    by_id = {r.id: r for r in rejections.rejections()}
    rejection = by_id[mutant.witness_rejection]
    assert rejections.check(fused, rejection, DEVICE) is None
    problem = rejections.check(built[mutant.id], rejection, DEVICE)
    assert problem is not None and "accepted" in problem
