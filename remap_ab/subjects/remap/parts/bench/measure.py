"""The remap's timed cell: remap_ab/bench/measure.py's, with the remap's variants and its
gate (gate.py: the oracle's verdict).

A remap variant maps the case's inputs to ``(out, counts)``: an implementation's
public wrapper (old, new, old tiled with another BLOCK_N) or a direct launch of a
kernel with chosen constexprs and warps (the width scan); its contract is the order
contract the judge reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch

from remap_ab.bench import measure as timed
from remap_ab.bench.measure import CellResult, TimedVariant, above_floor, timing_samples
from remap_ab.errors import exception_line
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.compare import Output
from remap_ab.subjects.remap.judge.runner import poisoned_empty, reference
from remap_ab.subjects.remap.parts.bench.gate import judge


def wrapper_variant(impl: registry.Implementation, config: CaseConfig, name: Optional[str] = None) -> TimedVariant:
    """An implementation's public wrapper on ``config`` (its BLOCK_N is the config's)."""
    _, _, tiles, warps = impl.tiling(config)
    return TimedVariant(name or impl.name, lambda x: impl(config, x), impl.order_contract(config),
                        (config.tokens, tiles), warps)


def _run_eager(v: TimedVariant, inputs: CaseInputs) -> Output:
    try:
        with poisoned_empty():
            out, counts = v.outputs(v.call(inputs))
        torch.cuda.synchronize() if inputs.device.type == "cuda" else None
    except Exception as exc:  # a variant that raises is refused, not a crash of the bench
        return Output(v.name, None, None, v.contract, error=exception_line(exc)[:400])
    return Output(v.name, out, counts, v.contract)


def gate(config: CaseConfig, inputs: CaseInputs, variants: Sequence[TimedVariant], outputs=None) -> Optional[str]:
    """None when every variant's output on ``inputs`` passes the oracle (each judged
    beside the first), else the refusal line. ``outputs`` (name -> (out, counts)): judge
    those instead of running eagerly (the graphs' last results)."""
    ref = reference(config, inputs)
    outs = []
    for v in variants:
        if outputs is None:
            outs.append(_run_eager(v, inputs))
        else:
            out, counts = v.outputs(outputs[v.name])
            outs.append(Output(v.name, out, counts, v.contract))
    first = outs[0]
    for o in outs[1:] or [first]:
        verdict = judge(config, inputs, first, o, ref)
        if not verdict.passed:
            line = verdict.first.line() if verdict.first else verdict.status
            return f"refusing to time {first.name} vs {o.name} on case {config.case_id} ({config.cli_args()}): {line}"
    return None


def measure_cell(config: CaseConfig, inputs: CaseInputs, variants: Sequence[TimedVariant], *, calls: int, repeats: int,
                 cold: bool = False, floors: bool = True) -> CellResult:
    """remap_ab/bench/measure.py's cell, gated by the remap's oracle."""
    return timed.measure_cell(config, inputs, variants, gate=gate, calls=calls, repeats=repeats, cold=cold,
                              floors=floors)


__all__ = ["TimedVariant", "CellResult", "wrapper_variant", "measure_cell", "gate", "above_floor", "timing_samples"]
