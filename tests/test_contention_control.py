"""The contention control (remap_ab/subjects/remap/parts/bench/contention_control.py): derived from the old
kernel with its atomics replaced, it must give the old kernel's outputs (counts equal;
compaction in column order, one of the orders the old kernel may give) on the device
the kernels run on (the interpreter here, the GPU on a CUDA machine), and the bench's
gate must refuse a control that does not."""

from __future__ import annotations

import pytest
import torch

from remap_ab import runtime
from remap_ab.errors import InternalError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import contention, contention_control
from remap_ab.subjects.remap.parts.bench.measure import gate, wrapper_variant

CASES = {
    "counts": CaseConfig(mode="convert", topk=512, block_n=128, tokens=3, counts=True, seed=1),
    "dcp": CaseConfig(mode="dcp", topk=512, block_n=128, tokens=3, dcp_size=4, dcp_rank=1, compact=True, counts=True,
                      seed=2),
    "dcp-no-counts": CaseConfig(mode="dcp", topk=256, block_n=64, tokens=2, dcp_size=2, dcp_rank=0, compact=True,
                                counts=False, interleave=4, seed=3),
}


def _inputs(config: CaseConfig):
    """The case's inputs on the device this process runs kernels on: the control is
    launched as the bench launches it, so a CPU tensor cannot reach a CUDA kernel."""
    device = runtime.select(runtime.default_device())
    return generate_inputs(config, device)


def test_control_source_replaces_both_atomics_and_nothing_else():
    import importlib.util
    from pathlib import Path

    source = Path(importlib.util.find_spec("kernels_old._remap").origin).read_text()
    derived = contention_control.control_source(source)
    assert "atomic_add" not in derived.split("def _launch")[0]
    assert derived.count(f"tl.store({contention_control.SLOT}, n_valid)") == 1
    assert derived.count(f"slot_base = tl.load({contention_control.OFFSET})") == 1
    assert derived.count("slot_offsets_ptr,") == 1
    # Everything outside the three edited places is the old kernel's text.
    kept = [line for line in derived.splitlines() if "slot" not in line and "num_programs(1)" not in line]
    assert kept == [line for line in source.splitlines() if "atomic_add" not in line and "slot" not in line]


def test_control_source_refuses_a_kernel_without_the_atomics():
    with pytest.raises(InternalError, match="update"):
        contention_control.control_source("def k(valid_counts_ptr,):\n    pass\n")


@pytest.mark.parametrize("name", list(CASES))
def test_control_gives_the_old_kernels_outputs(name):
    config = CASES[name]
    inputs = _inputs(config)
    old = registry.get("old")
    control = contention_control.control_variant(config, inputs, config.block_n)
    out, counts = control.outputs(control.call(inputs))
    ref_out, ref_counts = old(config, inputs)
    if config.counts:
        assert torch.equal(counts, ref_counts)
    else:
        assert counts is None
    if config.compacts and out.device.type == "cuda":
        # On a GPU the old atomic hands out slots in the order the tiles arrive: each
        # row holds the same lanes, perhaps in another order (the gate below holds the
        # control to column order and the old kernel to its contract).
        assert torch.equal(out.sort(dim=1).values, ref_out.sort(dim=1).values)
    else:
        # The interpreter runs a row's tiles in order, so the old atomic hands out
        # slots in tile order too: the outputs are equal, lane for lane (and without
        # compaction there is no order to differ, on any device).
        assert torch.equal(out, ref_out)
    # And the bench's gate passes both, the control held to column order.
    assert control.contract.ordered
    assert gate(config, inputs, [wrapper_variant(old, config), control]) is None


def test_gate_refuses_a_control_whose_offsets_are_wrong(monkeypatch):
    config = CASES["dcp"]
    inputs = _inputs(config)
    monkeypatch.setattr(contention_control, "tile_offsets", lambda c, x, bn: torch.zeros(
        (x.token_indices.shape[0], c.topk // bn), dtype=torch.int32, device=x.token_indices.device))
    control = contention_control.control_variant(config, inputs, config.block_n)
    why = gate(config, inputs, [wrapper_variant(registry.get("old"), config), control])
    # Refused for the counts it gets wrong, not for a launch that raised.
    assert why is not None and "refusing to time" in why and "[counts] 4 tiles, control: valid count differs" in why


def test_gate_refuses_a_control_that_does_not_sum_its_slots():
    config = CASES["counts"]
    inputs = _inputs(config)
    control = contention_control.control_variant(config, inputs, config.block_n)
    broken = contention_control.TimedVariant(control.name, control.call, control.contract, control.grid, control.warps,
                                             finish=lambda r: (r[0], r[1][:, -1].contiguous()))
    why = gate(config, inputs, [wrapper_variant(registry.get("old"), config), broken])
    assert why is not None and "[counts] 4 tiles, control: valid count differs" in why


def test_contention_variants_put_each_control_beside_its_atomic_kernel():
    config = CaseConfig(mode="convert", topk=512, tokens=1, counts=True)
    inputs = _inputs(config)
    names = [v.name for v in contention.variants(config, (128, 256), registry.get("old"), registry.get("new"), inputs)]
    assert names == ["4 tiles", "4 tiles, control", "2 tiles", "2 tiles, control", "1 tile (new)"]


def test_cost_rows_and_conclusions():
    rows = []
    for tokens, (atomic, control) in {1: (2.0, 1.95), 4096: (40.0, 30.0)}.items():
        for name, us in (("16 tiles", atomic), ("16 tiles, control", control)):
            rows.append({"path": "counts", "tokens": tokens, "variant": name, "tiles": 16, "us": us, "status": "timed",
                         "verified_in_graph": True})
    costs = contention_control.cost_rows(rows)
    assert [round(c["contention_us"], 2) for c in costs] == [0.05, 10.0]
    text = contention_control.conclusions(costs)[0]
    assert "+0.05 µs at 1 token(s)" in text and "+10.00 µs (+25%) at 4096" in text
    assert "contention costs up to 10.00 µs" in text
    flat = [dict(r, us=1.0) for r in rows]
    assert "no measurable contention" in contention_control.conclusions(contention_control.cost_rows(flat))[0]
