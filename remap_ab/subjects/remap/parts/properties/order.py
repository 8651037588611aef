"""Order and count properties stated on their own, independent of the comparator's
wording: a single-tile compaction is in column order, a row with at most one valid
tile is in column order on every path, and counts count the non-(-1) lanes."""

import torch
from hypothesis import given

from remap_ab.properties import profiles
from remap_ab.strategies import case_configs, regressions, single_tile_configs
from remap_ab.subjects.remap.judge.compare import tile_segments
from remap_ab.subjects.remap.parts.properties.support import assert_verdict_passes, fail, run


@given(config=single_tile_configs(modes=("dcp",), dcp_sizes=(4, 2), compact=True))
@regressions("k128_one_tile", "one_valid_tile", "single_token", "tokens_1024_gpu")
@profiles.settings_for(0.75)
def test_compacted_prefix_is_column_order_where_deterministic(impl_names, config):
    result = run(config, impl_names)
    assert_verdict_passes(result)
    ref = result.reference
    for side in (result.a, result.b):
        if side.contract.ordered:
            # The new kernel at power-of-two K: one program per row, stable compaction.
            bad = (side.out != ref.out).any(dim=1)
            why = side.contract.why
        else:
            # A tiled side has only one admissible order in rows where at most one
            # tile holds valid lanes (SPEC §7).
            lone = torch.tensor(
                [len(tile_segments(lanes, valid, side.contract.segment)) <= 1
                 for lanes, valid in zip(ref.lanes.tolist(), ref.valid.tolist())],
                dtype=torch.bool,
            )
            bad = lone.to(side.out.device) & (side.out != ref.out).any(dim=1)
            why = "at most one tile of the row holds valid lanes"
        if bool(bad.any()):
            row = int(torch.nonzero(bad)[0, 0])
            fail(result, f"{side.name}: compacted row {row} is not in column order ({why})")


@given(config=case_configs(counts=True, tables=("random",)))
@profiles.settings_for(0.75)
def test_counts_equal_the_lanes_that_are_not_minus_one(impl_names, config):
    # With a non-negative block table (and no int32 wrap) a valid lane is never -1,
    # so each side's counts must equal its own non-(-1) lanes, compacted or in place,
    # and the two sides' counts must agree exactly (integer sums are order-free).
    result = run(config, impl_names)
    assert_verdict_passes(result)
    a, b = result.a, result.b
    if not torch.equal(a.counts, b.counts):
        fail(result, f"counts differ between {a.name} and {b.name}")
    for side in (a, b):
        kept = (side.out != -1).sum(dim=1, dtype=torch.int32)
        if not torch.equal(kept, side.counts):
            row = int(torch.nonzero(kept != side.counts)[0, 0])
            fail(result, f"{side.name}: row {row} has {int(kept[row])} lanes that are not -1 but counts {int(side.counts[row])}")
        if config.compacts:
            cols = torch.arange(config.topk, device=side.out.device).view(1, -1)
            holes = (cols < side.counts.view(-1, 1)) & (side.out == -1)
            if bool(holes.any()):
                fail(result, f"{side.name}: a -1 inside the compacted prefix of row {int(torch.nonzero(holes.any(dim=1))[0, 0])}")
