"""Every row of SPEC §6's table, old ≡ new ≡ oracle on the CPU interpreter.

The grid is declared as data: each entry names the path it exercises."""

import pytest

from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.runner import run_case

# (path, configuration overrides). Token counts stay small: the old kernel runs
# K / BLOCK_N interpreted programs per row.
PATHS = [
    ("convert, no counts", dict(mode="convert", counts=False, topk=512)),
    ("convert, counts, K pow2 (new: single tile)", dict(mode="convert", counts=True, topk=2048, tokens=3)),
    ("convert, counts, K=384 (tiled in both)", dict(mode="convert", counts=True, topk=384)),
    ("convert, counts, K=128 (one tile in both)", dict(mode="convert", counts=True, topk=128, tokens=8)),
    ("convert, prefill workspace, counts", dict(mode="convert", prefill_fraction=0.5, topk=512, tokens=6)),
    ("convert, prefill workspace, no counts", dict(mode="convert", prefill_fraction=1.0, counts=False, topk=256)),
    ("convert, prefill, K=384", dict(mode="convert", prefill_fraction=0.5, topk=384, out_of_range=0.2)),
    ("dcp size 1 delegates (compaction ignored)", dict(dcp_size=1, compact=True, counts=True, topk=512)),
    ("dcp size 1, no counts", dict(dcp_size=1, counts=False, interleave=64, topk=256)),
    ("dcp 2, compact, counts", dict(dcp_size=2, dcp_rank=1, topk=1024)),
    ("dcp 4, compact, no counts (counted and dropped)", dict(dcp_size=4, dcp_rank=3, counts=False, topk=512)),
    ("dcp 4, in place, counts", dict(dcp_size=4, dcp_rank=2, compact=False, counts=True, topk=512)),
    ("dcp 4, in place, no counts", dict(dcp_size=4, dcp_rank=1, compact=False, counts=False, topk=2048, tokens=2)),
    ("dcp 4, interleave 64, compact", dict(dcp_size=4, dcp_rank=1, interleave=64, topk=512)),
    ("dcp 2, interleave 16, compact, K=384", dict(dcp_size=2, dcp_rank=0, interleave=16, topk=384)),
    ("dcp 4, compact, K=128", dict(dcp_size=4, dcp_rank=0, topk=128, tokens=8)),
    ("dcp 4, compact, K=2048", dict(dcp_size=4, dcp_rank=2, topk=2048, tokens=3)),
    ("dcp 8, compact, BLOCK_N=64", dict(dcp_size=8, dcp_rank=5, topk=256, block_n=64, block_size=16)),
]


@pytest.mark.parametrize("path,overrides", PATHS, ids=[p for p, _ in PATHS])
def test_path_old_new_oracle_agree(path, overrides, impl_names):
    config = CaseConfig(**{"tokens": 4, **overrides})
    result = run_case(config, *impl_names)
    assert result.verdict.passed, result.verdict.describe()
    # The case must really exercise something: some valid and some invalid lanes.
    assert 0 < int(result.reference.valid.sum()) < result.reference.valid.numel()


def test_counts_absent_unless_requested():
    config = CaseConfig(dcp_size=4, counts=False, topk=256)
    result = run_case(config)
    assert result.a.counts is None and result.b.counts is None


def test_new_tiling_rule():
    from kernels_new import _remap_tiling

    assert _remap_tiling(2048, 128, True) == (True, 2048, 1, 8)
    assert _remap_tiling(128, 128, True) == (True, 128, 1, 8)
    assert _remap_tiling(384, 128, True) == (False, 128, 3, 4)
    # Without counting the new kernel keeps the tiled launch, even at a power of two.
    assert _remap_tiling(2048, 128, False) == (False, 128, 16, 4)


def test_order_contracts_follow_tiling():
    from remap_ab.subjects.remap.judge import registry
    old, new = registry.get("old"), registry.get("new")
    pow2 = CaseConfig(topk=2048)
    assert not old.order_contract(pow2).ordered and new.order_contract(pow2).ordered
    k384 = CaseConfig(topk=384)
    assert not old.order_contract(k384).ordered and not new.order_contract(k384).ordered
    k128 = CaseConfig(topk=128)
    assert old.order_contract(k128).ordered and new.order_contract(k128).ordered
