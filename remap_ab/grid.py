"""The sweep grid: read ``grid.toml`` (the data) and expand it into configurations.

Nothing about the grid's content lives here: which dimensions exist, their values and
what they mean are all in the TOML file. This module only knows the three layers
(defaults, rotations, product dimensions; see the file's header) and how to filter.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

from remap_ab.config import CONFIG_FIELDS, CaseConfig
from remap_ab.errors import ConfigError

GRID_FILE = "grid.toml"


@dataclass(frozen=True)
class Value:
    """One value of a dimension or rotation: its label and the fields it sets."""

    label: str
    fields: tuple  # ((field, value), ...)


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


@dataclass
class Grid:
    version: int
    defaults: dict
    dimensions: list
    rotations: list
    source: str = ""
    _points: Optional[list] = field(default=None, repr=False)

    @property
    def axes(self) -> list:
        return list(self.dimensions) + list(self.rotations)

    @property
    def dimension_names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def points(self) -> list[GridPoint]:
        if self._points is None:
            self._points = list(self._expand())
        return self._points

    def _expand(self) -> Iterable[GridPoint]:
        sizes = [len(d.values) for d in self.dimensions]
        names = self.dimension_names
        for n, idx in enumerate(itertools.product(*(range(s) for s in sizes))):
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

    def select(self, filters: Optional[dict] = None, max_tokens: Optional[int] = None) -> list[GridPoint]:
        """The points matching every filter (axis or config field -> allowed values)."""
        pts = self.points()
        if max_tokens is not None:
            pts = [p for p in pts if p.config.tokens <= max_tokens]
        for key, allowed in (filters or {}).items():
            pts = [p for p in pts if _point_value(p, key) in allowed]
        return pts


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
    cfg = config.to_dict()
    names = [n for n, _ in value.fields]
    if any(n in dim_fields for n in names):
        return "-"
    if axis.modulo is not None:
        return str(cfg[names[0]])
    if all(cfg[n] == v for n, v in value.fields):
        return value.label
    return "-"


def _point_value(p: GridPoint, key: str) -> str:
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
    if isinstance(raw, dict):
        raw = dict(raw)
        label = raw.pop("label", None)
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
    return Value(str(label), tuple(fields_.items()))


def _axis(source: str, section: str, i: int, entry, rotation: bool) -> Axis:
    where = f"[[{section}]] #{i + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"grid file {source}: {where} must be a table ([[{section}]] with name and values)")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"grid file {source}: {where}: `name` must be a non-empty string")
    key = f"{section} {name!r}"
    values = entry.get("values")
    if not isinstance(values, list) or not values:
        raise ConfigError(f"grid file {source}: {key}: `values` must be a non-empty list (got {type(values).__name__})")
    field_name = entry.get("field")
    if field_name is not None and (not isinstance(field_name, str) or field_name not in CONFIG_FIELDS):
        raise ConfigError(f"grid file {source}: {key}: `field` must name a configuration field (got {field_name!r})")
    if "doc" in entry and not isinstance(entry["doc"], str):
        raise ConfigError(f"grid file {source}: {key}: `doc` must be a string")
    over: tuple = ()
    modulo = None
    if rotation:
        raw_over = entry.get("over", [])
        if not isinstance(raw_over, list) or not all(isinstance(o, str) for o in raw_over):
            raise ConfigError(f"grid file {source}: {key}: `over` must be a list of dimension names")
        over = tuple(raw_over)
        modulo = entry.get("modulo")
        if modulo is not None and (not isinstance(modulo, str) or modulo not in CONFIG_FIELDS):
            raise ConfigError(f"grid file {source}: {key}: `modulo` must name a configuration field (got {modulo!r})")
    parsed = tuple(_parse_value(source, key, v, field_name) for v in values)
    labels = [v.label for v in parsed]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"grid file {source}: {key} has duplicate labels")
    return Axis(name=name, doc=" ".join(str(entry.get("doc", "")).split()), values=parsed, over=over, modulo=modulo)


def parse(data: dict, source: str = "") -> Grid:
    """A Grid from the TOML's data; ConfigError naming the file and the key of the
    first thing of the wrong shape or type."""
    version = data.get("version", 1)
    if not _is_int(version):
        raise ConfigError(f"grid file {source}: `version` must be an integer (got {version!r})")
    sections = {}
    for section in ("dimension", "rotate"):
        entries = data.get(section, [])
        if not isinstance(entries, list):
            raise ConfigError(f"grid file {source}: `{section}` must be an array of tables ([[{section}]])")
        sections[section] = entries
    dims = [_axis(source, "dimension", i, d, False) for i, d in enumerate(sections["dimension"])]
    rots = [_axis(source, "rotate", i, r, True) for i, r in enumerate(sections["rotate"])]
    if not dims:
        raise ConfigError(f"grid file {source}: no [[dimension]]; a grid needs at least one")
    names = [a.name for a in dims + rots]
    if len(set(names)) != len(names):
        raise ConfigError(f"grid file {source}: axis names repeat")
    dim_names = {d.name for d in dims}
    for r in rots:
        bad = [o for o in r.over if o not in dim_names]
        if bad or not r.over:
            raise ConfigError(f"grid file {source}: rotate {r.name!r}: `over` must list dimensions (got {list(r.over)})")
    raw_defaults = data.get("defaults", {})
    if not isinstance(raw_defaults, dict):
        raise ConfigError(f"grid file {source}: `defaults` must be a table ([defaults]), not {type(raw_defaults).__name__}")
    defaults = dict(raw_defaults)
    unknown = sorted(set(defaults) - set(CONFIG_FIELDS))
    if unknown:
        raise ConfigError(f"grid file {source}: unknown default field(s) {', '.join(unknown)}")
    return Grid(version, defaults, dims, rots, source)


@lru_cache(maxsize=4)
def load(path: Optional[str] = None) -> Grid:
    """The grid from ``path``, or the packaged ``remap_ab/grid.toml``."""
    try:
        if path is None:
            text = resources.files("remap_ab").joinpath(GRID_FILE).read_text()
            source = GRID_FILE
        else:
            text = Path(path).read_text()
            source = str(path)
    except OSError as exc:
        raise ConfigError(f"cannot read grid file {path or GRID_FILE}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"grid file {source} is not valid TOML: {exc}") from None
    return parse(data, source)


def parse_filters(grid: Grid, specs: Iterable[str]) -> dict:
    """``["path=dcp-compact,dcp-inplace", "k=2048"]`` -> {axis: {labels}}; repeated
    keys intersect. Keys are axis names (see grid.toml) or CaseConfig fields."""
    out: dict = {}
    known_axes = {a.name: a for a in grid.axes}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip().replace("-", "_") if key.strip() not in known_axes else key.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--filter {spec!r}: expected NAME=VALUE[,VALUE...], e.g. --filter path=dcp-compact")
        if key not in known_axes and key not in CONFIG_FIELDS:
            raise ConfigError(
                f"--filter {spec!r}: unknown name {key!r}; use one of {', '.join(known_axes)} or a config field"
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
