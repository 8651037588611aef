"""The case configuration: one frozen, hashable value that names everything a case
needs. Inputs are generated from it (``inputs.py``), so a configuration *is* the case;
its short stable hash, the case ID, is how the tool names it everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, get_type_hints

from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.case.layouts import LAYOUT_NAMES

MODES = ("convert", "dcp")
NEGATIVE_KINDS = ("minus_one", "any")
TABLE_KINDS = ("random", "padded", "huge", "persistent")
ROW_LAYOUTS = ("uniform", "mixed", "one_tile", "tail_padded", "owned")
# The sparse-MLA attention backends that call the remap (issue 24); "none": a case that
# names no caller. Each backend's calls, block sizes and what it reads of the outputs
# are declared in backend_views.py; the names and display words are here because the
# configuration validates them.
BACKENDS = ("none", "flashmla-bf16", "flashmla-fp8", "fa3", "flashinfer-sm100", "flashinfer-sm120", "xpu",
            "flashinfer-sm90", "cutlass-fa3", "hisparse", "index-group")
BACKEND_NAMES = {
    "none": "", "flashmla-bf16": "FlashMLA bf16", "flashmla-fp8": "FlashMLA fp8", "fa3": "FA3 SM90",
    "flashinfer-sm100": "FlashInfer SM100", "flashinfer-sm120": "FlashInfer SM120", "xpu": "XPU",
    "flashinfer-sm90": "FlashInfer SM90", "cutlass-fa3": "CUTLASS FA3", "hisparse": "HiSparse",
    "index-group": "index group",
}
# The call patterns (``CaseConfig.pattern``) and block sizes each backend uses
# (vLLM at the #50365 merge, 9e6be4a7, and vLLM main, docs/callers-main.md); None: any block size.
BACKEND_CALLS: dict[str, tuple[tuple[str, ...], tuple[int, ...] | None]] = {
    "flashmla-bf16": (("A", "E"), (64,)),
    "flashmla-fp8": (("A", "B", "C"), (64,)),
    "fa3": (("A",), (64,)),
    "flashinfer-sm100": (("A", "D"), (32, 64)),
    "flashinfer-sm120": (("C",), (64, 256)),
    "xpu": (("C",), None),
    "flashinfer-sm90": (("A",), (64,)),
    "cutlass-fa3": (("A",), (64,)),
    "hisparse": (("A",), None),
    "index-group": (("A", "C"), None),
}


def caller_width(max_model_len: int, block_size: int) -> int:
    """The block-table width W the backends allocate: enough blocks for
    ``max_model_len`` tokens, rounded up to a multiple of 128 tokens' worth of blocks."""
    blocks = -(-max_model_len // block_size)
    step = max(1, 128 // block_size)
    return -(-blocks // step) * step

# The plain wrapper has no DCP or compaction arguments; mode "convert" pins them here.
_CONVERT_NORMALISED = {"dcp_size": 1, "dcp_rank": 0, "interleave": 1, "compact": False}

# Bumped whenever input generation changes, so case IDs never alias different tensors.
INPUT_FORMAT_VERSION = 1
# Fields added after version 1 enter the case ID only when they differ from their
# default, so every earlier case keeps its ID (and its saved reports replay).
ADDED_FIELDS = ("layout", "backend", "graph_padding", "tokens_per_req", "prefill_chunk", "block_stride",
                "out_buffers", "counts_out")
# Of those, the fields added after a rejection call's ID (rejections.py) came to hash its
# base's every field: left out there at their default, so rejection IDs do not move.
ADDED_SINCE_REJECTION_IDS = ("counts_out",)


def _field(default: Any, help: str, choices: tuple = ()) -> Any:
    """A CaseConfig field with its documentation: ``remap-ab run --help`` prints it,
    so the meaning, default and allowed values are written once, here."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class CaseConfig:
    """One A/B case. Field defaults are the shapes vLLM's sparse MLA decode uses; each
    field's meaning is in its ``help`` metadata (``field_help``). Values are strictly
    typed: an int field takes an int (not a bool, not a string), a ratio takes an int
    or a float, a flag takes a bool. ``from_dict`` converts strings ("3", "true") for
    the command line and saved JSON."""

    mode: str = _field("dcp", "which wrapper runs: convert = triton_convert_req_index_to_global_index, "
                              "dcp = triton_filter_and_convert_dcp_index", MODES)
    tokens: int = _field(4, "T, query-token rows (1 to 1,048,576)")
    topk: int = _field(2048, "K = NUM_TOPK_TOKENS, lanes per row; a multiple of block_n")
    block_size: int = _field(64, "B = BLOCK_SIZE, tokens per KV-cache block (>= 1)")
    block_n: int = _field(128, "BLOCK_N, the column tile of the tiled path (a power of two dividing topk)")
    blocks_per_req: int = _field(64, "W, width of the block table (a compile-time constant: each W compiles a kernel)")
    num_reqs: int = _field(2, "Rq, rows (request slots) of the block table")
    invalid_ratio: float = _field(0.3, "fraction of lanes set to a negative id, in [0, 1]")
    out_of_range: float = _field(0.0, "fraction of lanes whose block lands at or beyond W, in [0, 1]; "
                                      "invalid_ratio + out_of_range <= 1")
    negatives: str = _field("minus_one", "invalid lane values: minus_one = all -1; any = also -2, -B-1, "
                                         "INT32_MIN", NEGATIVE_KINDS)
    table: str = _field("random", "block table: random physical ids; padded = some entries -1 or 0; "
                                  "huge = ids near INT32_MAX / B so base * B wraps; persistent = as the "
                                  "attention backends build it: each request's used blocks, then block 0, "
                                  "and rows of requests no real token reads all 0", TABLE_KINDS)
    row_layout: str = _field("uniform", "valid lanes per row: uniform = drawn independently; one_tile = one "
                                        "BLOCK_N tile per row holds them; tail_padded = valid first, -1 after; "
                                        "mixed = rows cycle through all-valid, all-invalid, one-tile, tail-padded; "
                                        "owned = as uniform but every in-range token belongs to this DCP rank",
                             ROW_LAYOUTS)
    dcp_size: int = _field(4, "DCP world size S (dcp mode; 1 delegates to the plain convert)")
    dcp_rank: int = _field(0, "this DCP rank, 0 <= rank < dcp_size")
    interleave: int = _field(1, "cp_kv_cache_interleave_size I, dividing block_size")
    compact: bool = _field(True, "compact_valid_to_front (dcp mode with dcp_size > 1)")
    counts: bool = _field(True, "return_valid_counts")
    prefill_fraction: float = _field(0.0, "fraction of rows served from the prefill workspace, in [0, 1] "
                                          "(convert mode; > 0 turns HAS_PREFILL_WORKSPACE on)")
    seed: int = _field(0, "the input seed (>= 0)")
    layout: str = _field("contiguous", "memory layout of the inputs (the same values): contiguous; token_rows = "
                                       "token_indices rows wider than K; token_cols = a column-strided "
                                       "token_indices; table_slice = block_table a column slice of a wider table; "
                                       "req_strided = a strided req_id; offset = non-zero storage offsets; "
                                       "mixed = all at once; persistent = as the attention backends pass them (the "
                                       "first rows of larger buffers pre-filled with -1 / 0)", LAYOUT_NAMES)
    backend: str = _field("none", "the attention backend whose call this case is (its pattern and block sizes "
                                  "must be that backend's); its view of A's and B's outputs is checked too",
                          BACKENDS)
    graph_padding: int = _field(0, "trailing token rows that are CUDA-graph padding: req_id 0, every index -1 "
                                   "(0 to tokens - 1)")
    tokens_per_req: int = _field(0, "0 = each row's request drawn on its own; n >= 1 = consecutive runs of n rows "
                                    "share a request (speculative decoding), request i's rows first, as the "
                                    "scheduler orders them; with prefill, the last requests are prefill ones")
    prefill_chunk: int = _field(0, "prefill workspace starts: 0 = one request after another; c >= 1 = rebased to 0 "
                                   "every c prefill requests, as chunked prefill does (e.g. 0, 10, 0, 20)")
    block_stride: int = _field(0, "BLOCK_STRIDE_ROWS, physical KV rows per block (vLLM main, SPEC §9): 0 = not "
                                  "passed (the wrapper's None, meaning BLOCK_SIZE); n >= 1 = passed as n, e.g. "
                                  "the block size itself (a dense cache) or 4096 with block size 64 (packed)")
    out_buffers: bool = _field(False, "caller-owned outputs (vLLM main forks, SPEC §10): the wrapper called is "
                                      "handed out= and, when counting, valid_counts_out= (or the names its "
                                      "signature gives them), both poisoned")
    counts_out: bool = _field(True, "with out_buffers and counts: valid_counts_out= is handed too; off: out= "
                                    "alone, the wrapper returning counts of its own")

    def __post_init__(self):
        _check_types(self)
        if self.mode == "convert":
            # The plain wrapper has no DCP or compaction arguments: normalise them so
            # one convert case has one ID.
            for name, value in _CONVERT_NORMALISED.items():
                object.__setattr__(self, name, value)
        if not (self.out_buffers and self.counts):
            object.__setattr__(self, "counts_out", True)  # no caller-owned counts to leave out: one case, one ID
        validate(self)

    # Derived facts, named once so every consumer agrees on them.
    @property
    def has_prefill(self) -> bool:
        return self.mode == "convert" and self.prefill_fraction > 0

    @property
    def pattern(self) -> str:
        """The attention backends' call pattern (issue 24): A convert with counts; B A
        with the prefill workspace; C convert without counts (the tiled path); D the DCP
        filter with counts and compaction; E the DCP filter with counts, in place
        (FlashMLA on vLLM main); "" for any other call."""
        if self.mode == "convert":
            if not self.counts:
                return "C"
            return "B" if self.has_prefill else "A"
        if self.is_dcp and self.compact and self.counts:
            return "D"
        if self.is_dcp and not self.compact and self.counts:
            return "E"
        return ""

    @property
    def caller(self) -> str:
        """Who makes this call, in words, e.g. "FlashInfer SM100, DCP 4, rank 1"
        ("" when the case names no backend)."""
        if self.backend == "none":
            return ""
        words = [BACKEND_NAMES[self.backend], f"pattern {self.pattern}", f"block {self.block_size}"]
        if self.block_stride:
            words.append(f"BLOCK_STRIDE_ROWS {self.block_stride}")
        if self.out_buffers:
            words.append("caller-owned out")
        if self.is_dcp:
            words[1:1] = [f"DCP {self.dcp_size}", f"rank {self.dcp_rank}", f"interleave {self.interleave}"]
        if self.graph_padding:
            words.append(f"{self.graph_padding} graph-padding rows")
        if self.tokens_per_req > 1:
            words.append(f"{self.tokens_per_req} tokens per request")
        return ", ".join(words)

    @property
    def row_stride(self) -> int:
        """The rows one block id stands for in the output's values (SPEC §9)."""
        return self.block_stride or self.block_size

    @property
    def real_tokens(self) -> int:
        """Token rows that are not CUDA-graph padding."""
        return self.tokens - self.graph_padding

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

    @functools.cached_property
    def case_id(self) -> str:
        # Cached: a sweep asks for it about six times per case, and each time is a JSON
        # dump and a sha256 (a frozen dataclass still has a __dict__ for the cache).
        return case_id(self)

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar: no dataclasses.asdict (a deepcopy per field; the grid's
        # expansion asks for some 14,000 of these).
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def rejection_id_dict(self) -> dict[str, Any]:
        """``to_dict`` less the fields added since rejection IDs were first hashed, where
        they hold their default."""
        values = self.to_dict()
        for name in ADDED_SINCE_REJECTION_IDS:
            if values[name] == _FIELDS[name].default:
                del values[name]
        return values

    def replace(self, **changes) -> CaseConfig:
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
    def from_dict(cls, data: Mapping[str, Any]) -> CaseConfig:
        """A configuration from plain values, strings converted ("3", "true", "0.3"):
        schema.config_input, CaseConfig's fields as a lax model. A field that is no
        valid value of its type is one ConfigError naming it."""
        from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

        unknown = sorted(set(data) - set(FIELD_TYPES))
        if unknown:
            raise ConfigError(
                f"unknown configuration field(s) {', '.join(unknown)}; known fields: {', '.join(FIELD_TYPES)}"
            )
        if all(_exact(FIELD_TYPES[name], value) for name, value in data.items()):
            # Nothing to convert: the constructor's strict checks are the whole of it
            # (the grids build thousands of cases this way; pydantic costs ~0.1 ms each).
            return cls(**data)
        plain = {name: _plain(value) for name, value in data.items()}
        converted = schema.load(schema.config_input(tuple(FIELD_TYPES.items())), plain, where="configuration", error=ConfigError,
                                describe=_not_valid)
        return cls(**converted.model_dump(exclude_unset=True))


def _not_valid(error: dict) -> str:
    name = str(error["loc"][0])
    return f"{name}={error.get('input')!r} is not a valid {FIELD_TYPES[name].__name__}"


def field_help(name: str) -> str:
    """``name``'s meaning, allowed values and default, for ``--help``."""
    f = _FIELDS[name]
    default = ("on" if f.default else "off") if isinstance(f.default, bool) else f.default
    choices = f"one of {', '.join(f.metadata['choices'])}; " if f.metadata["choices"] else ""
    return f"{f.metadata['help']} ({choices}default {default})"


def _check_types(c: CaseConfig) -> None:
    """Strict types for the Python API: ``tokens="3"`` and ``tokens=True`` are refused
    (a bool is not a count), ``compact="no"`` too (a non-empty string is truthy);
    ints are accepted for ratios and stored as floats, so 0 and 0.0 are one case."""
    for name, want in FIELD_TYPES.items():
        value = getattr(c, name)
        if type(value) is want:
            continue  # the common case, and the cheap test: an exact type needs no conversion
        value = _plain(value)
        if want is bool:
            ok = isinstance(value, bool)
            if ok:
                object.__setattr__(c, name, value)
        elif want is int:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if ok:
                object.__setattr__(c, name, int(value))
        elif want is float:
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
            if ok:
                object.__setattr__(c, name, float(value))
        else:
            ok = isinstance(value, want)
            if ok:
                object.__setattr__(c, name, value)
        if not ok:
            wanted = _TYPE_WORDS[want]
            raise ConfigError(
                f"{name}={value!r} is a {type(value).__name__}, not {wanted}; pass {wanted} "
                f"(CaseConfig.from_dict converts strings such as \"3\" or \"true\")"
            )


_TYPE_WORDS = {int: "an int", float: "a number (int or float)", bool: "a bool (True or False)", str: "a str"}


def _exact(want: type, value: Any) -> bool:
    """Whether ``value`` already is what a field of type ``want`` stores (an int for a
    ratio too: the constructor makes it a float)."""
    return type(value) is want or (want is float and type(value) is int)


def _plain(value: Any) -> Any:
    """A numpy scalar (a pandas cell, say) as the Python value it holds."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def case_id(config: CaseConfig) -> str:
    """A 12-hex-digit ID that depends only on the configuration's values."""
    values = config.to_dict()
    for name in ADDED_FIELDS:
        if values[name] == _FIELDS[name].default:
            del values[name]
    payload = json.dumps({"v": INPUT_FORMAT_VERSION, **values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


INT32_MAX = 2**31 - 1


def validate(c: CaseConfig) -> None:
    """Raise ConfigError naming the first thing that makes no sense."""

    def need(ok: bool, message: Callable[[], str]) -> None:
        # The message is made only when it is raised: a grid validates thousands of cases.
        if not ok:
            raise ConfigError(message())

    need(c.mode in MODES, lambda: f"mode={c.mode!r} is not one of {', '.join(MODES)}")
    need(c.negatives in NEGATIVE_KINDS, lambda: f"negatives={c.negatives!r} is not one of {', '.join(NEGATIVE_KINDS)}")
    need(c.table in TABLE_KINDS, lambda: f"table={c.table!r} is not one of {', '.join(TABLE_KINDS)}")
    need(c.row_layout in ROW_LAYOUTS, lambda: f"row_layout={c.row_layout!r} is not one of {', '.join(ROW_LAYOUTS)}")
    need(c.layout in LAYOUT_NAMES, lambda: f"layout={c.layout!r} is not one of {', '.join(LAYOUT_NAMES)}")
    need(c.tokens >= 1, lambda: f"tokens={c.tokens}: a case needs at least one token row; use --tokens 1 or more")
    need(c.tokens <= 1 << 20, lambda: f"tokens={c.tokens} is beyond the supported 1,048,576 rows")
    need(c.block_n >= 1, lambda: f"block_n={c.block_n} must be positive")
    need(c.topk >= 1, lambda: f"topk={c.topk} must be positive")
    need(
        c.topk % c.block_n == 0,
        lambda: f"topk={c.topk} is not a multiple of block_n={c.block_n}; the kernels require "
        f"NUM_TOPK_TOKENS % BLOCK_N == 0",
    )
    need(_is_pow2(c.block_n), lambda: f"block_n={c.block_n} must be a power of two (tl.arange needs one)")
    need(c.block_size >= 1, lambda: f"block_size={c.block_size} must be positive")
    need(c.blocks_per_req >= 1, lambda: f"blocks_per_req={c.blocks_per_req} must be at least 1")
    need(c.num_reqs >= 1, lambda: f"num_reqs={c.num_reqs} must be at least 1")
    need(0.0 <= c.invalid_ratio <= 1.0, lambda: f"invalid_ratio={c.invalid_ratio} must lie in [0, 1]")
    need(0.0 <= c.out_of_range <= 1.0, lambda: f"out_of_range={c.out_of_range} must lie in [0, 1]")
    need(
        c.invalid_ratio + c.out_of_range <= 1.0 + 1e-9,
        lambda: f"invalid_ratio + out_of_range = {c.invalid_ratio + c.out_of_range:g} exceeds 1",
    )
    need(0.0 <= c.prefill_fraction <= 1.0, lambda: f"prefill_fraction={c.prefill_fraction} must lie in [0, 1]")
    need(
        c.prefill_fraction == 0 or c.mode == "convert",
        lambda: "prefill_fraction > 0 needs mode=convert: the DCP wrapper never uses the prefill workspace",
    )
    need(c.dcp_size >= 1, lambda: f"dcp_size={c.dcp_size} must be at least 1")
    need(
        0 <= c.dcp_rank < c.dcp_size,
        lambda: f"dcp_rank={c.dcp_rank} must satisfy 0 <= dcp_rank < dcp_size={c.dcp_size}",
    )
    need(c.interleave >= 1, lambda: f"interleave={c.interleave} must be at least 1")
    need(
        c.block_size % c.interleave == 0,
        lambda: f"interleave={c.interleave} does not divide block_size={c.block_size}; the DCP "
        f"wrapper requires BLOCK_SIZE % cp_kv_cache_interleave_size == 0",
    )
    # The largest in-range global position must stay in int32 (SPEC §2 precondition).
    span = c.blocks_per_req * c.block_size * c.dcp_size
    need(
        span <= INT32_MAX,
        lambda: f"blocks_per_req * block_size * dcp_size = {span:,} overflows int32 (at most {INT32_MAX:,}); "
        f"shrink blocks_per_req or block_size",
    )
    # Lane offsets (row * K + column) are int32 inside the kernels.
    need(
        c.tokens * c.topk <= INT32_MAX,
        lambda: f"tokens * topk = {c.tokens * c.topk:,} lanes overflows the kernels' int32 offsets (at most {INT32_MAX:,})",
    )
    need(c.seed >= 0, lambda: f"seed={c.seed} must be non-negative")
    need(c.backend in BACKENDS, lambda: f"backend={c.backend!r} is not one of {', '.join(BACKENDS)}")
    need(0 <= c.graph_padding < c.tokens,
         lambda: f"graph_padding={c.graph_padding} must lie in [0, tokens - 1 = {c.tokens - 1}]: at least one real row")
    need(c.tokens_per_req >= 0, lambda: f"tokens_per_req={c.tokens_per_req} must be 0 (drawn) or at least 1")
    if c.tokens_per_req:
        requests = -(-c.real_tokens // c.tokens_per_req)
        need(c.num_reqs >= requests,
             lambda: f"num_reqs={c.num_reqs} is fewer than the {requests} requests that {c.real_tokens} real rows at "
             f"tokens_per_req={c.tokens_per_req} need; raise num_reqs")
    need(0 <= c.block_stride <= INT32_MAX,
         lambda: f"block_stride={c.block_stride} must be 0 (not passed) or a positive int32 (BLOCK_STRIDE_ROWS)")
    need(c.prefill_chunk >= 0, lambda: f"prefill_chunk={c.prefill_chunk} must be 0 (stacked) or at least 1")
    if c.backend != "none":
        patterns, sizes = BACKEND_CALLS[c.backend]
        name = BACKEND_NAMES[c.backend]
        need(c.pattern in patterns,
             lambda: f"backend={c.backend}: {name} makes only call pattern(s) {', '.join(patterns)}, and this case is "
             f"{('pattern ' + c.pattern) if c.pattern else 'no backend call pattern'}")
        need(sizes is None or c.block_size in sizes,
             lambda: f"backend={c.backend}: {name} uses block sizes {', '.join(map(str, sizes or ()))}, not {c.block_size}")


CONFIG_FIELDS = tuple(f.name for f in fields(CaseConfig))
_FIELDS = {f.name: f for f in fields(CaseConfig)}
# Resolved types (the module uses postponed annotations, so f.type is a string).
FIELD_TYPES: dict[str, type] = {name: get_type_hints(CaseConfig)[name] for name in CONFIG_FIELDS}


def variant_key(config) -> tuple:
    """What decides which kernel a case compiles in the project's wrappers: the
    constexprs (K, BLOCK_N, BLOCK_SIZE, W, the DCP size, rank and interleave, the
    path's flags) and the inputs' layout. Cases with one key share their compiles;
    an implementation that specialises on more compiles more, which costs time only.
    One token row or one request is a variant too: ``.contiguous()`` keeps a strided
    view with a dimension of size 1 as it is, so its row stride reaches the kernel
    (a different specialisation than a copy's)."""
    size, rank, interleave = config.effective_dcp
    return (config.mode, config.counts_returned, config.has_prefill, config.compacts, config.topk, config.block_n,
            config.block_size, config.blocks_per_req, size, rank, interleave, getattr(config, "layout", ""),
            config.tokens == 1, config.num_reqs == 1,
            # BLOCK_STRIDE_ROWS is a constexpr (vLLM main); caller-owned outputs are other buffers.
            getattr(config, "block_stride", 0), getattr(config, "out_buffers", False))
