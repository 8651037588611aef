"""Race properties, shown without a GPU: the Triton interpreter runs the programs of a
launch in permuted orders (remap_ab.interpreter.schedule), which is exactly the freedom a GPU
has in which tile wins a row's atomic first.

- the single-tile path's output never changes with the order;
- every tiled compacted row stays one of the admissible concatenations of its tile
  segments, whatever the order;
- and the tiled path really does produce different orders: under tiles-reversed each
  row's segments come out reversed, so the race is not a theoretical one.

Interpreter only: on a GPU the hardware picks the order (the other properties still
run there and accept any admissible one).
"""

import pytest
import torch
from hypothesis import event, given

from remap_ab.properties import profiles
from remap_ab.strategies import regressions, schedules, single_tile_configs, tiled_compaction_configs
from remap_ab.subjects.remap.judge.compare import is_segment_permutation, tile_segments
from remap_ab.subjects.remap.parts.properties.support import assert_verdict_passes, fail, on_interpreter, run

pytestmark = pytest.mark.skipif(not on_interpreter(), reason="program schedules need the Triton interpreter (no CUDA)")


@given(config=single_tile_configs(), schedule=schedules())
@regressions("k128_one_tile", "single_token", schedule=("random", 1))
@profiles.settings_for(0.5)
def test_single_tile_output_ignores_program_order(impl_names, config, schedule):
    baseline = run(config, impl_names, record=False)
    permuted = run(config, impl_names, schedule=schedule)
    assert_verdict_passes(baseline)
    assert_verdict_passes(permuted, schedule)
    for before, after in zip((baseline.a, baseline.b), (permuted.a, permuted.b)):
        # In place every side is deterministic; compacted, the sides promising column order are.
        if config.compacts and not after.contract.ordered:
            continue
        if not torch.equal(before.out, after.out):
            row = int(torch.nonzero((before.out != after.out).any(dim=1))[0, 0])
            fail(permuted, f"{after.name}: output changed with the program order ({after.contract.why}), first in row {row}", schedule)
        if config.counts and not torch.equal(before.counts, after.counts):
            fail(permuted, f"{after.name}: counts changed with the program order", schedule)


@given(config=tiled_compaction_configs(), schedule=schedules())
@profiles.settings_for(0.5)
def test_tiled_compaction_is_admissible_in_any_program_order(impl_names, config, schedule):
    result = run(config, impl_names, schedule=schedule)
    assert_verdict_passes(result, schedule)
    ref = result.reference
    for side in (result.a, result.b):
        segment = side.contract.segment if not side.contract.ordered else config.topk
        for row, (got, lanes, valid) in enumerate(zip(side.out.tolist(), ref.lanes.tolist(), ref.valid.tolist())):
            if not is_segment_permutation(got, lanes, valid, segment):
                fail(result, f"{side.name}: compacted row {row} is no concatenation of its {segment}-wide tile segments", schedule)


@given(config=tiled_compaction_configs())
@regressions("k384_tiled")
@profiles.settings_for(0.5)
def test_tiled_compaction_order_follows_the_program_order(impl_names, config):
    forward = run(config, impl_names, schedule=("row_major", 0))
    backward = run(config, impl_names, schedule=("tiles_reversed", 0), record=False)
    assert_verdict_passes(forward, ("row_major", 0))
    assert_verdict_passes(backward, ("tiles_reversed", 0))
    ref = forward.reference
    for fwd, bwd in zip((forward.a, forward.b), (backward.a, backward.b)):
        if fwd.contract.ordered:
            if not torch.equal(fwd.out, bwd.out):
                fail(backward, f"{bwd.name}: promises column order ({bwd.contract.why}) but the program order changed it",
                     ("tiles_reversed", 0))
            continue
        # A tiled side writes each tile at the slot its atomic returned, so the
        # schedule decides the row: tile order forward, reversed backward.
        several_orders = False
        for row, (lanes, valid) in enumerate(zip(ref.lanes.tolist(), ref.valid.tolist())):
            segs = tile_segments(lanes, valid, fwd.contract.segment)
            want_fwd = [v for s in segs for v in s]
            want_bwd = [v for s in reversed(segs) for v in s]
            n = len(want_fwd)
            if fwd.out[row, :n].tolist() != want_fwd:
                fail(forward, f"{fwd.name}: row {row} under row-major programs is not in tile order", ("row_major", 0))
            if bwd.out[row, :n].tolist() != want_bwd:
                fail(backward, f"{bwd.name}: row {row} under tiles-reversed programs is not in reversed tile order",
                     ("tiles_reversed", 0))
            several_orders |= want_fwd != want_bwd
        # The race is real: two schedules, two different outputs, whenever a row has
        # two tiles with different valid lanes.
        event(f"orders across row-major / tiles-reversed: {2 if several_orders else 1}")
        if several_orders == torch.equal(fwd.out, bwd.out):
            fail(backward, f"{fwd.name}: expected {'two' if several_orders else 'one'} distinct orders across schedules",
                 ("tiles_reversed", 0))
