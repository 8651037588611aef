"""One timed cell: several variants of the remap on one case's inputs, gated, captured,
timed interleaved with the empty-kernel floor of each variant's grid, and verified.

A *variant* is anything that maps the case's inputs to ``(out, counts)``: an
implementation's public wrapper (old, new, old tiled with another BLOCK_N) or a direct
launch of a kernel with chosen constexprs and warps (the width scan). Each names the
grid and warps it launches, for its floor, and its order contract, for the judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch

from remap_ab.bench import cold_l2
from remap_ab.bench.gate import judge
from remap_ab.bench.timing import Timing, capture, floor_fn, time_graphs
from remap_ab.errors import exception_line
from remap_ab.status import CellStatus
from remap_ab.subjects.remap import registry
from remap_ab.subjects.remap.compare import OrderContract, Output
from remap_ab.subjects.remap.config import CaseConfig
from remap_ab.subjects.remap.inputs import CaseInputs
from remap_ab.subjects.remap.runner import poisoned_empty, reference


@dataclass
class TimedVariant:
    name: str
    call: Callable[[CaseInputs], tuple]  # inputs -> (out, counts or None)
    contract: OrderContract
    grid: tuple
    warps: int
    # (out, counts) from what ``call`` returned, applied outside the timed graph (the
    # contention control sums its per-tile slots after the call); None: as returned.
    finish: Optional[Callable[[tuple], tuple]] = None

    def outputs(self, result) -> tuple:
        return result if self.finish is None else self.finish(result)


def wrapper_variant(impl: registry.Implementation, config: CaseConfig, name: Optional[str] = None) -> TimedVariant:
    """An implementation's public wrapper on ``config`` (its BLOCK_N is the config's)."""
    _, _, tiles, warps = impl.tiling(config)
    return TimedVariant(name or impl.name, lambda x: impl(config, x), impl.order_contract(config),
                        (config.tokens, tiles), warps)


@dataclass
class CellResult:
    config: CaseConfig
    names: list
    status: CellStatus = CellStatus.TIMED
    why: str = ""
    times: dict = field(default_factory=dict)  # variant name -> Timing (warm L2)
    floors: dict = field(default_factory=dict)  # variant name -> Timing of its grid's empty kernel
    cold: dict = field(default_factory=dict)  # variant name -> Timing (rotating inputs)
    cold_sets: int = 0
    cold_footprint_over_l2: float = float("nan")
    shapes: dict = field(default_factory=dict)  # variant name -> (grid, warps)
    verified_in_graph: Optional[bool] = None

    def us(self, name: str, which: str = "warm") -> float:
        t = {"warm": self.times, "floor": self.floors, "cold": self.cold}[which].get(name)
        return t.median if t else float("nan")


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


def measure_cell(
    config: CaseConfig,
    inputs: CaseInputs,
    variants: Sequence[TimedVariant],
    *,
    calls: int,
    repeats: int,
    cold: bool = False,
    floors: bool = True,
) -> CellResult:
    """Gate, capture (warm, floors, and with ``cold`` rotating copies), time
    interleaved, verify the graphs' last outputs."""
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must differ: {names}")
    cell = CellResult(config, names)
    why = gate(config, inputs, variants)
    if why:
        cell.status, cell.why = CellStatus.REFUSED, why
        return cell

    try:
        graphs, results = {}, {}
        for v in variants:
            cell.shapes[v.name] = (tuple(v.grid), v.warps)
            graphs[("warm", v.name)], results[v.name] = _capture_call(lambda x=inputs, v=v: v.call(x), calls)
            if floors:
                graphs[("floor", v.name)] = (capture(floor_fn(tuple(v.grid), v.warps), calls)[0], calls)
        cold_results = {}
        if cold:
            per_set = cold_l2.input_bytes(inputs)
            l2 = cold_l2.l2_bytes()
            sets = cold_l2.sets_needed(per_set, l2)
            copies = cold_l2.rotating_inputs(inputs, sets)
            cell.cold_sets = sets
            cell.cold_footprint_over_l2 = cold_l2.footprint_over_l2(per_set, sets, l2)
            cold_calls = max(calls, sets)
            for v in variants:
                graph, cold_results[v.name] = _capture_call(cold_l2.rotating_call(v.call, copies), cold_calls)
                graphs[("cold", v.name)] = graph
        timed = time_graphs({k: g for k, g in graphs.items()}, repeats)
        for (which, name), t in timed.items():
            {"warm": cell.times, "floor": cell.floors, "cold": cell.cold}[which][name] = t
    except Exception as exc:  # a capture or replay that fails costs this cell, not the run
        cell.status, cell.why = CellStatus.ERROR, f"timing failed: {exception_line(exc)[:300]}"
        return cell

    after = gate(config, inputs, variants, outputs=results)
    if after is None and cold_results:
        after = gate(config, inputs, variants, outputs=cold_results)  # every copy equals the gated inputs
    cell.verified_in_graph = after is None
    if after:
        cell.why = f"graph outputs fail the oracle after timing: {after}"
    return cell


def _capture_call(fn, calls):
    """(graph, calls) and the last call's (out, counts). Not poisoned: the fill kernels
    poisoning adds would be captured and timed; the eager gate ran poisoned."""
    graph, result = capture(fn, calls)
    return (graph, calls), result


def above_floor(cell: CellResult, name: str, which: str = "warm") -> float:
    return cell.us(name, which) - cell.us(name, "floor")


def timing_samples(cell: CellResult) -> dict:
    out = {}
    for which, d in (("warm", cell.times), ("floor", cell.floors), ("cold", cell.cold)):
        for name, t in d.items():
            out[f"{which}:{name}"] = list(t.samples)
    return out


__all__ = ["TimedVariant", "CellResult", "wrapper_variant", "measure_cell", "gate", "above_floor", "timing_samples", "Timing"]
