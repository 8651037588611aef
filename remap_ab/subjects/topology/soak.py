"""The topology subject's soak (``Subject.soak``): fresh random ``TopologyCase``s beyond
the grid, covering what issue 42 asks the grid and soak to cover.

Every draw is new: rows log-uniform from 1 to the prefill sizes on a GPU (capped at
``CPU_MAX_ROWS`` on the CPU, where the Triton interpreter runs one program per row,
and at ``CPU_WIDE_ROWS`` there at the model widths; the size cap, ``max_size``, sets it), topk
log-uniform from 1 to 2176 with the model widths 2048 and 2176 in ``MODEL_WIDTH_SHARE``
of the draws, S from 1 to 64 (its edges 1, 2, 31-33, 63, 64 more often), every
context-length class (0, 1, below S, equal to S, above, far above: up to 2**31 - 1, or
mixed per row), every learned pattern (padding, duplicates, entries at or past L,
clustered, ...), keep and max_replacements at their edges half the time (keep 0, 1,
half, topk - 1, topk; max_replacements 0, 1, S - 1, S, S + 1, the room after keep less
one, the room, 2**31 - 1) and anywhere in range otherwise, and a fresh input seed.

A case is judged by the subject's own judge (A and B against the oracle, bit for bit,
and every property the PR states); a failing case's replay line is ``remap-ab replay
--subject topology '<case JSON>'`` with the ``--a``/``--b`` and the PYTHONPATH a custom
module needs. The size options come from soak_command.py by their names (``max_size``,
``max_topk``), their flags for the repeat line from ``SoakSettings.flags``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from remap_ab.errors import UsageError
from remap_ab.subject import SoakPlan, SoakSettings, bucket
from remap_ab.subjects.topology import calls, grid, report
from remap_ab.subjects.topology.config import (
    INT32_MAX,
    LEARNED_PATTERNS,
    LENS_PATTERNS,
    MAX_SEGMENTS,
    ROWS_DOMAIN,
    TOPK_DOMAIN,
    TopologyCase,
)

MODEL_WIDTHS = TOPK_DOMAIN[1:]  # 2048 and 2176
MODEL_WIDTH_SHARE = 0.3
GPU_MAX_ROWS = ROWS_DOMAIN[1]  # a prefill batch
PREFILL_ROWS = (1024, 2048, 8192, GPU_MAX_ROWS)  # drawn as they are in PREFILL_SHARE of the GPU's draws
PREFILL_SHARE = 0.05
CPU_MAX_ROWS = grid.CPU_MAX_ROWS
CPU_WIDE_ROWS = 4  # rows of a case at topk >= WIDE_TOPK in the interpreter
WIDE_TOPK = 1024
SEGMENT_EDGES = (1, 2, 31, 32, 33, 63, 64)
EDGE_SHARE = 0.5  # keep, max_replacements and S at an edge


@dataclass(frozen=True)
class Draw:
    """One drawn case and the labels the soak counts it under."""

    config: TopologyCase
    keep_edge: str  # which edge keep was drawn at ("inside": anywhere else)
    budget_edge: str  # which edge max_replacements was drawn at

    @property
    def case_id(self) -> str:
        return report.case_id(self.config)

    @property
    def extra(self) -> None:
        return None

    def labels(self) -> dict:
        c = self.config
        return {
            "rows": bucket(c.rows, (1, 8, 64, 1023, 16384)),
            "topk": str(c.topk) if c.topk in MODEL_WIDTHS or c.topk == 1 else bucket(c.topk, (1, 64, 1024, 2176)),
            "S": str(c.segments) if c.segments in SEGMENT_EDGES else bucket(c.segments, (1, 30, 62, 64)),
            "lens": c.lens,
            "learned": c.learned,
            "keep": self.keep_edge,
            "max_replacements": self.budget_edge,
            "budget": "0" if c.budget == 0 else "< S" if c.budget < c.segments else "S" if c.budget == c.segments
            else "> S",
        }


def _log_uniform(rng: random.Random, top: int) -> int:
    return min(top, max(1, int(math.exp(rng.uniform(0.0, math.log(top + 1))))))


def _edge(rng: random.Random, edges: dict) -> tuple[str, int]:
    name = rng.choice(list(edges))
    return name, edges[name]


def draw(rng: random.Random, max_rows: int, max_topk: int, wide_rows: int, prefill_share: float = 0.0) -> Draw:
    """One fresh case (every field drawn from ``rng``)."""
    widths = [w for w in MODEL_WIDTHS if w <= max_topk]
    topk = rng.choice(widths) if widths and rng.random() < MODEL_WIDTH_SHARE else _log_uniform(rng, max_topk)
    cap = min(max_rows, wide_rows) if topk >= WIDE_TOPK else max_rows
    rows = _log_uniform(rng, cap)
    if prefill_share and rng.random() < prefill_share:
        rows = rng.choice([r for r in PREFILL_ROWS if r <= max_rows] or [cap])
    segments = rng.choice(SEGMENT_EDGES) if rng.random() < EDGE_SHARE else rng.randint(1, MAX_SEGMENTS)
    if rng.random() < EDGE_SHARE:
        keep_edge, keep = _edge(rng, {"0": 0, "1": min(1, topk), "half": topk // 2, "topk-1": topk - 1, "topk": topk})
    else:
        keep_edge, keep = "inside", rng.randint(0, topk)
    free = topk - keep
    if rng.random() < EDGE_SHARE:
        budget_edge, max_replacements = _edge(rng, {
            "0": 0, "1": 1, "S-1": segments - 1, "S": segments, "S+1": segments + 1, "free-1": max(free - 1, 0),
            "free": free, "huge": INT32_MAX})
    else:
        budget_edge, max_replacements = "inside", rng.randint(0, topk + 2)
    case = TopologyCase(rows=rows, topk=topk, segments=segments, keep=keep, max_replacements=max_replacements,
                        lens=rng.choice(LENS_PATTERNS), learned=rng.choice(tuple(LEARNED_PATTERNS)),
                        seed=rng.randrange(2**32))
    return Draw(case, keep_edge, budget_edge)


def draws_from(rng: random.Random, max_rows: int, max_topk: int, wide_rows: int,
               prefill_share: float = 0.0) -> Iterator[Draw]:
    """The endless stream of fresh cases from ``rng``."""
    while True:
        yield draw(rng, max_rows, max_topk, wide_rows, prefill_share)


def _flag(settings: SoakSettings, name: str) -> str:
    """The command line's flag of size option ``name`` (soak_command.py's)."""
    try:
        return settings.flags[name]
    except KeyError:
        raise UsageError(f"the soak's settings name no flag for its option {name!r} (SoakSettings.flags); "
                         "give each option's flag beside its value") from None


def plan(settings: SoakSettings) -> SoakPlan:
    """The topology's soak for ``settings`` (``max_size``: the most rows; ``max_topk``: the
    largest topk); ImplementationError for an A or B that does not load."""
    o = settings.options
    on_gpu = settings.device == "cuda"
    if o.get("fresh_every"):
        raise UsageError("--fresh-every is the remap's (its variants are compiles); the topology soak draws every "
                         "case fresh: drop it")
    for name, role in ((settings.a, "a"), (settings.b, "b")):
        calls.resolve(name, role)  # a bad A or B: one line, before any worker starts
    size = o.get("max_size")
    max_rows = size or (GPU_MAX_ROWS if on_gpu else CPU_MAX_ROWS)
    max_topk = o.get("max_topk") or max(TOPK_DOMAIN)
    wide_rows = max_rows if on_gpu or size else CPU_WIDE_ROWS
    prefill_share = PREFILL_SHARE if on_gpu and not size else 0.0
    if on_gpu:
        where = f"{settings.workers} worker(s) on GPU(s) {','.join(settings.gpus)}; rows up to {max_rows}"
    else:
        where = (f"CPU (the Triton interpreter): {settings.workers} worker(s), rows capped at {max_rows}"
                 + ("" if size else f" ({wide_rows} at topk {WIDE_TOPK} and over; prefill sizes run on a GPU"
                                        + (f"; {settings.flags['max_size']} to change)" if "max_size" in settings.flags
                                           else ")")))
    widths = [w for w in MODEL_WIDTHS if w <= max_topk]
    describe = (f"{where}; topk 1 to {max_topk}" + (f" ({' and '.join(map(str, widths))} in "
                                                   f"{MODEL_WIDTH_SHARE:.0%} of draws)" if widths else "")
                + f", S 1 to {MAX_SEGMENTS}, keep and max_replacements at their edges half the time")
    repeat: list[tuple[str, Optional[str]]] = [(_flag(settings, name), str(o[name]))
                                               for name in ("max_size", "max_topk") if o.get(name)]
    return SoakPlan(draws=lambda rng: draws_from(rng, max_rows, max_topk, wide_rows, prefill_share),
                    describe=describe, repeat=repeat,
                    batch=(o.get("batch") or 16) if on_gpu else 1)
