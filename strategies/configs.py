"""Strategies for case configurations.

A drawn value is a ``CaseConfig``, never a tensor: the inputs come from the case's
seed (``remap_ab.subjects.remap.case.inputs``), so what Hypothesis shrinks is a handful of small fields and
a failing case is replayable from its options alone.

Every menu below lists its default (or simplest) value first, because Hypothesis
shrinks a ``sampled_from`` toward its first element: a shrunk case then differs from
the defaults only where the bug needs it, and its replay command stays short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from hypothesis import strategies as st

from remap_ab.properties import profiles
from remap_ab.subjects.remap.case import config
from remap_ab.subjects.remap.case.config import INT32_MAX, CaseConfig
from remap_ab.subjects.remap.case.layouts import LAYOUT_NAMES

# K = NUM_TOPK_TOKENS. Powers of two take the new kernel's single-tile path when it
# counts; the others keep the tiled atomic path in both kernels (SPEC §6-§7).
POW2_TOPKS = (128, 2048, 256, 512, 1024, 64)
NON_POW2_TOPKS = (384, 640, 768, 1152, 1536, 1920, 192)
TOPKS = POW2_TOPKS + NON_POW2_TOPKS

BLOCK_NS = (128, 64, 256, 32, 16)  # BLOCK_N, the tile width: powers of two
BLOCK_SIZES = (64, 16, 128, 1, 32, 256)  # B, the KV-cache block size
BLOCKS_PER_REQ = (64, 1, 2, 16, 256, 4096)  # W, the block-table width
NUM_REQS = (2, 1, 3, 8)
DCP_SIZES = (4, 2, 1)
TABLES = config.TABLE_KINDS  # "random" first
ROW_LAYOUTS = config.ROW_LAYOUTS  # "uniform" first: shrinking heads there
NEGATIVES = config.NEGATIVE_KINDS  # "minus_one" first
LAYOUTS = LAYOUT_NAMES  # "contiguous" first: a shrunk case is strided only where the bug needs it

# Exact edges first (0 % and 100 % must be hit exactly, not approached), then any percentage.
_INVALID_EDGES = (0.3, 0.0, 1.0)
_OUT_OF_RANGE = (0.0, 0.05, 0.3, 1.0)
_PREFILL_FRACTIONS = (0.0, 0.5, 1.0, 0.1)


def invalid_ratios() -> st.SearchStrategy[float]:
    """Fraction of negative lanes: 0 %, 100 %, the default 30 %, or any whole percent."""
    return st.one_of(st.sampled_from(_INVALID_EDGES), st.integers(0, 100).map(lambda pct: pct / 100))


def interleaves(block_size: int) -> st.SearchStrategy[int]:
    """cp_kv_cache_interleave_size: 1, BLOCK_SIZE itself, then every other divisor."""
    divisors = [d for d in range(2, block_size) if block_size % d == 0]
    menu = [1] + ([block_size] if block_size > 1 else []) + divisors
    return st.sampled_from(menu)


@st.composite
def shapes(draw, topks: Sequence[int] = TOPKS, min_tiles: int = 1, budget: Optional[profiles.SizeBudget] = None):
    """(tokens, topk, block_n) within the size budget (default: the active profile's).

    K is drawn first, then a BLOCK_N that divides it, then as many token rows as the
    budget allows for that many tiles: a K = 2048 case at 16 tiles gets fewer rows on
    the interpreter than a K = 128 one."""
    budget = budget or profiles.active().budget
    fitting = [k for k in topks if _block_ns_for(k, min_tiles, budget)]
    if not fitting:
        raise ValueError(f"no K in {tuple(topks)} has {min_tiles}+ tiles within {budget}")
    topk = draw(st.sampled_from(fitting))
    block_n = draw(st.sampled_from(_block_ns_for(topk, min_tiles, budget)))
    tiles = topk // block_n
    tokens = draw(st.integers(1, budget.max_rows_for(tiles)))
    return tokens, topk, block_n


def _block_ns_for(topk: int, min_tiles: int, budget: profiles.SizeBudget) -> list[int]:
    return [
        bn for bn in BLOCK_NS if bn <= topk and topk % bn == 0 and min_tiles <= topk // bn <= budget.max_tiles
    ]


@st.composite
def case_configs(
    draw,
    *,
    modes: Sequence[str] = ("dcp", "convert"),
    dcp_sizes: Sequence[int] = DCP_SIZES,
    compact: Optional[bool] = None,
    counts: Optional[bool] = None,
    topks: Sequence[int] = TOPKS,
    min_tiles: int = 1,
    tables: Sequence[str] = TABLES,
    row_layouts: Sequence[str] = ROW_LAYOUTS,
    layouts: Sequence[str] = LAYOUTS,
    budget: Optional[profiles.SizeBudget] = None,
) -> CaseConfig:
    """Any valid case configuration, narrowed by the keyword arguments.

    modes       "dcp" (the DCP wrapper; dcp_size 1 delegates to the plain one) and/or
                "convert" (the plain wrapper, with or without prefill rows).
    dcp_sizes   DCP world sizes to draw from; every rank of the size is drawn.
    compact     fix compact_valid_to_front (None: both).
    counts      fix return_valid_counts (None: both).
    topks       the K values to draw from (POW2_TOPKS, NON_POW2_TOPKS, or both).
    min_tiles   at least this many BLOCK_N tiles per row (2: the tiled path exists).
    tables, row_layouts   narrow the block-table and row-shape menus.
    layouts     the memory layouts of the inputs to draw from (layouts.py).
    """
    mode = draw(st.sampled_from(tuple(modes)))
    tokens, topk, block_n = draw(shapes(topks=topks, min_tiles=min_tiles, budget=budget))
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    fields = dict(
        mode=mode,
        tokens=tokens,
        topk=topk,
        block_n=block_n,
        block_size=block_size,
        num_reqs=draw(st.sampled_from(NUM_REQS)),
        counts=draw(st.booleans()) if counts is None else counts,
        table=draw(st.sampled_from(tuple(tables))),
        row_layout=draw(st.sampled_from(tuple(row_layouts))),
        negatives=draw(st.sampled_from(NEGATIVES)),
        layout=draw(st.sampled_from(tuple(layouts))),
    )
    if mode == "dcp":
        size = draw(st.sampled_from(tuple(dcp_sizes)))
        fields.update(
            dcp_size=size,
            dcp_rank=draw(st.integers(0, size - 1)),
            interleave=draw(interleaves(block_size)),
            compact=draw(st.booleans()) if compact is None else compact,
        )
    else:
        fields.update(prefill_fraction=draw(st.sampled_from(_PREFILL_FRACTIONS)))
    size = fields.get("dcp_size", 1)
    # W is a compile-time constant; W * B * dcp_size must stay in int32 (SPEC §2).
    fields["blocks_per_req"] = draw(
        st.sampled_from([w for w in BLOCKS_PER_REQ if w * block_size * size <= INT32_MAX])
    )
    invalid = draw(invalid_ratios())
    fields["invalid_ratio"] = invalid
    # Out-of-range lanes share the non-negative remainder: their sum may not pass 100 %.
    fields["out_of_range"] = min(draw(st.sampled_from(_OUT_OF_RANGE)), round(1.0 - invalid, 6))
    fields["seed"] = draw(st.integers(0, INT32_MAX))
    return CaseConfig(**fields)


def tiled_compaction_configs(**narrowing) -> st.SearchStrategy[CaseConfig]:
    """DCP compaction with at least two tiles per row: the old kernel's racy path at
    every K, and the new kernel's too where K is not a power of two."""
    narrowing = {"modes": ("dcp",), "dcp_sizes": (4, 2), "compact": True, "min_tiles": 2, **narrowing}
    return case_configs(**narrowing)


def single_tile_configs(**narrowing) -> st.SearchStrategy[CaseConfig]:
    """Cases the new kernel runs as one program per row: it counts (or compacts) and
    K is a power of two. Both wrappers; compaction or counts or both."""
    narrowing = {"topks": POW2_TOPKS, "counts": True, **narrowing}
    return case_configs(**narrowing)


SCHEDULE_POLICIES = ("tiles_reversed", "reversed", "random", "tiles_rotated")


def schedules() -> st.SearchStrategy[tuple[str, int]]:
    """(policy, seed) for ``remap_ab.interpreter.schedule.interpreter_schedule``; the adversarial
    tiles_reversed first, so a failure shrinks to the most readable schedule."""
    return st.tuples(st.sampled_from(SCHEDULE_POLICIES), st.integers(0, 2**16))


# The attention backends' calls (issue 24): every (backend, pattern) pair it makes.
CALLS = tuple((b, p) for b, (patterns, _) in config.BACKEND_CALLS.items() for p in patterns)
_XPU_BLOCK_SIZES = (16, 64, 1, 32, 128, 256)  # "any"; 16 is XPU's default
_DCP_TOPKS = (2048, 1024, 512)  # the DCP indexer merge's widths
_MAX_MODEL_LENS = (4000, 128, 163840)


@st.composite
def caller_configs(draw, *, calls: Sequence[tuple[str, str]] = CALLS, budget: Optional[profiles.SizeBudget] = None):
    """A call exactly as an attention backend makes it: its pattern, its block sizes,
    NUM_TOPK_TOKENS 2048 (512 / 1024 / 2048 under DCP), BLOCK_N 128, the persistent
    block table at the width the backend allocates, CUDA-graph padding rows and
    speculative runs of rows per request. ``calls`` narrows the (backend, pattern) menu."""
    budget = budget or profiles.active().budget
    backend, pattern = draw(st.sampled_from(tuple(calls)))
    block_size = draw(st.sampled_from(config.BACKEND_CALLS[backend][1] or _XPU_BLOCK_SIZES))
    topk = draw(st.sampled_from(_DCP_TOPKS)) if pattern in ("D", "E") else 2048
    tokens = draw(st.integers(1, budget.max_rows_for(topk // 128)))
    graph_padding = draw(st.integers(0, tokens - 1))
    per_req = draw(st.sampled_from((1, 2, 4)))
    requests = -(-(tokens - graph_padding) // per_req)
    invalid = draw(invalid_ratios())
    fields = dict(
        backend=backend, tokens=tokens, topk=topk, block_n=128, block_size=block_size,
        blocks_per_req=config.caller_width(draw(st.sampled_from(_MAX_MODEL_LENS)), block_size),
        graph_padding=graph_padding, tokens_per_req=per_req, num_reqs=requests + draw(st.integers(0, 2)),
        table=draw(st.sampled_from(("persistent", "padded", "random"))),
        layout=draw(st.sampled_from(("persistent", "contiguous"))),
        row_layout=draw(st.sampled_from(("tail_padded", "uniform", "mixed"))),
        invalid_ratio=invalid, out_of_range=min(draw(st.sampled_from((0.0, 0.05))), round(1.0 - invalid, 6)),
        seed=draw(st.integers(0, INT32_MAX)),
    )
    if pattern in ("D", "E"):  # E: the filter in place (FlashMLA with DCP on vLLM main)
        size = draw(st.sampled_from((4, 2, 8)))
        fields.update(mode="dcp", counts=True, compact=pattern == "D", dcp_size=size, dcp_rank=draw(st.integers(0, size - 1)),
                      interleave=draw(st.sampled_from(sorted({i for i in (1, 8, 32, block_size) if block_size % i == 0}))))
    else:
        fields.update(mode="convert", counts=pattern in ("A", "B"))
        if pattern == "B" or (pattern == "C" and backend == "flashmla-fp8"):
            fields.update(prefill_fraction=draw(st.sampled_from((0.5, 1.0, 0.1) if pattern == "B" else (0.5, 0.0))),
                          prefill_chunk=draw(st.sampled_from((2, 1, 3, 0))))
    return CaseConfig(**fields)
