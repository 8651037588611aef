"""The call envelope: the values real callers pass the two wrappers, read from
``envelope.toml`` (the data; its header says who derives what from it).

This module knows the envelope's shape and three things about it:

- ``cells``: every value of the envelope on every wrapper it applies to (a stride on
  each wrapper that takes ``BLOCK_STRIDE_ROWS``, caller buffers on each that takes
  ``out``: features.py's FEATURES say which), each a ``Cell`` that says whether a case
  holds it (``covers``) and what to set to make one that does (``sets``);
- ``describe``: what a set of cases covers of it, in a few words, for a result line
  ("rows 1-1024, dense caches, no caller buffers");
- the soak's and the bench's value sets (``Envelope.rows``, ``strides``, ...).

Needs no torch.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Optional

from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.judge import features

ENVELOPE_FILE = "envelope.toml"

# The wrappers by the CaseConfig mode that calls them.
WRAPPERS = {features.CONVERT: "convert", features.DCP: "dcp"}
# The envelope's sets, by the name a grid's `[envelope] cover` lists them under.
SETS = ("rows", "blocks", "strides", "buffers", "dcp", "widths")


@dataclass(frozen=True)
class Width:
    """An index width (K) a model runs this kernel with: the BLOCK_N values the
    wrappers accept for it, those they reject (K % BLOCK_N != 0), and where it comes from."""

    k: int
    block_n: tuple  # accepted
    rejected_block_n: tuple
    source: str


@dataclass(frozen=True)
class Stride:
    """BLOCK_STRIDE_ROWS with the block size it goes with."""

    block_size: int
    block_stride: int
    why: str

    @property
    def label(self) -> str:
        return f"{self.block_stride}@{self.block_size}"


@dataclass(frozen=True)
class Cell:
    """One value of the envelope on one wrapper: ``covers`` a case that holds it,
    ``sets`` the fields that make a case hold it."""

    kind: str  # one of SETS
    wrapper: str  # "convert" or "dcp"
    match: tuple  # ((field, value), ...) a covering case has
    extra: tuple = ()  # ((field, value), ...) set besides ``match`` (e.g. the BLOCK_N of a width)
    label_text: str = ""

    @property
    def label(self) -> str:
        """e.g. ``dcp:stride=12@4``: no spaces, so a grid point's line and --filter take it."""
        return f"{self.wrapper}:{self.label_text}"

    @property
    def sets(self) -> dict:
        return {**dict(self.match), **dict(self.extra), "mode": self.wrapper}

    def covers(self, config) -> bool:
        if config.mode != self.wrapper:
            return False
        # The DCP filter proper (size > 1), except for the cell of size 1 itself.
        if self.wrapper == "dcp" and dict(self.match).get("dcp_size") != 1 and config.dcp_size == 1:
            return False
        return all(getattr(config, name) == value for name, value in self.match)


@dataclass(frozen=True)
class Envelope:
    decode_rows: tuple
    prefill_rows: tuple
    block_sizes: tuple
    strides: tuple  # of Stride
    out_buffers: tuple  # of bool
    buffer_counts: tuple  # of bool: return_valid_counts with the buffers
    dcp_sizes: tuple
    interleaves: tuple
    widths: tuple  # of Width
    source: str = ENVELOPE_FILE

    @property
    def rows(self) -> tuple:
        """Every row count, decode then prefill, ascending."""
        return tuple(sorted(set(self.decode_rows) | set(self.prefill_rows)))

    def strides_for(self, block_size: int) -> tuple:
        return tuple(s for s in self.strides if s.block_size == block_size)

    def cells(self, kinds: Iterable[str] = SETS) -> list[Cell]:
        """Every value of the named sets on every wrapper it applies to."""
        out: list[Cell] = []
        kinds = tuple(kinds)
        both = tuple(WRAPPERS.values())
        if "rows" in kinds:
            out += [Cell("rows", w, (("tokens", t),), (), f"rows={t}") for w in both for t in self.rows]
        if "blocks" in kinds:
            out += [Cell("blocks", w, (("block_size", b),), (), f"block={b}") for w in both for b in self.block_sizes]
        if "strides" in kinds:
            out += [Cell("strides", w, (("block_size", s.block_size), ("block_stride", s.block_stride)), (),
                         f"stride={s.label}") for w in taking("block_stride") for s in self.strides]
        if "buffers" in kinds:
            out += [Cell("buffers", w, (("out_buffers", o), ("counts", c)), (),
                         f"buffers=out{'+counts' if c else ''}")
                    for w in taking("out_buffers") for o in self.out_buffers if o for c in self.buffer_counts]
        if "dcp" in kinds:
            out += [Cell("dcp", "dcp", (("dcp_size", s), ("dcp_rank", r)), (), f"dcp={s}r{r}")
                    for s in self.dcp_sizes for r in range(s)]
            out += [Cell("dcp", "dcp", (("interleave", i),), (), f"interleave={i}") for i in self.interleaves]
        if "widths" in kinds:
            out += [Cell("widths", w, (("topk", x.k),), (("block_n", x.block_n[0]),), f"K={x.k}")
                    for w in both for x in self.widths]
        return out


def taking(field: str) -> tuple[str, ...]:
    """The wrappers (CaseConfig modes) that take the optional parameters whose cases
    set ``field`` (features.py's FEATURES rows)."""
    modes = []
    for f in features.FEATURES:
        if f.field == field:
            modes += [WRAPPERS[fn] for fn in f.functions if fn in WRAPPERS]
    return tuple(m for m in WRAPPERS.values() if m in modes)


def describe(configs: Iterable) -> str:
    """What ``configs`` cover of the envelope, in a few words: rows, strides, buffers."""
    configs = list(configs)
    if not configs:
        return "no cases"
    tokens = [c.tokens for c in configs]
    low, high = min(tokens), max(tokens)
    parts = [f"rows {low}-{high}" if low != high else f"rows {low}"]
    packed = sorted({(c.block_stride, c.block_size) for c in configs if c.block_stride
                     and c.block_stride != c.block_size})
    if packed:
        parts.append("strides " + ", ".join(f"{s}@{b}" for s, b in packed))
    else:
        parts.append("dense caches")
    parts.append("caller buffers" if any(c.out_buffers for c in configs) else "no caller buffers")
    return ", ".join(parts)


# --------------------------------------------------------------------------- reading


def _parse(data: dict, source: str) -> Envelope:
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when the file is read

    e = schema.load(schema.EnvelopeData, data, where=f"envelope file {source}", error=ConfigError)
    widths = []
    for i, w in enumerate(e.width):
        bad = [b for b in w.block_n if w.k % b] + [b for b in w.rejected_block_n if not w.k % b]
        if bad:
            raise ConfigError(f"envelope file {source}: [[width]] #{i + 1} (k={w.k}): BLOCK_N {bad[0]} is in the "
                              "wrong list (block_n must divide k, rejected_block_n must not)")
        widths.append(Width(w.k, tuple(w.block_n), tuple(w.rejected_block_n), " ".join(w.source.split())))
    if len({w.k for w in widths}) != len(widths):
        raise ConfigError(f"envelope file {source}: a width appears twice in [[width]]")
    for i, s in enumerate(e.stride):
        if s.block_size not in e.blocks.sizes:
            raise ConfigError(f"envelope file {source}: [[stride]] #{i + 1}: block_size {s.block_size} is not in "
                              f"[blocks] sizes; add it there")
    return Envelope(
        decode_rows=tuple(e.rows.decode), prefill_rows=tuple(e.rows.prefill), block_sizes=tuple(e.blocks.sizes),
        strides=tuple(Stride(s.block_size, s.block_stride, " ".join(s.why.split())) for s in e.stride),
        out_buffers=tuple(e.buffers.out_buffers), buffer_counts=tuple(e.buffers.counts),
        dcp_sizes=tuple(e.dcp.sizes), interleaves=tuple(e.dcp.interleaves), widths=tuple(widths), source=source)


@functools.lru_cache(maxsize=4)
def load(path: Optional[str] = None) -> Envelope:
    """The envelope: the packaged ``remap_ab/subjects/remap/envelope.toml``, or the file ``path``."""
    from pathlib import Path

    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    file: schema.Readable
    if path is None:
        file, source = resources.files("remap_ab.subjects.remap").joinpath(ENVELOPE_FILE), ENVELOPE_FILE
    else:
        file, source = Path(path), str(path)
    return _parse(schema.read_toml(file, what=f"envelope file {source}", error=ConfigError), source)
