"""The cases the mutant checks run, other than the property suite's: the sweep subset
and the race check's cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.parts.mutants.catalogue import Mutant

# The sweep grid's points (remap_ab/subjects/remap/grid/grid.toml) that the mutant check runs: every path
# (convert, counts, prefill, dcp_size 1, DCP compacted and in place), K = 384 (tiled in
# both kernels) and 512 (single tile in new when counting), out-of-range lanes on, and
# two invalid ratios, which rotate the DCP size/interleave (4x1, 4x64), the flags and
# the negative-id kinds through the subset. 36 cases.
SWEEP_FILTERS = ("tokens=3", "k=384,512", "oor=on", "invalid=0.3,0.7")


@dataclass(frozen=True)
class SweepCase:
    config: CaseConfig
    label: str = ""

    @property
    def case_id(self) -> str:
        return self.config.case_id


def _edge_cases() -> list[SweepCase]:
    """Cases the grid does not hold: DCP rows whose every lane this rank owns
    (row_layout "owned"), so a compacted row is full (count == K), on the new kernel's
    single-tile path (K = 512) and on the tiled one (K = 384)."""
    base: dict[str, Any] = dict(mode="dcp", tokens=3, block_size=64, block_n=128, blocks_per_req=64, dcp_size=4, dcp_rank=1,
                invalid_ratio=0.0, out_of_range=0.0, row_layout="owned", compact=True, counts=True)
    return [
        SweepCase(CaseConfig(**dict(base, topk=512)), "edge full-row k=512"),
        SweepCase(CaseConfig(**dict(base, topk=384, interleave=64, dcp_rank=3)), "edge full-row k=384"),
    ]


def sweep_subset() -> list[SweepCase]:
    """The grid points selected by SWEEP_FILTERS, then the edge cases."""

    g = gridmod.load()
    points = g.select(gridmod.parse_filters(g, list(SWEEP_FILTERS)))
    cases = [SweepCase(p.config, " ".join(f"{k}={v}" for k, v in p.labels)) for p in points]
    return cases + _edge_cases()


# The race check: multi-tile rows, where the tiles of a row share the count and the
# compaction slot counter. On the CPU they stay tiny (each run is a full interpreted
# launch under a permuted program order); on a GPU many rows and tiles run at once,
# which is what gives a race its chance.
_CPU_RACE: tuple[dict[str, Any], ...] = (
    dict(mode="dcp", tokens=2, topk=384, block_n=128, block_size=16, blocks_per_req=16, dcp_size=2, dcp_rank=1),
    dict(mode="convert", tokens=2, topk=384, block_n=128, block_size=16, blocks_per_req=16, counts=True),
)
_GPU_RACE: tuple[dict[str, Any], ...] = (
    dict(mode="dcp", tokens=256, topk=1536, block_n=128, dcp_size=4, dcp_rank=0),
    dict(mode="convert", tokens=256, topk=1536, block_n=128, counts=True),
    dict(mode="dcp", tokens=1024, topk=384, block_n=128, dcp_size=2, dcp_rank=1, interleave=64),
    dict(mode="dcp", tokens=64, topk=2048, block_n=128, dcp_size=4, dcp_rank=3, invalid_ratio=0.1),
)
RACE_RUNS = {"cpu": 4, "cuda": 10}  # runs per case and condition (schedules on CPU; quiet and contended on GPU)


def race_cases(m: Mutant, device: str) -> list[CaseConfig]:
    """The mutant's witness case first, then the multi-tile cases for ``device``."""
    extra = _GPU_RACE if device == "cuda" else _CPU_RACE
    configs = [m.witness_config()] + [CaseConfig(**c) for c in extra]
    return list({c.case_id: c for c in configs}.values())
