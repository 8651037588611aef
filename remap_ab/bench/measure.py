"""One timed cell, for any subject: several variants of a kernel on one input set,
gated, captured, timed interleaved with the empty-kernel floor of each variant's grid,
and verified.

A *variant* is anything that maps the input set to its outputs: an implementation's
public call or a direct launch of a kernel with chosen constexprs and warps. Each
names the grid and warps it launches, for its floor, and its contract, which only the
subject's gate reads. The gate (the subject's: ``gate(case, inputs, variants,
outputs=None)``, None when every variant agrees with the oracle, else the refusal
line) runs before capture, eagerly, and after timing on the outputs the graphs' last
calls wrote: nothing wrong is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from remap_ab.bench import cold_l2
from remap_ab.bench.timing import Timing, capture, floor_fn, time_graphs
from remap_ab.errors import exception_line
from remap_ab.status import CellStatus


@dataclass
class TimedVariant:
    name: str
    call: Callable[[Any], Any]  # inputs -> the variant's outputs
    contract: Any  # what the subject's gate needs to judge the outputs
    grid: tuple
    warps: int
    # The outputs from what ``call`` returned, applied outside the timed graph (a control
    # variant sums its per-tile slots after the call); None: as returned.
    finish: Optional[Callable[[Any], Any]] = None

    def outputs(self, result) -> Any:
        return result if self.finish is None else self.finish(result)


@dataclass
class CellResult:
    config: Any  # the subject's case
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


# (case, inputs, variants, outputs=None) -> None when every variant passes, else the refusal line.
Gate = Callable[..., Optional[str]]


def measure_cell(
    config: Any,
    inputs: cold_l2.HasTensors,
    variants: Sequence[TimedVariant],
    *,
    gate: Gate,
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
    """(graph, calls) and the last call's outputs. Not poisoned: the fill kernels
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


__all__ = ["TimedVariant", "CellResult", "Gate", "measure_cell", "above_floor", "timing_samples", "Timing"]
