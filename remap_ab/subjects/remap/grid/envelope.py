"""The call envelope: the values real callers pass the two wrappers, read from
``envelope.toml`` (the data; its header says who derives what from it).

This module knows the envelope's shape and three things about it:

- ``cells``: every value of the envelope on every wrapper it applies to (a stride on
  each wrapper that takes ``BLOCK_STRIDE_ROWS``, caller buffers on each that takes
  ``out``: features.py's FEATURES say which), each a ``Cell`` that says whether a case
  holds it (``covers``) and what to set to make one that does (``sets``);
- ``describe``: what a set of cases covers of it, in a few words, for a result line
  ("rows 1-1024, dense caches, no caller buffers");
- the soak's and the bench's value sets (``Envelope.rows``, ``strides``, ...);
- its pairwise coverage: the dimensions a call differs on (``Envelope.dimensions``),
  ``classify`` placing a case on each, the declared pairs of two dimensions' values
  less those impossible by construction (``Envelope.pairs``) and the declared
  combinations of more (``Envelope.combinations``), ``pair_coverage`` saying what a set
  of cases exercised of them, and ``greedy_cover`` choosing few assignments that hold
  what a set of cases leaves out (scripts/pairwise_cases.py writes them as grid cases).

Needs no torch.
"""

from __future__ import annotations

import functools
import itertools
import random
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
    dimensions: tuple = ()  # of Dimension: the pairwise coverage's
    row_classes: tuple = ()  # of RowClass
    exclusions: tuple = ()  # of Exclusion
    combinations: tuple = ()  # of Combination

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


    # -- pairwise coverage

    @functools.cached_property
    def pairs(self) -> tuple:
        """Every declared pair ``((dim, value), (dim, value))`` of two dimensions' values
        (the first dimension declared first), less the excluded ones."""
        excluded = {p for e in self.exclusions for p in e.pairs()}
        out = []
        for d1, d2 in itertools.combinations(self.dimensions, 2):
            for v1 in d1.values:
                for v2 in d2.values:
                    pair = ((d1.name, v1), (d2.name, v2))
                    if pair not in excluded:
                        out.append(pair)
        return tuple(out)

    def row_class(self, tokens: int) -> str:
        for r in self.row_classes:
            if r.holds(tokens):
                return r.label
        raise ConfigError(f"envelope file {self.source}: no [[row_class]] holds {tokens} rows; extend the classes "
                          f"to {tokens}")

    def classify(self, config, plan=None) -> dict:
        """``config``'s value on each dimension. ``plan`` (features.Plan of A and B): a
        parameter passed at the value its absence means to sides that both lack it is
        absent (the call they make is the one without it)."""
        return {d.name: _CLASSIFY[d.name](self, config, plan) for d in self.dimensions}

    def excluded(self, values: dict) -> Optional[str]:
        """Why ``values`` (some dimensions' values) hold an excluded pair (None: they do not)."""
        for e in self.exclusions:
            (dim, value), = e.when
            if values.get(dim) == value:
                for other, never in e.never:
                    if values.get(other) in never:
                        return e.why
        return None


@dataclass(frozen=True)
class Dimension:
    """One way a call differs from another, and its values (classes)."""

    name: str
    values: tuple
    doc: str = ""


@dataclass(frozen=True)
class RowClass:
    label: str
    low: int
    high: int
    parity: str = "any"  # "odd", "even" or "any"

    def holds(self, tokens: int) -> bool:
        if not self.low <= tokens <= self.high:
            return False
        return self.parity == "any" or (tokens % 2 == 1) == (self.parity == "odd")

    def sizes(self) -> list:
        """Its row counts from the low end, then the high end and the middle: what a case of
        it takes, cheapest first."""
        pick = [t for t in (self.low, self.low + 1, self.high, self.high - 1, (self.low + self.high) // 2,
                            (self.low + self.high) // 2 + 1) if self.holds(t)]
        return list(dict.fromkeys(pick))


@dataclass(frozen=True)
class Exclusion:
    when: tuple  # ((dim, value),)
    never: tuple  # ((dim, (values, ...)), ...)
    why: str

    def pairs(self) -> set:
        (dim, value), = self.when
        out = set()
        for other, values in self.never:
            for v in values:
                out |= {((dim, value), (other, v)), ((other, v), (dim, value))}
        return out


@dataclass(frozen=True)
class Combination:
    """Values of three or more dimensions one case must hold together."""

    name: str
    values: tuple  # ((dim, (allowed values, ...)), ...)
    why: str

    def holds(self, classes: dict) -> bool:
        return all(classes.get(dim) in allowed for dim, allowed in self.values)


@dataclass(frozen=True)
class PairCoverage:
    """What a set of cases exercised of the declared pairs and combinations."""

    pairs: int
    exercised: int
    never: tuple  # labels of the pairs no case held, in declaration order
    combinations: int = 0
    combinations_never: tuple = ()
    cases: int = 0

    def line(self, shown: int = 12) -> str:
        """'coverage: 412 of 418 pairs; never: rows=1 × out=passed, ...'."""
        text = f"coverage: {self.exercised} of {self.pairs} declared pairs of the call envelope"
        if self.combinations:
            text += f", {self.combinations - len(self.combinations_never)} of {self.combinations} combinations"
        text += f" ({self.cases} case{'' if self.cases == 1 else 's'})"
        never = [*self.never, *(f"[{c}]" for c in self.combinations_never)]
        if never:
            more = f", ... ({len(never) - shown} more)" if len(never) > shown else ""
            text += "; never: " + ", ".join(never[:shown]) + more
        return text

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "exercised": self.exercised, "never": list(self.never),
                "combinations": self.combinations, "combinations_never": list(self.combinations_never),
                "cases": self.cases, "line": self.line(shown=len(self.never) + len(self.combinations_never))}


def pair_label(pair: tuple) -> str:
    (d1, v1), (d2, v2) = pair
    return f"{d1}={v1} × {d2}={v2}"


def held_pairs(classes: dict) -> set:
    """The pairs one case's values hold (both orders)."""
    items = list(classes.items())
    return {(a, b) for a, b in itertools.permutations(items, 2)}


def pair_coverage(classified: Iterable[dict], env: Optional[Envelope] = None) -> PairCoverage:
    """What cases, each ``classify``'d, exercised of the declared pairs and combinations."""
    env = env or load()
    held: set = set()
    combos: set = set()
    n = 0
    for classes in classified:
        n += 1
        held |= held_pairs(classes)
        combos |= {c.name for c in env.combinations if c.holds(classes)}
    never = tuple(pair_label(p) for p in env.pairs if p not in held)
    return PairCoverage(len(env.pairs), len(env.pairs) - len(never), never, len(env.combinations),
                        tuple(c.name for c in env.combinations if c.name not in combos), n)


def coverage_of(configs: Iterable, plan=None, env: Optional[Envelope] = None) -> PairCoverage:
    env = env or load()
    return pair_coverage((env.classify(c, plan) for c in configs), env)


def greedy_cover(classified: Iterable[dict], env: Optional[Envelope] = None, seed: int = 0,
                 tries: int = 50) -> list[dict]:
    """Few assignments (a value per dimension, no excluded pair) that, beside cases
    already ``classified``, hold every declared pair and combination: each new one the
    best of ``tries`` greedy candidates (AETG: dimensions in a random order, each the
    value completing the most open pairs), the combinations first."""
    env = env or load()
    rng = random.Random(seed)
    held: set = set()
    done: set = set()
    for classes in classified:
        held |= held_pairs(classes)
        done |= {c.name for c in env.combinations if c.holds(classes)}
    open_pairs = {p for p in env.pairs if p not in held}
    out: list[dict] = []
    for combo in env.combinations:
        if combo.name in done:
            continue
        fixed = {dim: allowed[0] for dim, allowed in combo.values}
        out.append(_complete(env, fixed, open_pairs, rng, tries))
        open_pairs -= held_pairs(out[-1])
    while open_pairs:
        first = min(open_pairs, key=lambda p: env.pairs.index(p))
        out.append(_complete(env, dict(first), open_pairs, rng, tries))
        open_pairs -= held_pairs(out[-1])
    return out


def _complete(env: Envelope, fixed: dict, open_pairs: set, rng: random.Random, tries: int) -> dict:
    best: Optional[dict] = None
    best_gain = -1
    for _ in range(tries):
        order = [d for d in env.dimensions if d.name not in fixed]
        rng.shuffle(order)
        chosen = dict(fixed)
        for d in order:
            scored = []
            for v in d.values:
                trial = {**chosen, d.name: v}
                if env.excluded(trial) is not None:
                    continue
                gain = sum(1 for k, w in chosen.items() if ((k, w), (d.name, v)) in open_pairs
                           or ((d.name, v), (k, w)) in open_pairs)
                scored.append((gain, rng.random(), v))
            if not scored:
                break
            chosen[d.name] = max(scored)[2]
        if len(chosen) < len(env.dimensions):
            continue
        gain = len(held_pairs(chosen) & open_pairs)
        if gain > best_gain:
            best, best_gain = chosen, gain
    if best is None:
        raise ConfigError(f"envelope file {env.source}: no assignment holds {fixed} without an excluded pair")
    return best


# How a case falls on each dimension (a dimension of envelope.toml without a rule here is
# refused when the file is read).
def _absent_for_both(config, plan, feature: str) -> bool:
    f = features.BY_NAME[feature]
    if plan is None or not f.absent_is_same(config):
        return False
    function = features.wrapper(config)
    return (feature, function) not in plan.a_accepts and (feature, function) not in plan.b_accepts


def _stride_class(env, config, plan) -> str:
    if not config.block_stride or _absent_for_both(config, plan, "BLOCK_STRIDE_ROWS"):
        return "absent"
    return "dense" if config.block_stride == config.block_size else "non-dense"


def _zero_rows(env, config, plan) -> str:
    forced = (config.invalid_ratio >= 1.0 or config.graph_padding > 0
              or (config.row_layout == "mixed" and config.real_tokens >= 3))
    return "forced" if forced else "not forced"


_CLASSIFY = {
    "wrapper": lambda env, c, plan: c.mode,
    "dcp_size": lambda env, c, plan: str(c.dcp_size) if c.mode == "dcp" else "-",
    "compaction": lambda env, c, plan: "on" if c.compacts else "off",
    "counts": lambda env, c, plan: "on" if c.counts else "off",
    "BLOCK_STRIDE_ROWS": _stride_class,
    "out": lambda env, c, plan: "passed" if "out" in features.uses(c) else "absent",
    "valid_counts_out": lambda env, c, plan: "passed" if "valid_counts_out" in features.uses(c) else "absent",
    "rows": lambda env, c, plan: env.row_class(c.tokens),
    "zero_rows": _zero_rows,
}


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
    row_classes = tuple(RowClass(r.label, r.low, r.high, r.parity) for r in e.row_class)
    largest = max([*e.rows.decode, *e.rows.prefill])
    for t in range(1, largest + 1):
        held = [r.label for r in row_classes if r.holds(t)]
        if row_classes and len(held) != 1:
            raise ConfigError(f"envelope file {source}: [[row_class]]: {t} rows fall in "
                              f"{' and '.join(held) if held else 'no class'}; the classes must tile 1 to {largest}")
    dimensions = []
    for d in e.dimension:
        if d.name not in _CLASSIFY:
            raise ConfigError(f"envelope file {source}: [[dimension]] {d.name!r} has no rule placing a case on it; "
                              f"add one to envelope.py's _CLASSIFY (known: {', '.join(_CLASSIFY)})")
        if (d.values is None) == (d.from_ is None):
            raise ConfigError(f"envelope file {source}: [[dimension]] {d.name!r}: give `values` or `from`, one of them")
        if d.from_ == "dcp_sizes":
            values: tuple = ("-", *map(str, e.dcp.sizes))
        elif d.from_ == "row_classes":
            values = tuple(r.label for r in row_classes)
        else:
            values = tuple(d.values or ())
        dimensions.append(Dimension(d.name, values, d.doc))
    known = {d.name: set(d.values) for d in dimensions}

    def check(what: str, dim: str, values: Iterable[str]) -> None:
        if dim not in known:
            raise ConfigError(f"envelope file {source}: {what} names {dim!r}, which is no [[dimension]]; "
                              f"dimensions: {', '.join(known)}")
        bad = [v for v in values if v not in known[dim]]
        if bad:
            raise ConfigError(f"envelope file {source}: {what} names {dim}={bad[0]}, which is none of its values "
                              f"({', '.join(known[dim])})")

    exclusions = []
    for x in e.exclude:
        for dim, value in x.when.items():
            check("[[exclude]] when", dim, [value])
        for dim, never in x.never.items():
            check("[[exclude]] never", dim, never)
        exclusions.append(Exclusion(tuple(x.when.items()), tuple((k, tuple(v)) for k, v in x.never.items()),
                                    " ".join(x.why.split())))
    combinations = []
    for c in e.combination:
        allowed = []
        for dim, spec in c.values.items():
            if isinstance(spec, str):
                chosen: tuple = (spec,)
            elif isinstance(spec, list):
                chosen = tuple(spec)
            else:
                check(f"[[combination]] {c.name!r}", dim, spec.not_)
                chosen = tuple(v for v in known.get(dim, ()) if v not in spec.not_)
            check(f"[[combination]] {c.name!r}", dim, chosen)
            allowed.append((dim, chosen))
        combinations.append(Combination(c.name, tuple(allowed), " ".join(c.why.split())))
    return Envelope(
        decode_rows=tuple(e.rows.decode), prefill_rows=tuple(e.rows.prefill), block_sizes=tuple(e.blocks.sizes),
        strides=tuple(Stride(s.block_size, s.block_stride, " ".join(s.why.split())) for s in e.stride),
        out_buffers=tuple(e.buffers.out_buffers), buffer_counts=tuple(e.buffers.counts),
        dcp_sizes=tuple(e.dcp.sizes), interleaves=tuple(e.dcp.interleaves), widths=tuple(widths), source=source,
        dimensions=tuple(dimensions), row_classes=row_classes, exclusions=tuple(exclusions),
        combinations=tuple(combinations))


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
