"""A grid as data: axes with their values and labels, how a case gets its ID, a version;
and what the machinery derives from it for every subject: the selection (``--filter
NAME=V``, ``--filter case=ID``, the size cap and its note), results.csv's axis columns
and the per-dimension failure tables.

A case is a dict ``{axis name: value}`` (JSON-able values), the cross product of the
axes in their order, less what ``Grid.keep`` rejects; or, for a grid of ``blocks``, the
union of each block's cross product, in block order, without repeats. ``from_toml``
reads such a grid from a TOML file's tables."""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from remap_ab.errors import ConfigError
from remap_ab.subject import Point

CASE_FILTER = "case"


@dataclass(frozen=True)
class Axis:
    """One dimension of a grid: its values and, optionally, a label per value (what
    results.csv, the filters and the failure tables show; default ``str(value)``)."""

    name: str
    values: tuple
    labels: tuple = ()

    def __post_init__(self) -> None:
        if self.labels and len(self.labels) != len(self.values):
            raise ValueError(f"axis {self.name}: {len(self.labels)} labels for {len(self.values)} values")

    def label(self, value: Any) -> str:
        for v, text in zip(self.values, self.labels):
            if v == value:
                return str(text)
        return str(value)

    def all_labels(self) -> list[str]:
        return [self.label(v) for v in self.values]


def case_id_of(case: dict) -> str:
    """The default case ID: the first 12 hex digits of the sha256 of the case's JSON."""
    return hashlib.sha256(json.dumps(case, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Grid:
    """``axes`` crossed in order; ``version`` tells revisions apart (a resume refuses
    another); ``size``: the axis ``--max-*`` caps (its values numbers; "": no cap);
    ``cpu_max``: on the CPU, the largest ``size`` value run (None: all); ``keep(case)``:
    False drops a product point that is no case; ``case_id(case)``: its ID; ``blocks``:
    dicts ``{axis: values}``, the cases then the union of each block's product (an axis a
    block leaves out takes all its values) instead of the axes' whole product."""

    axes: tuple
    version: Any = 1
    size: str = ""
    cpu_max: Optional[int] = None
    keep: Optional[Callable[[dict], bool]] = None
    case_id: Callable[[dict], str] = case_id_of
    name: str = "grid"  # the grid's name in messages and the coverage line
    blocks: tuple = ()

    def __post_init__(self) -> None:
        names = [a.name for a in self.axes]
        if len(set(names)) != len(names) or CASE_FILTER in names:
            raise ValueError(f"grid axes {names}: names must be distinct and not {CASE_FILTER!r}")
        stray = [k for block in self.blocks for k in block if k not in names]
        if stray:
            raise ValueError(f"grid {self.name}: a block names {stray[0]!r}, none of the axes {names}")
        if self.size and self.size not in names:
            raise ValueError(f"grid size axis {self.size!r} is none of {names}")

    @property
    def axis_names(self) -> list[str]:
        return [a.name for a in self.axes]

    def cases(self) -> list[dict]:
        blocks = self.blocks or ({},)
        product = (dict(zip(self.axis_names, values)) for block in blocks
                   for values in itertools.product(*(block.get(a.name, a.values) for a in self.axes)))
        kept = (c for c in product if self.keep is None or self.keep(c))
        if not self.blocks:
            return list(kept)
        return list({json.dumps(c, sort_keys=True): c for c in kept}.values())  # the first of each repeat, in order

    def labels(self, case: dict) -> tuple[tuple[str, str], ...]:
        return tuple((a.name, a.label(case.get(a.name))) for a in self.axes)

    def select(self, filters: Sequence[str], max_size: Optional[int], device: str) -> tuple[list[Point], int, str]:
        """``(points, the grid's size, the note of what the device and cap left out)``;
        ConfigError for a bad filter or nothing left."""
        every = self.cases()
        by_name = {a.name: a for a in self.axes}
        limits = []
        if self.size:
            def size_of(case: dict) -> int:
                return case[self.size]
            if device == "cpu" and self.cpu_max is not None:
                limits.append(Limit(self.cpu_max, size_of, self.size, f"{self.size} > {self.cpu_max}, on the CPU (the interpreter)"))
            if max_size is not None:
                limits.append(Limit(max_size, size_of, self.size, f"{self.size} > {max_size}, the size cap"))
        points, note = choose(every, axes=self.axis_names, label=lambda c, axis: by_name[axis].label(c[axis]),
                              case_id=self.case_id, filters=filters, limits=limits, grid_name=self.name)
        return points, len(every), note


def from_toml(path: Path, table: str, **fields: Any) -> Grid:
    """The grid of a TOML file's ``[[TABLE]]`` tables, each a block (``axis = [values]``;
    a ``name`` key is the block's, not an axis): the axes in the order the blocks first
    name them, each with the values the blocks give it (numbers in order), the file's
    ``version``; ``fields``: the Grid's others (``name`` defaults to ``table``).
    ConfigError when the file cannot be read or has no such table."""
    try:
        data = tomllib.loads(Path(path).read_text())
        blocks = tuple({k: tuple(v) for k, v in b.items() if k != "name"} for b in data[table])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: no grid {table!r} read from it ({type(exc).__name__}: {exc}); give a TOML file "
                          f"of [[{table}]] tables, each axis = [values]") from None
    names = list(dict.fromkeys(k for b in blocks for k in b))
    axes = tuple(Axis(n, tuple(sorted({v for b in blocks for v in b.get(n, ())}, key=lambda v: (str(type(v)), v))))
                 for n in names)
    return Grid(axes, blocks=blocks, **{"version": data.get("version", 1), "name": table, **fields})


@dataclass(frozen=True)
class Limit:
    """A size limit of a selection: cases whose ``size_of`` exceeds ``top`` are left out,
    said in the note as ``(AXIS values) not run: WHY``."""

    top: int
    size_of: Callable[[Any], int]
    axis: str
    why: str


def choose(cases: Sequence[Any], *, axes: Sequence[str], label: Callable[[Any, str], str], case_id: Callable[[Any], str],
           filters: Sequence[str], limits: Sequence[Limit] = (), grid_name: str = "grid") -> tuple[list[Point], str]:
    """The points of ``cases`` (any type: ``label(case, axis)`` reads an axis' label) that
    ``filters`` keep and ``limits`` allow, in order, and the note of what the limits left
    out; ConfigError for a bad filter or nothing left. The one selection of every subject
    whose grid is a list of cases."""
    parsed = parse_filters(filters, axes, grid_name)
    ids = [case_id(c) for c in cases]
    wanted = parsed.get(CASE_FILTER)
    if wanted and wanted - set(ids):
        unknown = sorted(wanted - set(ids))
        raise ConfigError(f"--filter case={','.join(sorted(wanted))}: no case of the {grid_name} has ID {unknown[0]}"
                          + (f" ({len(unknown)} IDs unknown)" if len(unknown) > 1 else ""))
    chosen = [i for i, c in enumerate(cases)
              if all((ids[i] if name == CASE_FILTER else label(c, name)) in allowed for name, allowed in parsed.items())]
    if not chosen:
        raise ConfigError(f"the filters {' '.join(filters)} select no case of the {grid_name}")
    notes = []
    for limit in limits:
        left = [i for i in chosen if limit.size_of(cases[i]) > limit.top]
        if left:
            values = ", ".join(map(str, sorted({limit.size_of(cases[i]) for i in left})))
            notes.append(f"{len(left)} of {len(chosen)} selected cases ({limit.axis} {values}) not run: {limit.why}")
        chosen = [i for i in chosen if limit.size_of(cases[i]) <= limit.top]
    if not chosen:
        raise ConfigError("the filters select no case this run can take: " + "; ".join(notes))
    return [Point(i, ids[i], cases[i], tuple((axis, label(cases[i], axis)) for axis in axes)) for i in chosen], "; ".join(notes)


def parse_filters(filters: Sequence[str], axes: Sequence[str], grid_name: str = "grid") -> dict[str, set[str]]:
    """``NAME=V[,V...]`` (V an axis label) or ``case=ID[,ID...]``; ConfigError naming a bad one."""
    parsed: dict[str, set[str]] = {}
    for spec in filters or []:
        name, sep, values = str(spec).partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--filter {spec!r}: write NAME=V[,V...] (NAME one of {', '.join(axes)}) or case=ID[,ID...]")
        if name not in (*axes, CASE_FILTER):
            raise ConfigError(f"--filter {spec!r}: the {grid_name} has no axis {name!r}; choose one of {', '.join(axes)} "
                              "or case")
        parsed.setdefault(name, set()).update(v.strip() for v in values.split(",") if v.strip())
    return parsed


def _natural(label: str) -> tuple:
    return (0, int(label), "") if label.lstrip("-").isdigit() else (1, 0, label)


def failures_by_dimension(df: Any, axes: Sequence[tuple[str, Optional[Sequence[str]]]], passed: str = "pass") -> dict:
    """``{axis: {label: [failed, total]}}`` of results table ``df`` (a DataFrame) for each
    ``(axis, labels)`` it has a column of: the declared labels in order, then any other
    label seen; ``labels`` None: the labels seen, numbers in numeric order. The one
    failure table of every subject's summary."""
    failed = df[df["status"] != passed]
    out = {}
    for name, labels in axes:
        if name not in df.columns:
            continue
        column, bad_column = df[name].astype(str), failed[name].astype(str)
        total, bad = df.groupby(column).size(), failed.groupby(bad_column).size()
        seen = [str(k) for k in total.index]
        order = [*labels, *[s for s in seen if s not in labels]] if labels is not None else sorted(seen, key=_natural)
        out[name] = {k: [int(bad.get(k, 0)), int(total.get(k, 0))] for k in order}
    return out
