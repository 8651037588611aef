"""The mutant catalogue stays in step with the kernels, and every mutant is observable.

These are the cheap guarantees (a few seconds): each edit still matches the kernel
source exactly once, each generated package imports under its own name and really is
the mutated code, each non-equivalent mutant's witness case changes an output of the
real kernel, and the declared-equivalent ones change nothing there. Whether the suite
*kills* every mutant is `remap-ab mutants` (run by CI), not this file.
"""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from remap_ab import mutants as M


@pytest.fixture(scope="module")
def mutant_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mutants")
    for m in M.CATALOGUE:
        M.materialize(m, root)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    yield root
    sys.path.remove(str(root))


def test_catalogue_is_large_covers_both_kernels_and_ids_are_unique():
    live = [m for m in M.CATALOGUE if not m.equivalent]
    assert len(live) >= 15
    assert {m.target for m in live} == {"old", "new"}
    assert len({m.id for m in M.CATALOGUE}) == len(M.CATALOGUE)
    for m in M.CATALOGUE:
        assert m.id.isidentifier() and m.description and m.edits, m.id


@pytest.mark.parametrize("m", M.CATALOGUE, ids=lambda m: m.id)
def test_every_edit_matches_the_kernel_exactly_once(m):
    src = M.kernel_source(m.target)
    for old, _ in m.edits:
        assert src.count(old) == 1, f"{m.id}: {old.strip()[:60]!r} matches {src.count(old)} times"
    assert M.mutated_source(m) != src


def test_an_edit_that_no_longer_matches_fails_loudly():
    m = M.get("blk_le_w")
    with pytest.raises(M.MutantError, match="exactly once but matches 0 times"):
        M.mutated_source(m, source=M.kernel_source("old").replace("blk < max_num_blocks_per_req", "blk < W"))
    with pytest.raises(M.MutantError, match="unknown mutant"):
        M.catalogue(["no_such_mutant"])


@pytest.mark.parametrize("m", M.CATALOGUE, ids=lambda m: m.id)
def test_generated_package_is_the_mutated_kernel_under_its_own_name(m, mutant_root):
    mod = importlib.import_module(m.package)
    impl = importlib.import_module(f"{m.package}._remap")
    assert impl.__file__.startswith(str(mutant_root))
    assert mod.triton_convert_req_index_to_global_index.__module__ == f"{m.package}._remap"
    text = open(impl.__file__).read()
    assert f"kernels_{m.target}" not in text.split('"""', 2)[-1]  # no import of the real package
    for _, new in m.edits:
        assert new in text


@pytest.mark.parametrize("m", M.CATALOGUE, ids=lambda m: m.id)
def test_mutant_changes_an_output_on_its_witness_case(m, mutant_root):
    w = M.compare_to_original(m, m.witness_config())
    if m.equivalent:
        assert w is None, f"{m.id} is declared equivalent but changes an output: {w.line()}"
    else:
        assert w is not None, f"{m.id}: its witness case shows no difference from the real kernel"


def test_test_order_puts_the_witness_path_first():
    tests = [
        "tests/test_properties_convert.py::test_convert_wrapper_matches_oracle",
        "tests/test_properties_dcp.py::test_dcp_in_place_matches_oracle",
        "tests/test_properties_dcp.py::test_dcp_compacted_matches_oracle",
    ]
    assert M.order_for(M.get("slot_base_dropped"), tests)[0].endswith("compacted_matches_oracle")
    assert M.order_for(M.get("remote_kept"), tests)[0].endswith("in_place_matches_oracle")
    assert M.order_for(M.get("blk_le_w"), tests) == tests


def _probe(tmp_path, records):
    p = tmp_path / "probe.jsonl"
    p.write_text("".join(json.dumps(dict(r, seq=i)) + "\n" for i, r in enumerate(records, 1)))
    return p


def test_probe_summary_counts_examples_to_the_first_failure(tmp_path):
    a, b = "t.py::test_a", "t.py::test_b"
    p = _probe(tmp_path, [
        {"kind": "start", "nodeid": a},
        *[{"kind": "example", "nodeid": a, "status": "passed", "how": "during generate phase"}] * 3,
        {"kind": "test", "nodeid": a, "outcome": "passed"},
        {"kind": "start", "nodeid": b},
        {"kind": "example", "nodeid": b, "status": "passed", "how": "explicit example"},
        {"kind": "example", "nodeid": b, "status": "gave_up", "how": "during generate phase"},
        {"kind": "example", "nodeid": b, "status": "passed", "how": "during generate phase"},
        {"kind": "example", "nodeid": b, "status": "failed", "how": "during generate phase"},
        {"kind": "test", "nodeid": b, "outcome": "failed", "message": "AssertionError: FAIL"},
    ])
    r = M.summarize_probe(p, 1, "")
    assert (r.status, r.killer, r.examples, r.examples_total, r.how) == ("killed", b, 3, 6, "generated")


def test_probe_summary_failing_regression_example_and_crash(tmp_path):
    a = "t.py::test_a"
    p = _probe(tmp_path, [
        {"kind": "start", "nodeid": a},
        {"kind": "example", "nodeid": a, "status": "gave_up", "how": "explicit example"},
        {"kind": "test", "nodeid": a, "outcome": "failed", "message": "boom"},
    ])
    r = M.summarize_probe(p, 1, "")
    assert (r.status, r.examples, r.how) == ("killed", 1, "regression @example")
    crash = M.summarize_probe(_probe(tmp_path, [{"kind": "start", "nodeid": a}]), -11, "Segmentation fault")
    assert (crash.status, crash.killer) == ("killed", a) and "signal 11" in crash.detail
    survived = M.summarize_probe(_probe(tmp_path, [{"kind": "test", "nodeid": a, "outcome": "passed"}]), 0, "")
    assert survived.status == "survived"


def test_list_command(capsys):
    from remap_ab.cli import main

    assert main(["mutants", "--list", "--only", "blk_le_w", "-v"]) == 0
    out = capsys.readouterr().out
    assert "blk_le_w" in out and "+    valid_block = (blk >= 0) & (blk <= max_num_blocks_per_req)" in out
