"""§2 How wide can one program per row go? The single tile at K = 256 ... 16384.

The new kernel gives a whole row to one program when it counts at a power-of-two K:
K/ (32 x warps) lanes per thread, several int32 values each, all live in registers at
once. The pull request's named risk is 8 warps over 2048 columns; past some width the
registers spill to local memory, and past some width one program per row stops
beating the tiled path (K/128 programs of 4 warps, atomic count).

Every path the single tile serves is scanned (``PATHS``): counts (plain convert,
counts returned), in-place DCP (DCP 4, counts, no compaction) and DCP compaction (DCP 4).
Each K is launched *directly* (``_convert_req_index_to_global_index_kernel`` with
chosen constexprs and ``num_warps``), as a single tile at each warp count asked for and
tiled at BLOCK_N = 128 with 4 warps, with the arguments a wrapper passes (unused
pointers None) and allocating what it allocates (out, pre-filled with -1 when
compacting; the counts buffer, zeroed for the atomic path). The compiled object of the
first launch gives registers, spills and shared memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch

from remap_ab.errors import UsageError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.compare import OrderContract
from remap_ab.subjects.remap.parts.bench.measure import CellResult, TimedVariant, measure_cell
from remap_ab.subjects.remap.parts.bench.resources import compiled_facts, occupancy

WIDTHS = (256, 512, 1024, 2048, 4096, 8192, 16384)
WARPS = (8, 16)  # the kernel's 8, and one other (issue 14 §2)
TOKENS = (1, 256, 1024)
TILED_BLOCK_N = 128
TILED_WARPS = 4
PATHS: dict[str, dict[str, Any]] = {
    "counts": {"mode": "convert", "counts": True},
    "dcp-inplace": {"mode": "dcp", "dcp_size": 4, "dcp_rank": 0, "compact": False, "counts": True},
    "dcp-compact": {"mode": "dcp", "dcp_size": 4, "dcp_rank": 0, "compact": True, "counts": True},
}


def check_paths(paths: Sequence[str]) -> None:
    bad = [p for p in paths if p not in PATHS]
    if bad or not paths:
        raise UsageError(f"--scan-paths {','.join(paths)}: choose from {', '.join(PATHS)}")


def path_of(config: CaseConfig) -> str:
    if not config.is_dcp:
        return "counts"
    return "dcp-compact" if config.compacts else "dcp-inplace"


def check_widths(widths: Sequence[int]) -> None:
    for k in widths:
        if k < TILED_BLOCK_N or k & (k - 1):
            raise UsageError(f"--scan-k {k}: each width must be a power of two of at least {TILED_BLOCK_N} "
                             "(tl.arange needs a power of two; the tiled path needs a multiple of 128)")


def check_warps(warps: Sequence[int]) -> None:
    for w in warps:
        if w < 1 or w > 32 or w & (w - 1):
            raise UsageError(f"--scan-warps {w}: num_warps must be a power of two from 1 to 32")


def _kernel_arguments(config: CaseConfig, x: CaseInputs, out, counts, *, block_n: int, single: bool) -> dict:
    bt, ti = x.block_table, x.token_indices
    dcp = config.is_dcp
    return {
        "req_id_ptr": x.req_id, "block_table_ptr": bt, "token_indices_ptr": ti, "out_ptr": out,
        "valid_counts_ptr": counts, "prefill_request_id_ptr": None, "workspace_starts_ptr": None,
        "bt_stride0": bt.stride(0), "bt_stride1": bt.stride(1), "ti_stride0": ti.stride(0), "ti_stride1": ti.stride(1),
        "out_stride0": out.stride(0), "out_stride1": out.stride(1),
        "max_num_blocks_per_req": bt.shape[1], "BLOCK_SIZE": config.block_size, "NUM_TOPK_TOKENS": config.topk,
        "BLOCK_N": block_n, "HAS_PREFILL": False, "COUNT_VALID": True, "COMPACT_TO_FRONT": config.compacts,
        "DCP_SIZE": config.dcp_size if dcp else 1, "DCP_RANK": config.dcp_rank if dcp else 0,
        "CP_INTERLEAVE": config.interleave if dcp else 1, "SINGLE_TILE": single,
    }


def direct_variant(kernel, config: CaseConfig, *, single: bool, block_n: int, warps: int, name: str,
                   facts: dict) -> TimedVariant:
    """A direct launch of ``kernel`` on ``config``'s shape; the compiled object's facts
    land in ``facts[name]`` on the first launch."""
    names = list(getattr(kernel, "arg_names", ()) or ())
    t, k = config.tokens, config.topk
    grid = (t, k // block_n)

    def call(x: CaseInputs):
        out = torch.full_like(x.token_indices, -1) if config.compacts else torch.empty_like(x.token_indices)
        alloc = torch.empty if single else torch.zeros  # the atomic path accumulates into zeros
        counts = alloc(x.token_indices.shape[0], dtype=torch.int32, device=x.token_indices.device)
        args = _kernel_arguments(config, x, out, counts, block_n=block_n, single=single)
        if names:
            unknown = [n for n in names if n not in args]
            if unknown:
                raise TypeError(f"the kernel's signature has parameters the width scan does not know: {unknown}")
            args = {n: args[n] for n in names}
        compiled = kernel[grid](**args, num_warps=warps)
        if name not in facts and compiled is not None:
            facts[name] = compiled_facts(compiled)
        return out, counts

    if single:
        contract = OrderContract(True, k, f"single tile (K={k})")
    else:
        contract = OrderContract(False, block_n, f"{k // block_n} tiles of {block_n}")
    return TimedVariant(name, call, contract, grid, warps)


def variant_names(warps: Sequence[int]) -> list[str]:
    return [f"single tile, {w} warps" for w in warps] + [f"tiled {TILED_BLOCK_N}, {TILED_WARPS} warps"]


def rows_of(cell: CellResult, facts: dict) -> list[dict]:
    c = cell.config
    rows = []
    for name in cell.names:
        f = facts.get(name, {})
        grid, warps = cell.shapes.get(name, ((c.tokens, 0), 0))
        occ = occupancy(f.get("n_regs"), warps or 1, f.get("shared") or 0)
        us, floor = cell.us(name), cell.us(name, "floor")
        rows.append({
            "path": path_of(c), "topk": c.topk, "tokens": c.tokens, "variant": name, "warps": warps, "grid": f"{grid[0]}x{grid[1]}",
            "lanes_per_thread": c.topk // grid[1] // (32 * warps) if warps else None,
            "regs_per_thread": f.get("n_regs"), "spills": f.get("n_spills"), "shared_bytes": f.get("shared"),
            "occupancy": round(occ.fraction, 3) if occ else None, "occupancy_limiter": occ.limiter if occ else "",
            "us": us, "floor_us": floor, "above_floor_us": us - floor, "status": cell.status,
            "verified_in_graph": cell.verified_in_graph, "why": cell.why,
        })
    return rows


def findings(rows: Sequence[dict], warps: Sequence[int]) -> list[str]:
    """Per path: where registers first spill, per warp count; where the single tile
    first loses to the tiled path, per token count."""
    out = []
    paths = list(dict.fromkeys(r.get("path", "counts") for r in rows))
    for path in paths:
        mine_path = [r for r in rows if r.get("path", "counts") == path]
        prefix = f"{path}: " if len(paths) > 1 or path != "counts" else ""
        out += [prefix + line for line in _findings_of_path(mine_path, warps)]
    return out


def _findings_of_path(rows: Sequence[dict], warps: Sequence[int]) -> list[str]:
    out = []
    tiled = variant_names(warps)[-1]
    for w in warps:
        name = f"single tile, {w} warps"
        mine = sorted((r for r in rows if r["variant"] == name), key=lambda r: r["topk"])
        spilling = [r["topk"] for r in mine if (r["spills"] or 0) > 0]
        known = [r for r in mine if r["spills"] is not None]
        if not known:
            out.append(f"{name}: spills unknown (no compiled object recorded)")
        elif spilling:
            first = min(spilling)
            regs = next(r["regs_per_thread"] for r in mine if r["topk"] == first)
            out.append(f"{name}: registers spill from K = {first} ({regs} registers/thread there)")
        else:
            out.append(f"{name}: no spills up to K = {max(r['topk'] for r in known)}")
        for t in sorted({r["tokens"] for r in mine}):
            pairs = []
            for r in mine:
                if r["tokens"] != t or r["status"] != "timed":
                    continue
                other = next((o for o in rows if o["variant"] == tiled and o["topk"] == r["topk"] and o["tokens"] == t
                              and o["status"] == "timed"), None)
                if other is not None:
                    pairs.append((r["topk"], r["us"], other["us"]))
            losing = [k for k, s, tl in pairs if s > tl]
            if not pairs:
                continue
            if losing:
                k = min(losing)
                s, tl = next((s, tl) for kk, s, tl in pairs if kk == k)
                out.append(f"{name}, {t} tokens: one program per row stops beating the tiled path at K = {k} "
                           f"({s:.2f} vs {tl:.2f} µs)")
            else:
                out.append(f"{name}, {t} tokens: beats the tiled path at every K measured (up to {max(k for k, _, _ in pairs)})")
    return out


def run(
    *,
    widths: Sequence[int] = WIDTHS,
    warps: Sequence[int] = WARPS,
    tokens: Sequence[int] = TOKENS,
    paths: Sequence[str] = tuple(PATHS),
    calls: int = 100,
    repeats: int = 10,
    seed: int = 0,
    budget=None,
    on_cell: Optional[Callable[[CellResult], None]] = None,
    device: str = "cuda",
    impl: str = "new",
) -> tuple[list[dict], int]:
    """Rows for every (path, K, tokens, variant) of ``impl``'s kernel, and how many
    cells the budget left."""

    check_widths(widths)
    check_warps(warps)
    check_paths(paths)
    kernel = getattr(registry.get(impl).module, "_convert_req_index_to_global_index_kernel", None)
    if kernel is None:
        raise UsageError(f"width scan: implementation {impl!r} has no _convert_req_index_to_global_index_kernel to launch")
    facts: dict = {}
    rows, left = [], 0
    cells = [(p, k, t) for p in paths for k in widths for t in tokens]
    for i, (path, k, t) in enumerate(cells):
        if budget is not None and budget.exhausted:
            left = len(cells) - i
            break
        config = CaseConfig(topk=k, tokens=t, seed=seed, **PATHS[path])
        shapes = facts.setdefault((path, k), {})
        names = variant_names(warps)
        vs = [direct_variant(kernel, config, single=True, block_n=k, warps=w, name=n, facts=shapes)
              for w, n in zip(warps, names)]
        vs.append(direct_variant(kernel, config, single=False, block_n=TILED_BLOCK_N, warps=TILED_WARPS, name=names[-1],
                                 facts=shapes))
        inputs = generate_inputs(config, device=device)
        cell = measure_cell(config, inputs, vs, calls=calls, repeats=repeats)
        rows += rows_of(cell, shapes)
        if on_cell:
            on_cell(cell)
    return rows, left
