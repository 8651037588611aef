"""§1 The contention signature.

The pull request argues that the old kernel's cost at large batch is atomic contention
on each row's counter: with 16 column tiles per row, 16 programs add into one address;
with 4 tiles, 4 do. If so, the gap between 16 and 4 tiles should *grow with batch*.
But 16 tiles also launch 4x the programs, and launch cost grows with the grid too, so
each variant is timed beside an empty kernel of its own grid (its *floor*) and the gap
is judged on the time *above* the floor, where contention would live.

Variants at K = 2048: the old kernel tiled with BLOCK_N in {128, 256, 512, 1024}
(16/8/4/2 tiles of 4 warps) and the new single tile (1 program of 8 warps per row),
on the counts path and the DCP 4 compaction path, at each token count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import contention_control
from remap_ab.subjects.remap.parts.bench.measure import CellResult, measure_cell, wrapper_variant
from remap_ab.subjects.remap.parts.bench.pr_table import bench_cases, path_of

TILE_WIDTHS = (128, 256, 512, 1024)
TOKENS = (1, 8, 64, 256, 1024, 4096)
TOPK = 2048
GROWTH_TOLERANCE_US = 0.1  # a gap must grow by more than this (µs) to count as growing


def variant_name(tiles: int, kernel: str = "old") -> str:
    """"16 tiles" ... "2 tiles" for the old kernel's widths; "1 tile (new)" for the new
    kernel's single tile ("1 tile (old)" if the old kernel is ever given BLOCK_N = K)."""
    return f"1 tile ({kernel})" if tiles == 1 else f"{tiles} tiles"


def variants(config: CaseConfig, widths: Sequence[int], old: registry.Implementation, new: registry.Implementation,
             inputs=None):
    """Old tiled at each width, each followed by its control (the same kernel without
    the atomic's contention, contention_control.py) when ``inputs`` are given, then the
    new kernel (one tile when counting at pow2 K)."""

    out = []
    for bn in widths:
        tiled = config.replace(block_n=bn)
        out.append(wrapper_variant(old, tiled, variant_name(config.topk // bn, "old")))
        if inputs is not None:
            out.append(contention_control.control_variant(tiled, inputs, bn))
    single, _, tiles, _ = new.tiling(config)
    out.append(wrapper_variant(new, config, variant_name(1, "new") if single or tiles == 1 else f"new, {tiles} tiles"))
    return out


def rows_of(cell: CellResult) -> list[dict]:
    """One row per variant of a timed (or refused) cell."""
    c = cell.config
    rows = []
    for name in cell.names:
        grid, warps = cell.shapes.get(name, ((c.tokens, 0), 0))
        us, floor = cell.us(name), cell.us(name, "floor")
        t = cell.times.get(name)
        rows.append({
            "path": path_of(c), "topk": c.topk, "tokens": c.tokens, "variant": name,
            "tiles": grid[1] if len(grid) > 1 else 1, "grid": f"{grid[0]}x{grid[1] if len(grid) > 1 else 1}",
            "warps": warps, "us": us, "floor_us": floor, "above_floor_us": us - floor,
            "spread": t.spread if t else float("nan"), "status": cell.status,
            "verified_in_graph": cell.verified_in_graph, "why": cell.why, "case_id": c.case_id,
        })
    return rows


@dataclass(frozen=True)
class Signature:
    path: str
    holds: Optional[bool]  # None: not enough data
    sentence: str
    gaps: tuple  # (tokens, raw gap µs, gap above floor µs) per token count


def signature(rows: Sequence[dict], path: str, many: str = "16 tiles", few: str = "4 tiles",
              tolerance: float = GROWTH_TOLERANCE_US, controlled: bool = False) -> Signature:
    """Does the gap between ``many`` and ``few`` tiles grow with batch on ``path``?
    Judged on the time above each grid's floor; the raw gap is given beside it.
    ``controlled``: the control experiment was measured too; the floor subtraction is
    then only an estimate beside it (programs overlap, so floors do not add) and the
    sentence says so instead of concluding."""
    by = {(r["tokens"], r["variant"]): r for r in rows if r["path"] == path and r["status"] == "timed"}
    tokens = sorted({t for (t, v) in by if (t, many) in by and (t, few) in by})
    gaps = tuple(
        (t, by[(t, many)]["us"] - by[(t, few)]["us"], by[(t, many)]["above_floor_us"] - by[(t, few)]["above_floor_us"])
        for t in tokens
    )
    if len(gaps) < 2:
        return Signature(path, None, f"{path}: not enough timed token counts to judge the {many} vs {few} gap", gaps)
    first, last = gaps[0], gaps[-1]
    grows_above = last[2] - first[2] > tolerance
    grows_raw = last[1] - first[1] > tolerance
    steps = [b[2] - a[2] for a, b in zip(gaps, gaps[1:])]
    monotone = all(s > -tolerance for s in steps)
    span = f"from {first[2]:.2f} µs at {first[0]} tokens to {last[2]:.2f} µs at {last[0]} tokens"
    raw = f"(raw gap {first[1]:.2f} → {last[1]:.2f} µs)"
    if grows_above:
        shape = "steadily" if monotone else "though not at every step"
        return Signature(path, True, f"{path}: holds — the {many} − {few} gap above the launch floor grows {shape}, {span} {raw}", gaps)
    if grows_raw and controlled:
        return Signature(path, False, f"{path}, by floor subtraction alone (floors of overlapping programs do not "
                                      f"add; the atomic − control line above measures contention): the raw gap grows "
                                      f"{raw}, above each grid's floor it goes {span}", gaps)
    if grows_raw:
        return Signature(path, False, f"{path}: does not hold above the floor — the raw gap grows {raw}, "
                                      f"but above each grid's floor it goes {span}: launch cost, not contention", gaps)
    return Signature(path, False, f"{path}: does not hold — the gap above the floor goes {span} {raw}", gaps)


def run(
    *,
    paths: Sequence[str] = ("counts", "dcp"),
    tokens: Sequence[int] = TOKENS,
    widths: Sequence[int] = TILE_WIDTHS,
    topk: int = TOPK,
    calls: int = 200,
    repeats: int = 10,
    seed: int = 0,
    budget=None,
    on_cell: Optional[Callable[[CellResult], None]] = None,
    device: str = "cuda",
    control: bool = True,
) -> tuple[list[dict], int]:
    """Rows for every (path, tokens, variant) measured (with ``control``, the control
    of each tile width beside it), and how many cells were left unmeasured when the
    budget ran out."""

    old, new = registry.get("old"), registry.get("new")
    configs = bench_cases([topk], tokens, paths, seed=seed)
    rows, left = [], 0
    for i, config in enumerate(configs):
        if budget is not None and budget.exhausted:
            left = len(configs) - i
            break
        inputs = generate_inputs(config, device=device)
        vs = variants(config, widths, old, new, inputs if control else None)
        cell = measure_cell(config, inputs, vs, calls=calls, repeats=repeats)
        rows += rows_of(cell)
        if on_cell:
            on_cell(cell)
    return rows, left
