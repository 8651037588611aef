"""The case configuration: one frozen, hashable value that names everything a case
needs. Inputs are generated from it (``inputs.py``), so a configuration *is* the case;
its short stable hash, the case ID, is how the tool names it everywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, Mapping

from remap_ab.errors import ConfigError

MODES = ("convert", "dcp")
NEGATIVE_KINDS = ("minus_one", "any")
TABLE_KINDS = ("random", "padded", "huge")
ROW_LAYOUTS = ("uniform", "mixed", "one_tile", "tail_padded", "owned")

# The plain wrapper has no DCP or compaction arguments; mode "convert" pins them here.
_CONVERT_NORMALISED = {"dcp_size": 1, "dcp_rank": 0, "interleave": 1, "compact": False}

# Bumped whenever input generation changes, so case IDs never alias different tensors.
INPUT_FORMAT_VERSION = 1


@dataclass(frozen=True)
class CaseConfig:
    """One A/B case. Field defaults are the shapes vLLM's sparse MLA decode uses.

    mode           "convert": ``triton_convert_req_index_to_global_index``;
                   "dcp": ``triton_filter_and_convert_dcp_index``.
    tokens         T, query-token rows.
    topk           K = NUM_TOPK_TOKENS.
    block_size     B, KV-cache block size.
    block_n        BLOCK_N, the column tile of the tiled path.
    blocks_per_req W, width of the block table (a compile-time constant).
    num_reqs       rows of the block table.
    invalid_ratio  fraction of lanes set to a negative id.
    out_of_range   fraction of lanes whose block lands at or beyond W.
    negatives      "minus_one": invalid lanes are -1; "any": also -2, -B-1, INT32_MIN.
    table          "random" physical ids; "padded": some entries -1 or 0;
                   "huge": ids near INT32_MAX / B so ``base * B`` wraps.
    row_layout     "uniform": lanes drawn independently; "one_tile": only one
                   BLOCK_N tile per row holds valid lanes; "tail_padded": valid lanes
                   first, -1 after (how the indexer pads short sequences); "mixed":
                   rows cycle through uniform, all-valid, all-invalid, one-tile and
                   tail-padded; "owned": as uniform, but every in-range token
                   belongs to this DCP rank, so a row without padding is *full*
                   after filtering (count == K) — unreachable otherwise, since
                   ownership is random per lane.
    dcp_size, dcp_rank, interleave   DCP world size, this rank, interleave size.
    compact        compact_valid_to_front.
                   (mode "convert" normalises these four to 1, 0, 1, False.)
    counts         return_valid_counts.
    prefill_fraction  fraction of rows served from the prefill workspace (convert
                   mode; > 0 turns HAS_PREFILL_WORKSPACE on).
    seed           the input seed.
    """

    mode: str = "dcp"
    tokens: int = 4
    topk: int = 2048
    block_size: int = 64
    block_n: int = 128
    blocks_per_req: int = 64
    num_reqs: int = 2
    invalid_ratio: float = 0.3
    out_of_range: float = 0.0
    negatives: str = "minus_one"
    table: str = "random"
    row_layout: str = "uniform"
    dcp_size: int = 4
    dcp_rank: int = 0
    interleave: int = 1
    compact: bool = True
    counts: bool = True
    prefill_fraction: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.mode == "convert":
            # The plain wrapper has no DCP or compaction arguments: normalise them so
            # one convert case has one ID.
            for name, value in _CONVERT_NORMALISED.items():
                object.__setattr__(self, name, value)
        validate(self)

    # Derived facts, named once so every consumer agrees on them.
    @property
    def has_prefill(self) -> bool:
        return self.mode == "convert" and self.prefill_fraction > 0

    @property
    def is_dcp(self) -> bool:
        """The DCP wrapper with dcp_size > 1 (size 1 delegates to the plain convert)."""
        return self.mode == "dcp" and self.dcp_size > 1

    @property
    def compacts(self) -> bool:
        return self.is_dcp and self.compact

    @property
    def counts_computed(self) -> bool:
        """Whether the kernel counts valid lanes (SPEC §6: compaction implies counting)."""
        return self.counts or self.compacts

    @property
    def counts_returned(self) -> bool:
        return self.counts

    @property
    def topk_is_pow2(self) -> bool:
        return self.topk & (self.topk - 1) == 0

    @property
    def tiles_per_row(self) -> int:
        return self.topk // self.block_n

    @property
    def effective_dcp(self) -> tuple[int, int, int]:
        """(size, rank, interleave) the kernel really runs with."""
        if self.is_dcp:
            return self.dcp_size, self.dcp_rank, self.interleave
        return 1, 0, 1

    @property
    def case_id(self) -> str:
        return case_id(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> "CaseConfig":
        return dataclasses.replace(self, **changes)

    def cli_args(self) -> str:
        """Options for ``remap-ab run`` that rebuild exactly this case."""
        parts = []
        # Fields that mode "convert" normalises need no flag: any value rebuilds the case.
        implied = _CONVERT_NORMALISED if self.mode == "convert" else ()
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default or f.name in implied:
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):
                parts.append(flag if value else "--no-" + f.name.replace("_", "-"))
            else:
                parts.append(f"{flag} {value}")
        return " ".join(parts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CaseConfig":
        names = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown configuration field(s) {', '.join(unknown)}; known fields: {', '.join(names)}"
            )
        coerced = {}
        for name, value in data.items():
            coerced[name] = _coerce(name, names[name].type, value)
        return cls(**coerced)


def _coerce(name: str, type_name: str, value: Any) -> Any:
    try:
        if type_name == "bool":
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered in ("1", "true", "yes", "on"):
                    return True
                if lowered in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            return bool(value)
        if type_name == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if type_name == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not a valid {type_name}") from None


def case_id(config: CaseConfig) -> str:
    """A 12-hex-digit ID that depends only on the configuration's values."""
    payload = json.dumps(
        {"v": INPUT_FORMAT_VERSION, **config.to_dict()}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


INT32_MAX = 2**31 - 1


def validate(c: CaseConfig) -> None:
    """Raise ConfigError naming the first thing that makes no sense."""

    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(message)

    need(c.mode in MODES, f"mode={c.mode!r} is not one of {', '.join(MODES)}")
    need(c.negatives in NEGATIVE_KINDS, f"negatives={c.negatives!r} is not one of {', '.join(NEGATIVE_KINDS)}")
    need(c.table in TABLE_KINDS, f"table={c.table!r} is not one of {', '.join(TABLE_KINDS)}")
    need(c.row_layout in ROW_LAYOUTS, f"row_layout={c.row_layout!r} is not one of {', '.join(ROW_LAYOUTS)}")
    need(c.tokens >= 1, f"tokens={c.tokens}: a case needs at least one token row; use --tokens 1 or more")
    need(c.tokens <= 1 << 20, f"tokens={c.tokens} is beyond the supported 1,048,576 rows")
    need(c.block_n >= 1, f"block_n={c.block_n} must be positive")
    need(c.topk >= 1, f"topk={c.topk} must be positive")
    need(
        c.topk % c.block_n == 0,
        f"topk={c.topk} is not a multiple of block_n={c.block_n}; the kernels require "
        f"NUM_TOPK_TOKENS % BLOCK_N == 0",
    )
    need(_is_pow2(c.block_n), f"block_n={c.block_n} must be a power of two (tl.arange needs one)")
    need(c.block_size >= 1, f"block_size={c.block_size} must be positive")
    need(c.blocks_per_req >= 1, f"blocks_per_req={c.blocks_per_req} must be at least 1")
    need(c.num_reqs >= 1, f"num_reqs={c.num_reqs} must be at least 1")
    need(0.0 <= c.invalid_ratio <= 1.0, f"invalid_ratio={c.invalid_ratio} must lie in [0, 1]")
    need(0.0 <= c.out_of_range <= 1.0, f"out_of_range={c.out_of_range} must lie in [0, 1]")
    need(
        c.invalid_ratio + c.out_of_range <= 1.0 + 1e-9,
        f"invalid_ratio + out_of_range = {c.invalid_ratio + c.out_of_range:g} exceeds 1",
    )
    need(0.0 <= c.prefill_fraction <= 1.0, f"prefill_fraction={c.prefill_fraction} must lie in [0, 1]")
    need(
        c.prefill_fraction == 0 or c.mode == "convert",
        "prefill_fraction > 0 needs mode=convert: the DCP wrapper never uses the prefill workspace",
    )
    need(c.dcp_size >= 1, f"dcp_size={c.dcp_size} must be at least 1")
    need(
        0 <= c.dcp_rank < c.dcp_size,
        f"dcp_rank={c.dcp_rank} must satisfy 0 <= dcp_rank < dcp_size={c.dcp_size}",
    )
    need(c.interleave >= 1, f"interleave={c.interleave} must be at least 1")
    need(
        c.block_size % c.interleave == 0,
        f"interleave={c.interleave} does not divide block_size={c.block_size}; the DCP "
        f"wrapper requires BLOCK_SIZE % cp_kv_cache_interleave_size == 0",
    )
    # The largest in-range global position must stay in int32 (SPEC §2 precondition).
    need(
        c.blocks_per_req * c.block_size * c.dcp_size <= INT32_MAX,
        "blocks_per_req * block_size * dcp_size overflows int32",
    )
    need(c.seed >= 0, f"seed={c.seed} must be non-negative")


CONFIG_FIELDS = tuple(f.name for f in fields(CaseConfig))
