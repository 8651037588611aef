"""§1b The control experiment for contention: the old kernel with its per-row atomic
replaced by a write nobody else makes (issue 22 §2).

The control kernel is *derived* from ``kernels_old/_remap.py`` (its source text, with
two lines edited), so it is the old kernel's work, grid and tile count exactly, minus
the contention:

- counting: each tile stores its count into its own slot ``slots[row, tile]``
  (``tl.store`` instead of ``tl.atomic_add`` on ``counts[row]``); the row's count is
  ``slots.sum(1)``, taken after the timed call;
- compaction: each tile reads its first slot from ``offsets[row, tile]``, the exclusive
  prefix of the per-tile counts in tile order, computed once per input before timing by
  the control kernel's own counting pass and a cumsum (no atomics anywhere), and stores
  ``offset + count`` into its own slot; the row's count is ``slots[:, -1]``.

The compacted row is then in column order (tiles in order), one of the orders the old
kernel may produce; the counts equal the old kernel's. The difference between the
atomic kernel and its control, timed interleaved in one cell, is the cost of the
atomics' contention (plus the atomic instruction itself).
"""

from __future__ import annotations

import atexit
import importlib.util
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from remap_ab.errors import InternalError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.compare import OrderContract
from remap_ab.subjects.remap.parts.bench.measure import TimedVariant

ATOMIC = "tl.atomic_add(valid_counts_ptr + row, n_valid)"
SLOT = "valid_counts_ptr + row * tl.num_programs(1) + tile"
OFFSET = "slot_offsets_ptr + row * tl.num_programs(1) + tile"
MODULE = "remap_ab_contention_control"


def control_source(source: str) -> str:
    """The old kernel's source with the two atomics replaced (module doc). Raises
    InternalError when the source no longer has them exactly as expected."""
    lines = source.splitlines(keepends=True)
    counting = [i for i, line in enumerate(lines) if line.strip() == ATOMIC]
    allocating = [i for i, line in enumerate(lines) if line.strip() == f"slot_base = {ATOMIC}"]
    params = [i for i, line in enumerate(lines) if re.match(r"\s*valid_counts_ptr,", line)]
    if len(counting) != 1 or len(allocating) != 1 or len(params) != 1:
        raise InternalError(
            f"kernels_old/_remap.py no longer has one counting `{ATOMIC}`, one `slot_base = {ATOMIC}` and one "
            f"`valid_counts_ptr,` parameter (found {len(counting)}, {len(allocating)}, {len(params)}): update "
            "remap_ab/subjects/remap/parts/bench/contention_control.py")
    for i in counting:
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = f"{indent}tl.store({SLOT}, n_valid)\n"
    for i in allocating:
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = f"{indent}slot_base = tl.load({OFFSET})\n{indent}tl.store({SLOT}, slot_base + n_valid)\n"
    for i in params:
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = lines[i] + f"{indent}slot_offsets_ptr,  # [T, tiles] int32 when COMPACT_TO_FRONT, else None\n"
    return "".join(lines)


_kernel = None


def control_kernel():
    """The control kernel (built once per process, under the process's backend)."""
    global _kernel
    if _kernel is None:
        spec = importlib.util.find_spec("kernels_old._remap")
        if spec is None or spec.origin is None:
            raise InternalError("kernels_old._remap is not importable; run from the checkout or install remap-ab")
        folder = Path(tempfile.mkdtemp(prefix="remap-ab-control-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / f"{MODULE}.py"
        path.write_text(control_source(Path(spec.origin).read_text()))
        module_spec = importlib.util.spec_from_file_location(MODULE, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        _kernel = module._convert_req_index_to_global_index_kernel
    return _kernel


def _launch(config: CaseConfig, x, out, slots, offsets, *, compact: bool, block_n: int) -> None:
    import torch

    bt, ti = x.block_table, x.token_indices
    dcp = config.is_dcp
    grid = (ti.shape[0], config.topk // block_n)
    assert slots.shape == grid and slots.dtype == torch.int32
    # As the old wrapper launches: unused pointers None, no num_warps (Triton's default).
    control_kernel()[grid](
        x.req_id, bt, ti, out, slots, offsets if compact else None, None, None,
        bt.stride(0), bt.stride(1), ti.stride(0), ti.stride(1), out.stride(0), out.stride(1),
        max_num_blocks_per_req=bt.shape[1], BLOCK_SIZE=config.block_size, NUM_TOPK_TOKENS=config.topk,
        BLOCK_N=block_n, HAS_PREFILL=False, COUNT_VALID=True, COMPACT_TO_FRONT=compact,
        DCP_SIZE=config.dcp_size if dcp else 1, DCP_RANK=config.dcp_rank if dcp else 0,
        CP_INTERLEAVE=config.interleave if dcp else 1,
    )


def tile_offsets(config: CaseConfig, x, block_n: int):
    """``[T, tiles]`` exclusive prefix of each tile's valid count, in tile order: the
    control kernel's counting pass, then a cumsum (no atomics)."""
    import torch

    grid = (x.token_indices.shape[0], config.topk // block_n)
    counts = torch.zeros(grid, dtype=torch.int32, device=x.token_indices.device)
    _launch(config, x, torch.empty_like(x.token_indices), counts, None, compact=False, block_n=block_n)
    return (torch.cumsum(counts, dim=1, dtype=torch.int32) - counts).contiguous()


def variant_name(tiles: int) -> str:
    return f"{tiles} tiles, control"


def control_variant(config: CaseConfig, inputs, block_n: int, name: Optional[str] = None) -> TimedVariant:
    """The control of the old kernel tiled at ``block_n`` on ``config`` (counts, or DCP
    compaction when the config compacts): a TimedVariant whose outputs are summed after
    the call (``finish``)."""
    import torch

    if config.has_prefill:
        raise InternalError("the contention control models the counts and DCP paths, not prefill")
    compact = config.compacts
    tiles = config.topk // block_n
    offsets = tile_offsets(config, inputs, block_n) if compact else None  # before timing, once

    def call(x):
        ti = x.token_indices
        out = torch.full_like(ti, -1) if compact else torch.empty_like(ti)
        slots = torch.zeros((ti.shape[0], tiles), dtype=torch.int32, device=ti.device)
        _launch(config, x, out, slots, offsets, compact=compact, block_n=block_n)
        return out, slots

    def finish(result):
        out, slots = result
        counts = slots[:, -1].contiguous() if compact else slots.sum(dim=1, dtype=torch.int32)
        return out, (counts if config.counts else None)

    contract = OrderContract(True, config.topk, f"control: {tiles} tiles of {block_n}, slots in tile order")
    return TimedVariant(name or variant_name(tiles), call, contract, (config.tokens, tiles), 4, finish=finish)


def cost_rows(rows: Sequence[dict]) -> list[dict]:
    """Per (path, tokens, tiles): the atomic kernel, its control and their difference."""
    by = {(r["path"], r["tokens"], r["variant"]): r for r in rows if r["status"] == "timed"}
    out = []
    for (path, tokens, name), r in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1]["tiles"])):
        if not name.endswith(", control"):
            continue
        atomic = by.get((path, tokens, name[: -len(", control")]))
        if atomic is None:
            continue
        cost = atomic["us"] - r["us"]
        out.append({"path": path, "tokens": tokens, "tiles": r["tiles"], "atomic_us": atomic["us"], "control_us": r["us"],
                    "contention_us": cost, "contention_pct": 100 * cost / atomic["us"] if atomic["us"] else float("nan"),
                    "verified_in_graph": bool(atomic["verified_in_graph"] and r["verified_in_graph"])})
    return out


def conclusions(costs: Sequence[dict], tolerance_us: float = 0.1) -> list[str]:
    """One sentence per path: the contention cost at each tile count from the fewest to
    the most tokens, and whether it grows with batch and with tiles."""
    out = []
    for path in sorted({c["path"] for c in costs}):
        mine = [c for c in costs if c["path"] == path]
        parts = []
        for tiles in sorted({c["tiles"] for c in mine}, reverse=True):
            line = sorted((c for c in mine if c["tiles"] == tiles), key=lambda c: c["tokens"])
            parts.append(f"{tiles} tiles {line[0]['contention_us']:+.2f} µs at {line[0]['tokens']} token(s) → "
                         f"{line[-1]['contention_us']:+.2f} µs ({line[-1]['contention_pct']:+.0f}%) at {line[-1]['tokens']}")
        top = max(mine, key=lambda c: c["contention_us"])
        if top["contention_us"] <= tolerance_us:
            verdict = f"no measurable contention (at most {top['contention_us']:+.2f} µs)"
        else:
            verdict = (f"contention costs up to {top['contention_us']:.2f} µs ({top['contention_pct']:.0f}% of the call) "
                       f"at {top['tiles']} tiles, {top['tokens']} tokens")
        out.append(f"{path}: atomic − control: " + "; ".join(parts) + f" — {verdict}")
    return out
