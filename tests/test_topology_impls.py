"""The topology subject's A/B: the torch pair (A) and the fused Triton kernel (B, on
the CPU in Triton's interpreter, never the torch fallback) against the per-row
oracle, on the grid's cases and on Hypothesis-drawn ones; the rejections; the inputs."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from hypothesis import given

from kernels_topology import fused, torch_pair
from remap_ab import runtime
from remap_ab.properties import profiles
from remap_ab.subjects.topology import calls, check, grid, rejections
from remap_ab.subjects.topology.config import LEARNED_PATTERNS, LENGTH_CLASSES, TopologyCase
from remap_ab.subjects.topology.inputs import generate
from remap_ab.subjects.topology.properties import DOES_NOT_HOLD
from remap_ab.subjects.topology.strategies import cases

DEVICE = runtime.current()


def _pairwise(cases) -> list:
    """The cases, in order, that first bring some pair of axis values together: every
    value of every axis meets every value of every other one, in fewer cases than the
    grid (about 180 of its ~300 CPU cases). The whole grid runs in
    ``remap-ab sweep --subject topology``."""
    seen: set = set()
    kept = []
    for case in cases:
        pairs = set(itertools.combinations([(axis, getattr(case, axis)) for axis in grid.AXES], 2))
        if not pairs <= seen:
            kept.append(case)
            seen |= pairs
    return kept


GRID = _pairwise(grid.cases() if DEVICE == "cuda" else grid.cpu_cases())


def _assert_agrees(case: TopologyCase) -> None:
    result = check.check_case(case, DEVICE)
    unexpected = [f for _, f in result.findings if f.property not in DOES_NOT_HOLD]
    assert result.equal and not unexpected, "\n".join(result.lines())


@pytest.mark.parametrize("case", GRID, ids=lambda c: c.key())
def test_grid_case_a_and_b_equal_the_oracle(case):
    _assert_agrees(case)


@given(case=cases())
@profiles.settings_for(0.5)
def test_drawn_case_a_and_b_equal_the_oracle(case):
    _assert_agrees(case)


def test_b_runs_the_kernel_not_the_fallback(monkeypatch):
    # On the CPU the entry point falls back to the torch pair unless forced: the A/B
    # must force it, or B would be A.
    case = TopologyCase(rows=2, topk=8, segments=4, keep=2, max_replacements=3, learned="clustered")
    inputs = generate(case, DEVICE)
    launched = []
    real = fused._topology_witness_merge_kernel

    class Spy:
        def __getitem__(self, grid_shape):
            launched.append(grid_shape)
            return real[grid_shape]

    monkeypatch.setattr(fused, "_topology_witness_merge_kernel", Spy())
    calls.call("b", inputs, case)
    assert launched == [(2,)]
    assert fused.FORCE_KERNEL is False  # kernel_forced restored the flag
    if DEVICE == "cpu":
        fused.fused_topology_witness_merge(inputs.learned, inputs.context_lens, 4, 2, 3)
        assert launched == [(2,)], "unforced, the CPU call must fall back to the torch pair"


def test_rows_without_context_get_no_witness():
    # L <= 0 (0, or a negative length): no segment exists, whatever the row holds.
    case = TopologyCase(rows=3, topk=3, segments=4, keep=0, max_replacements=3,
                        explicit_learned=((0, 5, -1), (-1, -1, -1), (7, 7, 2)), explicit_lens=(0, -5, -2147483648))
    result = check.check_case(case, DEVICE)
    assert result.equal and not result.findings, "\n".join(result.lines())
    inputs = generate(case, DEVICE)
    assert calls.witnesses("a", inputs, case).eq(-1).all()
    assert torch.equal(calls.call("b", inputs, case), inputs.learned)


def test_budget_zero_returns_a_copy():
    case = TopologyCase(rows=3, topk=8, segments=4, keep=8, max_replacements=5)
    inputs = generate(case, DEVICE)
    for side in ("a", "b"):
        out = calls.call(side, inputs, case)
        assert torch.equal(out, inputs.learned) and out.data_ptr() != inputs.learned.data_ptr()


@pytest.mark.parametrize("rejection", rejections.rejections(), ids=lambda r: r.id)
def test_every_rejection_raises_its_value_error(rejection):
    assert rejections.check(torch_pair, rejection, DEVICE) is None
    assert rejections.check(fused, rejection, DEVICE) is None
    with fused.kernel_forced():
        assert rejections.check(fused, rejection, DEVICE) is None


def test_rejection_check_catches_a_call_that_is_accepted_or_misworded():
    class Lenient:
        @staticmethod
        def fused_topology_witness_merge(learned, *args):
            return learned

    class Misworded:
        @staticmethod
        def fused_topology_witness_merge(*args):
            raise ValueError("bad")

    r = rejections.rejections()[0]
    assert "accepted" in (rejections.check(Lenient, r) or "")
    assert "does not match" in (rejections.check(Misworded, r) or "")


def test_the_pair_functions_have_no_segment_cap():
    # S <= 64 is the fused entry point's limit (one int64 mask), not the torch pair's.
    learned = torch.tensor([[3, -1]], dtype=torch.int32)
    lens = torch.tensor([100], dtype=torch.int32)
    w = torch_pair.topology_witnesses(learned, lens, 65)
    assert w.shape == (1, 65) and int((w >= 0).sum()) == 64
    with pytest.raises(ValueError, match="num_segments must be at least 1"):
        torch_pair.topology_witnesses(learned, lens, 0)


def test_inputs_are_deterministic_and_seeded():
    case = TopologyCase(rows=5, topk=40, segments=16, keep=3, max_replacements=4, seed=7)
    one, two = generate(case), generate(case)
    assert torch.equal(one.learned, two.learned) and torch.equal(one.context_lens, two.context_lens)
    other = generate(dataclasses.replace(case, seed=8))
    assert not torch.equal(one.learned, other.learned)
    if DEVICE == "cuda":
        on_gpu = generate(case, "cuda")
        assert torch.equal(on_gpu.learned.cpu(), one.learned) and torch.equal(on_gpu.context_lens.cpu(), one.context_lens)


def test_learned_patterns_draw_what_they_name():
    base = TopologyCase(rows=64, topk=64, segments=8, keep=0, max_replacements=0, lens="above")
    by = {p: generate(dataclasses.replace(base, learned=p)) for p in LEARNED_PATTERNS}
    lens = by["valid"].context_lens.to(torch.int64)[:, None]
    assert bool(((by["valid"].learned >= 0) & (by["valid"].learned < lens)).all())
    assert bool((by["empty"].learned == -1).all())
    assert bool((by["beyond"].learned >= lens).any()) and bool((by["padded"].learned == -1).any())
    dense = by["dense"].learned
    assert all(len(set(r)) <= 4 for r in dense.tolist())  # four values per row: duplicates


def test_grid_covers_the_declared_domains():
    all_cases = grid.cases()
    assert 200 <= len(all_cases) <= 400
    assert {1, 16384} <= {c.rows for c in all_cases}
    assert {1, 2048, 2176} <= {c.topk for c in all_cases}
    assert {1, 2, 32, 33, 63, 64} <= {c.segments for c in all_cases}
    assert set(LENGTH_CLASSES) <= {c.lens for c in all_cases}
    assert set(LEARNED_PATTERNS) <= {c.learned for c in all_cases}
    assert any(c.keep == 0 for c in all_cases) and any(c.keep == c.topk for c in all_cases)
    assert any(c.budget == 0 for c in all_cases) and any(c.budget == c.topk - c.keep > c.segments for c in all_cases)
    assert len({c.key() for c in all_cases}) == len(all_cases)
    assert sum(c.rows for c in grid.cpu_cases()) < 1500  # the interpreter runs one program per row


def test_case_json_round_trips_and_bad_cases_are_refused():
    case = TopologyCase(rows=1, topk=2, segments=3, keep=1, max_replacements=1, explicit_learned=((4, -1),), explicit_lens=(9,))
    assert TopologyCase.from_json(case.to_json()) == case
    assert case.to_json() in case.replay_command()
    with pytest.raises(ValueError, match="segments must be in 1..64"):
        TopologyCase(rows=1, topk=2, segments=65, keep=0, max_replacements=0)
    with pytest.raises(ValueError, match="every explicit learned row"):
        TopologyCase(rows=1, topk=2, segments=3, keep=0, max_replacements=0, explicit_learned=((1,),), explicit_lens=(4,))
