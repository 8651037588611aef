"""The properties vLLM PR #47942 states, as checks (remap_ab/subjects/topology/
properties.py): each check is proven by a broken output; Hypothesis shrinks the
property that does not hold to its smallest counterexample; the bound the witnesses
do guarantee holds and is reached."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

from remap_ab.subjects.topology import oracle, properties
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import TopologyInputs, generate
from remap_ab.subjects.topology.properties import DOES_NOT_HOLD, PROPERTIES
from remap_ab.subjects.topology.strategies import explicit_cases

_SEARCH = settings(database=None, derandomize=True, max_examples=600, suppress_health_check=list(HealthCheck))


def _one_row(learned: list[int], length: int, segments: int, keep: int = 0, max_replacements: int = 64) -> tuple:
    case = TopologyCase(rows=1, topk=len(learned), segments=segments, keep=keep, max_replacements=min(max_replacements, 64),
                        explicit_learned=(tuple(learned),), explicit_lens=(length,))
    return case, generate(case)


def _names(findings) -> set[str]:
    return {f.property for f in findings}


def _witness_findings(case: TopologyCase) -> set[str]:
    inputs = generate(case)
    return _names(properties.check_witnesses(case, inputs, oracle.witnesses(inputs.learned, inputs.context_lens, case.segments)))


def test_every_property_is_named_and_stated():
    assert set(PROPERTIES) == {
        "witness_distinct", "witness_absent", "witness_below_length", "uncovered_run_pr", "uncovered_run_proved",
        "merge_keeps_prefix", "merge_no_new_duplicate", "fused_equals_pair",
    }
    assert set(DOES_NOT_HOLD) <= set(PROPERTIES)


def test_correct_outputs_give_no_finding():
    # L = 100, S = 4: segments [0,25) [25,50) [50,75) [75,100); 25 and 75 occupy two.
    case, inputs = _one_row([25, 75, -1, 25], 100, 4, keep=1, max_replacements=2)
    w = oracle.witnesses(inputs.learned, inputs.context_lens, 4)
    assert w.tolist() == [[0, -1, 50, -1]]
    merged = oracle.merge(inputs.learned, w, 1, 2)
    assert merged.tolist() == [[25, 0, 50, 25]]
    assert properties.check_witnesses(case, inputs, w) == []
    assert properties.check_merge(case, inputs, merged) == []
    assert properties.check_fused_equals_pair(merged, merged.clone()) == []


@pytest.mark.parametrize(
    "name, witnesses",
    [
        ("witness_distinct", [[0, 0, 50, -1]]),
        ("witness_absent", [[0, -1, 75, -1]]),  # 75 is a learned entry
        ("witness_below_length", [[0, -1, 100, -1]]),  # L = 100
        ("uncovered_run_proved", [[-1, -1, -1, -1]]),  # segments 0 and 2 unoccupied and unwitnessed
    ],
)
def test_each_witness_check_catches_a_broken_output(name, witnesses):
    case, inputs = _one_row([25, 75, -1, 25], 100, 4)
    findings = properties.check_witnesses(case, inputs, torch.tensor(witnesses, dtype=torch.int32))
    assert name in _names(findings), findings
    assert all(f.row == 0 and f.rows == 1 for f in findings if f.property == name)


def test_each_merge_check_catches_a_broken_output():
    case, inputs = _one_row([25, 75, -1, 25], 100, 4, keep=1, max_replacements=2)
    prefix_changed = torch.tensor([[26, 0, 50, 25]], dtype=torch.int32)
    assert "merge_keeps_prefix" in _names(properties.check_merge(case, inputs, prefix_changed))
    new_duplicate = torch.tensor([[25, 0, 0, 25]], dtype=torch.int32)  # 0 twice; 25 twice is the learned row's own
    found = properties.check_merge(case, inputs, new_duplicate)
    assert _names(found) == {"merge_no_new_duplicate"} and "value 0 occurs 2 times" in found[0].detail
    third_25 = torch.tensor([[25, 25, 50, 25]], dtype=torch.int32)
    assert "merge_no_new_duplicate" in _names(properties.check_merge(case, inputs, third_25))
    good = torch.tensor([[25, 0, 50, 25]], dtype=torch.int32)
    bad = good.clone()
    bad[0, 2] = 51
    found = properties.check_fused_equals_pair(good, bad)
    assert _names(found) == {"fused_equals_pair"} and "column 2: pair 50, fused 51" in found[0].detail


def test_uncovered_run_pr_check_catches_its_counterexample():
    case, inputs = _one_row([4], 5, 2)
    w = oracle.witnesses(inputs.learned, inputs.context_lens, 2)
    assert w.tolist() == [[0, -1]]
    assert properties.uncovered_runs(inputs.learned, w, inputs.context_lens).tolist() == [3]
    assert _names(properties.check_witnesses(case, inputs, w)) == {"uncovered_run_pr"}


@pytest.mark.parametrize("past_end", [False, True], ids=["entries_below_L", "entries_past_L"])
def test_shrinking_finds_the_smallest_counterexample_of_the_pr_bound(past_end):
    # The PR: "bounds the uncovered run at context_len / num_segments tokens". Each
    # unoccupied segment's witness sits at its left edge, and an occupied segment's
    # entry may sit at its right end: two adjacent segments leave up to
    # len_s + len_{s+1} - 2 tokens uncovered, more than L / S once L > 4 (S = 2).
    found = find(explicit_cases(past_end=past_end), lambda c: "uncovered_run_pr" in _witness_findings(c), settings=_SEARCH)
    if past_end:  # the entry 3 >= L is clamped into the last segment, which then gets no witness
        assert (found.segments, found.explicit_lens, found.explicit_learned) == (2, (3,), ((3,),))
    else:
        assert (found.segments, found.explicit_lens, found.explicit_learned) == (2, (5,), ((4,),))
    assert found.replay_command().startswith("remap-ab replay --subject topology '")


@pytest.mark.parametrize("past_end, smallest_length", [(False, 5), (True, 3)], ids=["entries_below_L", "entries_past_L"])
def test_no_shorter_row_breaks_the_pr_bound(past_end, smallest_length):
    # Hypothesis' shrink is a local minimum; this makes it the global one: no row of
    # one or two entries with a shorter context breaks the L/S bound, for any S.
    for length in range(0, smallest_length):
        top = 2 * length + 2 if past_end else length - 1
        values = torch.arange(-1, top + 1, dtype=torch.int32)
        rows = torch.cat([torch.cartesian_prod(values, values), torch.stack([values, values], dim=1)])
        lens = torch.full((rows.shape[0],), length, dtype=torch.int32)
        for segments in range(1, 65):
            w = oracle.witnesses(rows, lens, segments)
            runs = properties.uncovered_runs(rows, w, lens)
            assert not bool((runs * segments > lens).any()), (length, segments)


def test_shrinking_finds_no_counterexample_of_the_properties_that_hold():
    # The witness and merge properties on the oracle's outputs (A and B equal it: the
    # A/B tests). The learned rows may hold duplicates, padding and entries >= L: the
    # merge keeps those, and a witness never equals any learned entry, so it adds none.
    holding = set(PROPERTIES) - set(DOES_NOT_HOLD) - {"fused_equals_pair"}

    def broken(case: TopologyCase) -> bool:
        inputs = generate(case)
        w = oracle.witnesses(inputs.learned, inputs.context_lens, case.segments)
        merged = oracle.merge(inputs.learned, w, case.keep, case.max_replacements)
        found = properties.check_witnesses(case, inputs, w) + properties.check_merge(case, inputs, merged)
        return bool(_names(found) & holding)

    with pytest.raises(NoSuchExample):
        find(explicit_cases(max_rows=2, max_length=200), broken, settings=_SEARCH)


@pytest.mark.parametrize("segments", [1, 2, 3, 4, 7])
def test_the_proved_bound_is_reached(segments):
    # Every row of L in 1..24 with two entries in [-1, L + 1]: the longest run never
    # passes the bound, and some row reaches it, for rows with entries < L only and
    # for rows with an entry >= L.
    for length in range(1, 25):
        values = torch.arange(-1, length + 2, dtype=torch.int32)
        pairs = torch.cartesian_prod(values, values)
        lens = torch.full((pairs.shape[0],), length, dtype=torch.int32)
        w = oracle.witnesses(pairs, lens, segments)
        runs = properties.uncovered_runs(pairs, w, lens)
        bound = properties.proved_run_bound(pairs, lens, segments)
        assert bool((runs <= bound).all()), (length, segments)
        past = (pairs >= length).any(dim=1)
        for kind in (past, ~past):
            assert int(runs[kind].max()) == int(bound[kind].max()), (length, segments, bool(kind[0]))


def test_proved_bound_closed_form():
    # docs/topology.md: at most 2 ceil(L/E) - 2 (entries < L), 2 ceil(L/E) - 1 (an entry >= L).
    lens = torch.arange(1, 3000, dtype=torch.int32)
    for segments in (1, 2, 5, 64):
        e = lens.to(torch.int64).clamp(max=segments)
        widest = (lens + e - 1) // e
        legal = properties.proved_run_bound(torch.full((len(lens), 1), -1, dtype=torch.int32), lens, segments)
        past = properties.proved_run_bound(lens[:, None] + 1, lens, segments)
        assert bool((legal <= torch.minimum(lens - 1, 2 * widest - 2)).all())
        assert bool((past <= torch.minimum(lens, 2 * widest - 1)).all())


def test_inputs_of_a_case_are_what_the_checks_read():
    inputs = TopologyInputs(learned=torch.tensor([[7]], dtype=torch.int32), context_lens=torch.tensor([0], dtype=torch.int32))
    case = TopologyCase(rows=1, topk=1, segments=3, keep=0, max_replacements=1)
    w = oracle.witnesses(inputs.learned, inputs.context_lens, 3)
    assert w.tolist() == [[-1, -1, -1]]  # L = 0: no segment exists
    assert properties.check_witnesses(case, inputs, w) == []
