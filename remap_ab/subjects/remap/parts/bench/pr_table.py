"""The pull request's table: old vs new, each timed inside a CUDA graph.

A graph holds ``calls`` back-to-back calls of an implementation's public wrapper
(its allocations, memsets and the Triton launch: what vLLM's decode graph replays);
one replay is timed with CUDA events and divided by ``calls``; ``repeats`` replays give
the median and the spread. Beside each implementation the *floor* is timed the same
way: an empty Triton kernel launched with that implementation's grid and warps, so
launch cost can be told apart from work and atomic contention (timing.py, measure.py).

Nothing is timed that is wrong: before timing, both implementations run eagerly on
the very input tensors the graphs will use and are judged against the oracle
(gate.py); a disagreeing pair is refused. After timing, the outputs the graphs' last
calls wrote are judged again.

Bandwidth counts the bytes a call must move at least, the same for old and new:
token_indices, req_id and the block table read once, out and the counts written once
(the old kernel's counts memset and compaction's -1 prefill are extra work, not
counted). Warm, the inputs stay in L2 across a graph's calls (as in the pull request's
benchmark, presumably), so an "achieved bandwidth" near or above the HBM peak means L2
hits; ``cold`` adds the same cells with rotating input copies (cold_l2.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from remap_ab.bench.timing import Timing, capture, empty_kernel, replay_us  # noqa: F401 (re-exported)
from remap_ab.errors import ConfigError, NeedsGPUError
from remap_ab.status import CellStatus
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench.gate import agreement_gate, judge_on_cpu  # noqa: F401 (public here since the first bench)
from remap_ab.subjects.remap.parts.bench.measure import CellResult, measure_cell, wrapper_variant

# vLLM #50365's published GB200 figures, counts path, µs per call: (K, tokens) -> (old, new).
PR_GB200_US = {
    (512, 1): (2.50, 1.67),
    (512, 256): (4.06, 1.84),
    (512, 1024): (5.50, 2.54),
    (2048, 1): (3.02, 1.83),
    (2048, 256): (5.65, 2.20),
    (2048, 1024): (12.22, 3.84),
}
H200_HBM_PEAK_BYTES_PER_S = 4.8e12  # datasheet figure
# The paths the pr cells (and so the speed gate) time, with the CaseConfig fields of
# each: the PR's two (counts: plain convert with return_valid_counts, the call pattern
# A; dcp: DCP 4 compaction, D), and the other call patterns of vLLM's backends (C the
# plain convert without counts: the tiled path; B counts with half the rows from the
# prefill workspace; E DCP 4 in place with counts).
PATH_FIELDS: dict[str, dict[str, Any]] = {
    "counts": dict(mode="convert", counts=True),
    "dcp": dict(mode="dcp", dcp_size=4, dcp_rank=0, compact=True, counts=True),
    "convert": dict(mode="convert", counts=False),
    "prefill": dict(mode="convert", counts=True, prefill_fraction=0.5),
    "dcp-inplace": dict(mode="dcp", dcp_size=4, dcp_rank=0, compact=False, counts=True),
}
PATHS = tuple(PATH_FIELDS)


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise NeedsGPUError("bench times kernels inside CUDA graphs and needs a CUDA device; torch sees none (run it on the GPU machine)")


def bench_cases(topks: Sequence[int], tokens: Sequence[int], paths: Sequence[str] = PATHS, seed: int = 0) -> list[CaseConfig]:
    """The pr cells: every path (PATH_FIELDS) for every K x tokens."""
    bad = [p for p in paths if p not in PATH_FIELDS]
    if bad:
        raise ConfigError(f"path {bad[0]!r} is not one of {', '.join(PATHS)}")
    return [CaseConfig(topk=k, tokens=t, seed=seed, **PATH_FIELDS[path]) for path in paths for k in topks for t in tokens]


def path_of(config: CaseConfig) -> str:
    """The PATH_FIELDS name of a case's path."""
    if config.mode == "convert":
        return "prefill" if config.has_prefill else "counts" if config.counts else "convert"
    return "dcp" if config.compacts else "dcp-inplace" if config.is_dcp else "counts"


def launch_shape(impl: registry.Implementation, config: CaseConfig) -> tuple[tuple[int, int], int]:
    """(grid, num_warps) the implementation launches for ``config`` (SPEC §6)."""
    _, _, tiles, warps = impl.tiling(config)
    return (config.tokens, tiles), warps


def bytes_moved(config: CaseConfig) -> int:
    """The minimum bytes one call must read and write (module doc), old and new alike:
    every input once (the block table is tiny and cached, so it counts once, not per
    lane) and every output once."""
    lanes = config.tokens * config.topk
    read = 4 * (lanes + config.tokens + config.num_reqs * config.blocks_per_req)
    written = 4 * (lanes + (config.tokens if config.counts_computed else 0))
    return read + written


@dataclass
class Cell:
    config: CaseConfig
    a: str
    b: str
    status: CellStatus = CellStatus.TIMED
    why: str = ""
    times: dict = field(default_factory=dict)  # "a", "b", "floor_a", "floor_b" -> Timing
    grids: dict = field(default_factory=dict)  # "a", "b" -> (grid, warps)
    bytes: int = 0
    verified_in_graph: Optional[bool] = None
    cold_sets: int = 0  # rotating input copies of the cold-L2 timing (0: not timed cold)
    cold_footprint_over_l2: float = float("nan")

    def row(self) -> dict:
        c = self.config
        row: dict[str, Any] = {"path": path_of(c), "topk": c.topk, "tokens": c.tokens, "a": self.a, "b": self.b, "status": self.status}
        for key in ("a", "b", "floor_a", "floor_b", "a_cold", "b_cold"):
            t = self.times.get(key)
            row[f"{key}_us"] = t.median if t else float("nan")
            row[f"{key}_min_us"] = min(t.samples) if t else float("nan")
            row[f"{key}_max_us"] = max(t.samples) if t else float("nan")
            row[f"{key}_spread"] = t.spread if t else float("nan")
        row["speedup"] = row["a_us"] / row["b_us"] if self.times else float("nan")
        # What is left once the launch of the same grid is paid: work plus contention.
        row["a_above_floor_us"] = row["a_us"] - row["floor_a_us"]
        row["b_above_floor_us"] = row["b_us"] - row["floor_b_us"]
        for key in ("a", "b"):
            grid, warps = self.grids.get(key, ((0, 0), 0))
            row[f"{key}_grid"] = f"{grid[0]}x{grid[1]}"
            row[f"{key}_warps"] = warps
        row["bytes"] = self.bytes
        for key in ("a", "b"):
            us = row[f"{key}_us"]
            row[f"{key}_GBps"] = self.bytes / (us * 1e-6) / 1e9 if self.times else float("nan")
            row[f"{key}_peak_frac"] = row[f"{key}_GBps"] * 1e9 / H200_HBM_PEAK_BYTES_PER_S
        pr = PR_GB200_US.get((c.topk, c.tokens)) if path_of(c) == "counts" else None
        row["pr_gb200_old_us"], row["pr_gb200_new_us"] = pr if pr else (float("nan"), float("nan"))
        row["cold_speedup"] = row["a_cold_us"] / row["b_cold_us"] if "a_cold" in self.times else float("nan")
        row["cold_sets"] = self.cold_sets
        row["cold_footprint_over_l2"] = self.cold_footprint_over_l2
        row["verified_in_graph"] = self.verified_in_graph
        row["why"] = self.why
        row["case_id"] = c.case_id
        return row


def bench_cell(
    config: CaseConfig,
    a: registry.Implementation,
    b: registry.Implementation,
    *,
    calls: int,
    repeats: int,
    cold: bool = False,
    device: str = "cuda",
) -> Cell:
    """Gate, capture, time (repeats interleaved so drift hits every variant alike),
    then check the graphs' own outputs (measure.measure_cell)."""

    cell = Cell(config, a.name, b.name)
    inputs = generate_inputs(config, device=device)
    variants = [wrapper_variant(a, config, "a"), wrapper_variant(b, config, "b")]
    result = measure_cell(config, inputs, variants, calls=calls, repeats=repeats, cold=cold)
    return cell_from(cell, result, config)


def cell_from(cell: Cell, result: CellResult, config: CaseConfig) -> Cell:
    cell.status, cell.why = result.status, result.why
    if result.status != "timed":
        return cell
    cell.bytes = bytes_moved(config)
    cell.grids = dict(result.shapes)
    cell.times = {}
    for key in ("a", "b"):
        cell.times[key] = result.times[key]
        cell.times[f"floor_{key}"] = result.floors[key]
        if key in result.cold:
            cell.times[f"{key}_cold"] = result.cold[key]
    cell.cold_sets, cell.cold_footprint_over_l2 = result.cold_sets, result.cold_footprint_over_l2
    cell.verified_in_graph = result.verified_in_graph
    return cell


def run_bench(
    configs: Sequence[CaseConfig],
    a: str = "old",
    b: str = "new",
    *,
    calls: int = 200,
    repeats: int = 20,
    cold: bool = False,
    progress: Optional[Callable[[Cell], None]] = None,
    budget=None,
    device: str = "cuda",
) -> list[Cell]:
    """Every cell in turn; with a ``budget`` (timing.Budget), cells left when it runs
    out are not started (the caller says so). ``device`` other than cuda is for tests
    that replace the graph timing (measure.py) to run the rest on the interpreter."""
    if device == "cuda":
        require_cuda()
    impl_a, impl_b = registry.get(a), registry.get(b)
    cells = []
    for config in configs:
        if budget is not None and budget.exhausted:
            break
        cell = bench_cell(config, impl_a, impl_b, calls=calls, repeats=repeats, cold=cold, device=device)
        cells.append(cell)
        if progress:
            progress(cell)
    return cells


def table(cells: Sequence[Cell]):
    import pandas as pd

    return pd.DataFrame([c.row() for c in cells])


def printable(cells: Sequence[Cell]):
    """The human table: measured old/new beside the PR's GB200 figures and the floors."""
    import pandas as pd

    def us(row, key):
        v = row[f"{key}_us"]
        return "—" if v != v else f"{v:.2f} ±{100 * row[f'{key}_spread'] / 2:.0f}%"

    rows = []
    for c in cells:
        r = c.row()
        old_us, new_us = r["pr_gb200_old_us"], r["pr_gb200_new_us"]
        pr = "—" if old_us != old_us else f"{old_us:.2f}→{new_us:.2f} ({old_us / new_us:.2f}x)"
        rows.append({
            "path": r["path"], "K": r["topk"], "T": r["tokens"],
            f"{c.a} µs": us(r, "a"), f"{c.b} µs": us(r, "b"),
            "speedup": "—" if r["speedup"] != r["speedup"] else f"{r['speedup']:.2f}x",
            "PR GB200": pr,
            f"floor {c.a}": "—" if not c.times else f"{r['floor_a_us']:.2f} ({r['a_grid']})",
            f"floor {c.b}": "—" if not c.times else f"{r['floor_b_us']:.2f} ({r['b_grid']})",
            "above floor": "—" if not c.times else f"{r['a_above_floor_us']:.2f} / {r['b_above_floor_us']:.2f}",
            f"{c.a} GB/s": "—" if not c.times else f"{r['a_GBps']:.0f} ({100 * r['a_peak_frac']:.0f}%)",
            f"{c.b} GB/s": "—" if not c.times else f"{r['b_GBps']:.0f} ({100 * r['b_peak_frac']:.0f}%)",
            "check": "REFUSED" if c.status == "refused" else ("ok" if c.verified_in_graph else "FAIL"),
        })
        if "a_cold" in c.times:
            ratio = r["cold_footprint_over_l2"]
            rows[-1].update({
                f"{c.a} cold µs": us(r, "a_cold"), f"{c.b} cold µs": us(r, "b_cold"),
                "cold speedup": f"{r['cold_speedup']:.2f}x",
                "rotation": f"{c.cold_sets} sets, {ratio:.1f}x L2" + ("" if ratio >= 1 else " (partly warm)"),
            })
    return pd.DataFrame(rows)
