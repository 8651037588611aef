"""The sweep grid: read a grid file (the data) and expand it into configurations.

Nothing about the grid's content lives here: which dimensions exist, their values and
what they mean are all in the TOML file. This module only knows the three layers
(defaults, rotations, product dimensions; see grid.toml's header), the model widths a
dimension can be generated from and the expected rejections they imply (see
grids/models.toml's header), and how to filter.

Grids shipped with remap-ab, by ``--grid NAME``: ``pr`` is ``remap_ab/subjects/remap/grid/grid.toml`` (the
default: the pull request's grid); every other NAME is ``remap_ab/subjects/remap/grid/grids/NAME.toml``, so
shipping a grid is dropping a TOML file there.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.case.config import CONFIG_FIELDS, CaseConfig
from remap_ab.subjects.remap.grid import envelope

GRID_FILE = "grid.toml"
DEFAULT_GRID = "pr"  # the name of GRID_FILE
GRIDS_FOLDER = "grids"  # every other shipped grid: grids/<name>.toml
MODELS_GRID = "models"
# The pseudo-axis of a grid that covers the call envelope (``[envelope]``): "-" on the
# grid's own points, the envelope value on the points added for it.
ENVELOPE_AXIS = "envelope"


@dataclass(frozen=True)
class Value:
    """One value of a dimension or rotation: its label and the fields it sets."""

    label: str
    fields: tuple  # ((field, value), ...)
    # ((dimension, (labels, ...)), ...): a dimension value combined only with these
    # values of other dimensions (``only = { call = [...] }``); empty: with every value.
    only: tuple = ()


@dataclass(frozen=True)
class Axis:
    name: str
    doc: str
    values: tuple  # of Value
    over: tuple = ()  # rotations only
    modulo: Optional[str] = None  # rotations only: take the value modulo this field

    def labels(self) -> list[str]:
        return [v.label for v in self.values]


@dataclass(frozen=True)
class GridPoint:
    """One configuration of the grid, with the labels that placed it there."""

    index: int
    labels: tuple  # ((axis name, label), ...) for dimensions, then rotations
    config: CaseConfig

    @property
    def case_id(self) -> str:
        return self.config.case_id

    def label(self, name: str) -> str:
        return dict(self.labels)[name]

    def line(self) -> str:
        return self.case_id + "  " + " ".join(f"{k}={v}" for k, v in self.labels)


# An index width (K) a model runs this kernel with: the envelope's record of it, also
# what a grid file's own [[width]] entries become.
ModelWidth = envelope.Width


@dataclass(frozen=True)
class Rejection:
    """An expected rejection: ``config`` is a valid case; calling the wrapper with the
    SPEC §1 keyword arguments in ``call`` instead (e.g. ``{"BLOCK_N": 256}`` where K is
    2176) violates a SPEC §6 precondition, so A must raise and B must raise the same
    exception type."""

    index: int
    labels: tuple  # ((axis name, label), ...): the `over` dimensions, then "k"
    config: CaseConfig
    call: tuple  # ((wrapper keyword, value), ...)
    why: str

    @property
    def case_id(self) -> str:
        """12 hex digits of the configuration and the overriding call arguments."""
        text = json.dumps({"case": self.config.case_id, "call": dict(self.call)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def id(self) -> str:
        """A readable unique name, e.g. ``convert-counts:2176/256``."""
        return ":".join(label for _, label in self.labels)

    @property
    def fields(self) -> dict:
        """The configuration fields as the call has them (``block_n`` the rejected one):
        what ``rejections.rejection_from_fields`` turns into its RejectionCase."""
        names = {"BLOCK_N": "block_n"}
        return {**self.config.to_dict(), **{names[k]: v for k, v in self.call}}

    def line(self) -> str:
        call = ", ".join(f"{k}={v}" for k, v in self.call)
        return f"{self.case_id}  " + " ".join(f"{k}={v}" for k, v in self.labels) + f"  call {call}: expect reject"


@dataclass(frozen=True)
class RejectionSpec:
    over: tuple  # dimension names
    fields: tuple  # ((field, value), ...)
    doc: str = ""


@dataclass
class Grid:
    version: int
    defaults: dict
    dimensions: list
    rotations: list
    source: str = ""
    widths: tuple = ()  # of ModelWidth
    rejection_spec: Optional[RejectionSpec] = None
    cover: tuple = ()  # the envelope's sets (envelope.SETS) this grid holds every value of
    _points: Optional[list] = field(default=None, repr=False)
    # The envelope values no point could be made for (no base case takes them), by label.
    uncovered: list = field(default_factory=list, repr=False)
    content: str = field(default="", repr=False)  # the file's text ("": a grid not read from a file)

    @property
    def axes(self) -> list:
        extra = [self._envelope_axis()] if self.cover else []
        return list(self.dimensions) + list(self.rotations) + extra

    @property
    def dimension_names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def points(self) -> list[GridPoint]:
        if self._points is None:
            # The same file's text expands to the same points under the same envelope: a
            # grid loaded again in this process (another spelling of its name, or after
            # load's cache was cleared) is not expanded again.
            env = envelope.load()
            kept = _EXPANDED.get(self.content) if self.content else None
            if kept is not None and kept[0] is env:
                self._points, self.uncovered = kept[1], list(kept[2])
                return self._points
            points = list(self._expand())
            self._points = self._with_envelope(points) if self.cover else points
            if self.content:
                _EXPANDED[self.content] = (env, self._points, list(self.uncovered))
        return self._points

    def _envelope_axis(self) -> Axis:
        labels = ["-"] + [p.label(ENVELOPE_AXIS) for p in self.points() if p.label(ENVELOPE_AXIS) != "-"]
        return Axis(ENVELOPE_AXIS, "values of the call envelope (remap_ab/subjects/remap/envelope.toml) no other point holds",
                    tuple(Value(label, ()) for label in labels))

    def _with_envelope(self, points: list) -> list:
        """``points`` and, for every value of the envelope's ``cover`` sets on every
        wrapper it applies to that no point holds, one point that does: the cheapest
        point (rows x K) of that wrapper with the value's fields, every other label "-"."""
        cells = envelope.load().cells(self.cover)
        configs = [p.config for p in points]
        open_cells = [c for c in cells if not any(c.covers(x) for x in configs)]
        bases = sorted(points, key=lambda p: (p.config.tokens * p.config.topk, p.index))
        names = [a.name for a in self.dimensions] + [a.name for a in self.rotations]
        out = [GridPoint(p.index, p.labels + ((ENVELOPE_AXIS, "-"),), p.config) for p in points]
        seen = {p.case_id for p in points}
        self.uncovered = []
        for cell in open_cells:
            if any(cell.covers(p.config) for p in out[len(points):]):
                continue  # an earlier added point holds it too
            config = _envelope_case(cell, bases, seen)
            if config is None:
                self.uncovered.append(cell.label)
                continue
            seen.add(config.case_id)
            labels = tuple((name, "-") for name in names) + ((ENVELOPE_AXIS, cell.label),)
            out.append(GridPoint(len(out), labels, config))
        return out

    def _expand(self) -> Iterable[GridPoint]:
        sizes = [len(d.values) for d in self.dimensions]
        names = self.dimension_names
        restricted = any(v.only for d in self.dimensions for v in d.values)
        n = -1
        for idx in itertools.product(*(range(s) for s in sizes)):
            if restricted and not self._combined(idx):
                continue
            n += 1
            position = dict(zip(names, idx))
            merged = dict(self.defaults)
            labels = []
            rot_values = []
            for r in self.rotations:
                k = sum(position[o] for o in r.over) % len(r.values)
                rot_values.append((r, r.values[k]))
            for r, v in rot_values:
                if r.modulo is None:
                    merged.update(v.fields)
            dim_fields: dict = {}
            for d, i in zip(self.dimensions, idx):
                v = d.values[i]
                dim_fields.update(v.fields)
                labels.append((d.name, v.label))
            merged.update(dim_fields)
            try:
                _oor_from_padding(merged)
            except (TypeError, ValueError):
                raise ConfigError(f"grid file {self.source}: grid point {n} ({dict(labels)}): invalid_ratio and "
                                  "out_of_range must be numbers") from None
            for r, v in rot_values:
                if r.modulo is not None:
                    modulus = merged.get(r.modulo, 1)
                    if not _is_int(modulus) or modulus < 1:
                        raise ConfigError(
                            f"grid file {self.source}: rotate {r.name!r}: `modulo` field {r.modulo} is {modulus!r} "
                            f"at grid point {n} ({dict(labels)}); it must be a positive integer"
                        )
                    for name, value in v.fields:
                        if name not in dim_fields:
                            if not _is_int(value):
                                raise ConfigError(f"grid file {self.source}: rotate {r.name!r}: values taken modulo "
                                                  f"{r.modulo} must be integers (got {value!r})")
                            merged[name] = value % modulus
            try:
                config = CaseConfig.from_dict(merged)
            except (ConfigError, TypeError, ValueError) as exc:
                raise ConfigError(f"grid file {self.source}: grid point {n} ({dict(labels)}) is not a valid case: "
                                  f"{' '.join(str(exc).split())}") from None
            # Rotations are labelled by what the case really runs with.
            for r, v in rot_values:
                labels.append((r.name, _effective_label(r, v, config, dim_fields)))
            yield GridPoint(n, tuple(labels), config)

    def _combined(self, idx: tuple) -> bool:
        """Whether every value at ``idx`` allows the others (their ``only``)."""
        chosen = {d.name: d.values[i] for d, i in zip(self.dimensions, idx)}
        return all(chosen[dim].label in labels for v in chosen.values() for dim, labels in v.only)

    def rejections(self) -> list[Rejection]:
        """Every rejected (K, BLOCK_N) of ``widths`` on every combination of the
        ``[rejections]`` ``over`` dimensions (empty for a grid without them)."""
        spec = self.rejection_spec
        if spec is None:
            return []
        dims = [d for d in self.dimensions if d.name in spec.over]
        out: list[Rejection] = []
        for w in self.widths:
            for rejected in w.rejected_block_n:
                for values in itertools.product(*(d.values for d in dims)):
                    merged = {**self.defaults, **dict(spec.fields)}
                    for v in values:
                        merged.update(v.fields)
                    merged.update(topk=w.k, block_n=w.block_n[0])
                    labels = tuple((d.name, v.label) for d, v in zip(dims, values)) + (("k", f"{w.k}/{rejected}"),)
                    try:
                        config = CaseConfig.from_dict(merged)
                    except (ConfigError, TypeError, ValueError) as exc:
                        raise ConfigError(f"grid file {self.source}: rejection {dict(labels)}: the base case is not "
                                          f"valid: {' '.join(str(exc).split())}") from None
                    why = f"NUM_TOPK_TOKENS={w.k} is not a multiple of BLOCK_N={rejected} (SPEC §6)"
                    out.append(Rejection(len(out), labels, config, (("BLOCK_N", rejected),), why))
        return out

    def select(self, filters: Optional[dict] = None, max_tokens: Optional[int] = None) -> list[GridPoint]:
        """The points matching every filter (axis or config field -> allowed values)."""
        pts = self.points()
        if max_tokens is not None:
            pts = [p for p in pts if p.config.tokens <= max_tokens]
        for key, allowed in (filters or {}).items():
            pts = [p for p in pts if _point_value(p, key) in allowed]
        return pts


# A grid file's text -> (the envelope it was expanded under, its points, its uncovered
# envelope values): Grid.points' cache for this process.
_EXPANDED: dict[str, tuple[Any, list, list]] = {}


# Tried in turn on each base case when the value's fields alone do not make a valid one:
# a value the base's backend does not use (its block sizes), an interleave the block
# size does not take.
_ENVELOPE_RELAXED: tuple[dict, ...] = ({}, {"backend": "none"}, {"backend": "none", "interleave": 1})


def _envelope_case(cell: envelope.Cell, bases: list, seen: set) -> Optional[CaseConfig]:
    """The first valid case holding ``cell`` made from ``bases`` (cheapest first, the
    cell's wrapper first) that is not already a point."""
    ordered = [b for b in bases if b.config.mode == cell.wrapper] + [b for b in bases if b.config.mode != cell.wrapper]
    sets = cell.sets
    if "block_size" in sets and "block_stride" not in sets:
        sets["block_stride"] = 0  # a block size of its own: the base's stride was for its block size
    for base in ordered:
        for relaxed in _ENVELOPE_RELAXED:
            try:
                config = CaseConfig.from_dict({**base.config.to_dict(), **sets, **relaxed})
            except (ConfigError, TypeError, ValueError):
                continue
            if cell.covers(config) and config.case_id not in seen:
                return config
    return None


def _oor_from_padding(merged: dict) -> None:
    """The rule documented at the ``oor`` dimension: out-of-range lanes come from
    the valid lanes; when there are none, they replace padding."""
    inv = float(merged.get("invalid_ratio", CaseConfig.invalid_ratio))
    oor = float(merged.get("out_of_range", CaseConfig.out_of_range))
    if inv + oor > 1.0:
        merged["invalid_ratio"] = round(1.0 - oor, 6)


def _effective_label(axis: Axis, value: Value, config: CaseConfig, dim_fields: dict) -> str:
    """A rotation's label, or '-' where a dimension overrides the rotated fields or the
    case does not use them (e.g. DCP fields in convert mode)."""
    names = [n for n, _ in value.fields]
    if any(n in dim_fields for n in names):
        return "-"
    if axis.modulo is not None:
        return str(getattr(config, names[0]))
    if all(getattr(config, n) == v for n, v in value.fields):
        return value.label
    return "-"


def _point_value(p: GridPoint, key: str) -> str:
    if key == CASE_FILTER:
        return p.case_id
    labels = dict(p.labels)
    if key in labels:
        return labels[key]
    return _norm(getattr(p.config, key))


def _norm(value) -> str:
    """Canonical string form of a value, so 0.3 == '0.30' and true == 'True'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    s = str(value).strip()
    low = s.lower()
    if low in ("true", "false"):
        return low
    try:
        return _norm(float(s))
    except ValueError:
        return s


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_value(source: str, key: str, raw, field_name: Optional[str]) -> Value:
    only: tuple = ()
    if isinstance(raw, dict):
        raw = dict(raw)
        label = raw.pop("label", None)
        restriction = raw.pop("only", None)
        if restriction is not None:
            if not (isinstance(restriction, dict) and all(
                    isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
                    for k, v in restriction.items())):
                raise ConfigError(f"grid file {source}: {key}: `only` must be a table of dimension name -> list of "
                                  f"value labels")
            only = tuple((k, tuple(v)) for k, v in restriction.items())
        if not isinstance(label, (str, int, float)) or isinstance(label, bool):
            raise ConfigError(f"grid file {source}: {key}: a table value needs a `label` (a string or number)")
        fields_ = raw
    elif isinstance(raw, (list,)):
        raise ConfigError(f"grid file {source}: {key}: a value must be a scalar or a table, not a list")
    else:
        if field_name is None:
            raise ConfigError(f"grid file {source}: {key} has scalar values but no `field`")
        label = _norm(raw)
        fields_ = {field_name: raw}
    unknown = sorted(set(fields_) - set(CONFIG_FIELDS))
    if unknown:
        raise ConfigError(f"grid file {source}: {key} sets unknown field(s) {', '.join(unknown)}")
    return Value(str(label), tuple(fields_.items()), only)


def _widths(source: str, entries) -> tuple:
    """The [[width]] entries (their shape checked by schema.WidthEntry): each BLOCK_N in
    the right list, each K once."""
    out = []
    for i, e in enumerate(entries):
        key = f"[[width]] #{i + 1} (k={e.k})"
        bad = [b for b in e.block_n if e.k % b] + [b for b in e.rejected_block_n if not e.k % b]
        if bad:
            raise ConfigError(f"grid file {source}: {key}: BLOCK_N {bad[0]} is in the wrong list "
                              f"(block_n must divide k, rejected_block_n must not)")
        out.append(ModelWidth(e.k, tuple(e.block_n), tuple(e.rejected_block_n), " ".join(e.source.split())))
    if len({w.k for w in out}) != len(out):
        raise ConfigError(f"grid file {source}: a width appears twice in [[width]]")
    return tuple(out)


def _width_values(widths: tuple) -> list:
    """The `from = "widths"` dimension's values: one per accepted (K, BLOCK_N)."""
    return [{"label": f"{w.k}/{b}", "topk": w.k, "block_n": b} for w in widths for b in w.block_n]


def _rejection_spec(source: str, raw, dim_names: set) -> Optional[RejectionSpec]:
    if raw is None:
        return None
    bad = [o for o in raw.over if o not in dim_names]
    if bad:
        raise ConfigError(f"grid file {source}: [rejections] `over` must list dimensions (got {raw.over!r})")
    if set(raw.fields) - set(CONFIG_FIELDS):
        raise ConfigError(f"grid file {source}: [rejections] `fields` must be a table of configuration fields")
    return RejectionSpec(tuple(raw.over), tuple(raw.fields.items()), " ".join(raw.doc.split()))


def _axis(source: str, section: str, i: int, entry: dict, rotation: bool, widths: tuple = ()) -> Axis:
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    name = entry.get("name")
    key = f"{section} {name!r}" if isinstance(name, str) and name else f"[[{section}]] #{i + 1}"
    e: Any = schema.load(schema.RotateEntry if rotation else schema.DimensionEntry, entry,
                         where=f"grid file {source}: {key}", error=ConfigError)
    values = e.values
    if not rotation and e.from_ is not None:
        if values is not None:
            raise ConfigError(f'grid file {source}: {key}: `from = "widths"` replaces `values`; give one of them')
        if not widths:
            raise ConfigError(f'grid file {source}: {key}: `from = "widths"` needs [[width]] entries')
        values = _width_values(widths)
    if values is None:
        raise ConfigError(f"grid file {source}: {key} field 'values' is missing")
    field_name = e.field
    over: tuple = tuple(e.over) if rotation else ()
    modulo = e.modulo if rotation else None
    for what, named in (("field", field_name), ("modulo", modulo)):
        if named is not None and named not in CONFIG_FIELDS:
            raise ConfigError(f"grid file {source}: {key}: `{what}` must name a configuration field (got {named!r})")
    parsed = tuple(_parse_value(source, key, v, field_name) for v in values)
    labels = [v.label for v in parsed]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"grid file {source}: {key} has duplicate labels")
    return Axis(name=e.name, doc=" ".join(e.doc.split()), values=parsed, over=over, modulo=modulo)


def parse(data: dict, source: str = "") -> Grid:
    """A Grid from the TOML's data; ConfigError naming the file and the key of the
    first thing of the wrong shape or type (schema.GridData and its entries)."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    g = schema.load(schema.GridData, data, where=f"grid file {source}", error=ConfigError)
    widths = _widths(source, g.width)
    if not widths and any(d.get("from") == "widths" for d in g.dimension):
        # The models' widths are the envelope's (envelope.toml's [[width]]).
        widths = tuple(envelope.load().widths)
    dims = [_axis(source, "dimension", i, d, False, widths) for i, d in enumerate(g.dimension)]
    rots = [_axis(source, "rotate", i, r, True) for i, r in enumerate(g.rotate)]
    if not dims:
        raise ConfigError(f"grid file {source}: no [[dimension]]; a grid needs at least one")
    names = [a.name for a in dims + rots]
    if len(set(names)) != len(names):
        raise ConfigError(f"grid file {source}: axis names repeat")
    dim_names = {d.name for d in dims}
    labels_of = {d.name: set(d.labels()) for d in dims}
    for d in dims:
        for v in d.values:
            for dim, labels in v.only:
                unknown_labels = sorted(set(labels) - labels_of.get(dim, set()))
                if dim not in dim_names or dim == d.name or unknown_labels:
                    raise ConfigError(f"grid file {source}: dimension {d.name!r} value {v.label!r}: `only` names "
                                      f"{dim!r} {unknown_labels or ''}, which is no other dimension or none of its "
                                      f"labels")
    for r in rots:
        bad = [o for o in r.over if o not in dim_names]
        if bad or not r.over:
            raise ConfigError(f"grid file {source}: rotate {r.name!r}: `over` must list dimensions (got {list(r.over)})")
    unknown = sorted(set(g.defaults) - set(CONFIG_FIELDS))
    if unknown:
        raise ConfigError(f"grid file {source}: unknown default field(s) {', '.join(unknown)}")
    rejections = _rejection_spec(source, g.rejections, dim_names)
    cover = tuple(g.envelope.cover) if g.envelope is not None else ()
    if ENVELOPE_AXIS in names and cover:
        raise ConfigError(f"grid file {source}: an axis is named {ENVELOPE_AXIS!r}, the name of the points [envelope] "
                          "adds; rename it")
    return Grid(g.version, dict(g.defaults), dims, rots, source, widths, rejections, cover)


def shipped() -> dict:
    """``{name: resource}`` of the grids shipped with remap-ab (``--grid NAME``)."""
    package = resources.files("remap_ab.subjects.remap.grid")
    grids = {DEFAULT_GRID: package.joinpath(GRID_FILE)}
    folder = package.joinpath(GRIDS_FOLDER)
    if folder.is_dir():
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml") and entry.name[:-5] != DEFAULT_GRID:
                grids[entry.name[:-5]] = entry
    return grids


def _is_name(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_-]+", text))


@lru_cache(maxsize=8)
def load(path: Optional[str] = None) -> Grid:
    """The grid ``path`` names: None or ``pr`` (the packaged ``remap_ab/subjects/remap/grid/grid.toml``),
    the NAME of another shipped grid (``remap_ab/subjects/remap/grid/grids/NAME.toml``), or a file."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    grids = shipped()
    file: schema.Readable
    if path is None or (path in grids and not Path(path).is_file()):
        name = path or DEFAULT_GRID
        file, source = grids[name], GRID_FILE if name == DEFAULT_GRID else f"{GRIDS_FOLDER}/{name}.toml"
    elif _is_name(path) and not Path(path).exists():
        raise ConfigError(f"--grid {path}: no shipped grid of that name and no such file; shipped grids: "
                          f"{', '.join(grids)} (or give a TOML file)")
    else:
        file, source = Path(path), str(path)
    g = parse(schema.read_toml(file, what=f"grid file {source}", error=ConfigError), source)
    g.content = file.read_text(encoding="utf-8")  # read_toml read it: it exists and is text
    return g


def parse_filters(grid: Grid, specs: Iterable[str]) -> dict:
    """``["path=dcp-compact,dcp-inplace", "k=2048"]`` -> {axis: {labels}}; repeated
    keys intersect. Keys are axis names (see grid.toml), CaseConfig fields, or
    ``case`` (case IDs, as a run's table lists them)."""
    out: dict = {}
    known_axes = {a.name: a for a in grid.axes}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip().replace("-", "_") if key.strip() not in known_axes else key.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--filter {spec!r}: expected NAME=VALUE[,VALUE...], e.g. --filter path=dcp-compact")
        if key == CASE_FILTER and key not in known_axes:
            wanted = _case_ids(spec, values)
            out[key] = out[key] & wanted if key in out else wanted
            continue
        if key not in known_axes and key not in CONFIG_FIELDS:
            raise ConfigError(
                f"--filter {spec!r}: unknown name {key!r}; use one of {', '.join(known_axes)}, case or a config field"
            )
        raw = [v.strip() for v in values.split(",") if v.strip()]
        if key in known_axes:
            labels = set(known_axes[key].labels()) | {"-"}
            wanted = set()
            for v in raw:
                hit = v if v in labels else _norm(v)
                if hit not in labels:
                    raise ConfigError(
                        f"--filter {spec!r}: {key} has no value {v}; its values are {', '.join(known_axes[key].labels())}"
                    )
                wanted.add(hit)
        else:
            wanted = {_norm(v) for v in raw}
        out[key] = out[key] & wanted if key in out else wanted
    return out


def model_widths() -> tuple:
    """The index widths of the models that run this kernel (``ModelWidth``s of the call
    envelope, envelope.toml; the models grid's `k` dimension): what the soak draws more
    often than uniform."""
    return tuple(envelope.load().widths)


CASE_FILTER = "case"  # --filter case=ID[,ID...]: the cases of a run's table, by ID


def _case_ids(spec: str, values: str) -> set:
    """The case IDs of ``--filter case=...``, each 12 hex digits (selection.py checks
    that each names a case the sweep has)."""
    import re

    ids = [v.strip().lower() for v in values.split(",") if v.strip()]
    bad = [v for v in ids if not re.fullmatch(r"[0-9a-f]{12}", v)]
    if bad:
        raise ConfigError(f"--filter {spec!r}: {bad[0]!r} is not a case ID (12 hex digits, as `sweep --list` "
                          "and a run's results.csv show them)")
    return set(ids)


def grid_name(g: Grid) -> Optional[str]:
    """The ``--grid NAME`` of a shipped grid, None for a grid read from a file."""
    if g.source == GRID_FILE:
        return DEFAULT_GRID
    folder, _, file = g.source.partition("/")
    if folder == GRIDS_FOLDER and file.endswith(".toml") and file[:-5] in shipped():
        return file[:-5]
    given = Path(g.source).resolve()  # a shipped grid named by its file
    return next((name for name, res in shipped().items() if Path(str(res)).resolve() == given), None)


ENVELOPES_FILE = "envelopes.json"  # in GRIDS_FOLDER: {name: {"sha256": of its sources, "envelope": described}}


@lru_cache(maxsize=8)
def shipped_envelope(name: str) -> str:
    """What shipped grid ``name`` covers of the call envelope (``envelope.describe`` of
    its cases). Every summary says it of the grids not run, and expanding a grid to
    describe it costs seconds of a core: it is read from ENVELOPES_FILE when that was
    written for this very grid file and envelope file (tests/test_grid_envelopes.py
    keeps it true), else described here."""
    stored = _stored_envelopes().get(name)
    if stored is not None and stored.get("sha256") == _sources_sha256(name):
        return str(stored["envelope"])
    return described_envelope(name)


def described_envelope(name: str) -> str:
    """``shipped_envelope`` from the grid's cases, not from ENVELOPES_FILE."""
    return envelope.describe(p.config for p in load(name).points())


def envelopes_record() -> dict:
    """What ENVELOPES_FILE holds for the shipped grids as they are."""
    return {name: {"sha256": _sources_sha256(name), "envelope": described_envelope(name)} for name in shipped()}


def write_envelopes() -> Path:
    """Write ENVELOPES_FILE anew (after a shipped grid, envelope.toml or the description changed)."""
    path = Path(str(_envelopes_file()))
    path.write_text(json.dumps(envelopes_record(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _stored_envelopes() -> dict:
    try:
        stored = json.loads(_envelopes_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def _envelopes_file():
    return resources.files("remap_ab.subjects.remap.grid").joinpath(GRIDS_FOLDER, ENVELOPES_FILE)


def _sources_sha256(name: str) -> str:
    """Of what a shipped grid's cases are made from: its file and the envelope file (the
    points its [envelope] adds)."""
    package = resources.files("remap_ab.subjects.remap")  # envelope.toml: at the package's top (envelope.py reads it there)
    return hashlib.sha256(shipped()[name].read_bytes() + b"\0" + package.joinpath(envelope.ENVELOPE_FILE).read_bytes()).hexdigest()


def coverage(g: Grid, configs: Iterable, others_described: bool = True) -> str:
    """What a run of ``configs`` (cases of ``g``) covers of the call envelope, and the
    shipped grids it did not run with theirs: "the pr grid (rows 1-1024, dense caches,
    no caller buffers); not run: --grid callers (rows 1-16384, ...), --grid models (...)".
    ``others_described`` False: the other grids by name only (describing one expands it)."""
    name = grid_name(g)
    what = f"the {name} grid" if name else f"grid file {g.source}"
    others = [n for n in shipped() if n != name]
    text = f"{what} ({envelope.describe(configs)})"
    if others:
        text += "; not run: " + ", ".join(f"--grid {n}" + (f" ({shipped_envelope(n)})" if others_described else "")
                                          for n in others)
    return text
