"""A grid as data: axes with their values and labels, how a case gets its ID, a version;
and what the machinery derives from it for every subject: the selection (``--filter
NAME=V``, ``--filter case=ID``, the size cap and its note), results.csv's axis columns
and the per-dimension failure tables.

A case is a dict ``{axis name: value}`` (JSON-able values), the cross product of the
axes in their order, less what ``Grid.keep`` rejects."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    False drops a product point that is no case; ``case_id(case)``: its ID."""

    axes: tuple
    version: Any = 1
    size: str = ""
    cpu_max: Optional[int] = None
    keep: Optional[Callable[[dict], bool]] = None
    case_id: Callable[[dict], str] = case_id_of
    name: str = "grid"  # the grid's name in messages and the coverage line

    def __post_init__(self) -> None:
        names = [a.name for a in self.axes]
        if len(set(names)) != len(names) or CASE_FILTER in names:
            raise ValueError(f"grid axes {names}: names must be distinct and not {CASE_FILTER!r}")
        if self.size and self.size not in names:
            raise ValueError(f"grid size axis {self.size!r} is none of {names}")

    @property
    def axis_names(self) -> list[str]:
        return [a.name for a in self.axes]

    def cases(self) -> list[dict]:
        product = (dict(zip(self.axis_names, values)) for values in itertools.product(*(a.values for a in self.axes)))
        return [c for c in product if self.keep is None or self.keep(c)]

    def labels(self, case: dict) -> tuple[tuple[str, str], ...]:
        return tuple((a.name, a.label(case.get(a.name))) for a in self.axes)

    def select(self, filters: Sequence[str], max_size: Optional[int], device: str) -> tuple[list[Point], int, str]:
        """``(points, the grid's size, the note of what the device and cap left out)``;
        ConfigError for a bad filter or nothing left."""
        every = self.cases()
        parsed = parse_filters(filters, self.axis_names)
        ids = [self.case_id(c) for c in every]
        wanted = parsed.get(CASE_FILTER)
        if wanted and wanted - set(ids):
            unknown = sorted(wanted - set(ids))
            raise ConfigError(f"--filter case={','.join(sorted(wanted))}: no case of the {self.name} has ID {unknown[0]}"
                              + (f" ({len(unknown)} IDs unknown)" if len(unknown) > 1 else ""))
        chosen = [(i, c) for i, c in enumerate(every) if _kept(self, c, ids[i], parsed)]
        if not chosen:
            raise ConfigError(f"the filters {' '.join(filters)} select no case of the {self.name}")
        notes = []
        limits = [(self.cpu_max, "on the CPU (the interpreter)")] if device == "cpu" and self.cpu_max is not None else []
        limits += [(max_size, "the size cap")] if max_size is not None and self.size else []
        for top, why in limits:
            left = [c for _, c in chosen if c[self.size] > top]
            if left:
                values = ", ".join(map(str, sorted({c[self.size] for c in left})))
                notes.append(f"{len(left)} of {len(chosen)} selected cases ({self.size} {values}) not run: "
                             f"{self.size} > {top}, {why}")
            chosen = [(i, c) for i, c in chosen if c[self.size] <= top]
        if not chosen:
            raise ConfigError("the filters select no case this run can take: " + "; ".join(notes))
        return [Point(i, ids[i], c, self.labels(c)) for i, c in chosen], len(every), "; ".join(notes)


def parse_filters(filters: Sequence[str], axes: Sequence[str]) -> dict[str, set[str]]:
    """``NAME=V[,V...]`` (V an axis label) or ``case=ID[,ID...]``; ConfigError naming a bad one."""
    parsed: dict[str, set[str]] = {}
    for spec in filters or []:
        name, sep, values = str(spec).partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise ConfigError(f"--filter {spec!r}: write NAME=V[,V...] (NAME one of {', '.join(axes)}) or case=ID[,ID...]")
        if name not in (*axes, CASE_FILTER):
            raise ConfigError(f"--filter {spec!r}: the grid has no axis {name!r}; choose one of {', '.join(axes)} or case")
        parsed.setdefault(name, set()).update(v.strip() for v in values.split(",") if v.strip())
    return parsed


def _kept(grid: Grid, case: dict, cid: str, parsed: dict[str, set[str]]) -> bool:
    by_name = {a.name: a for a in grid.axes}
    return all((cid if name == CASE_FILTER else by_name[name].label(case[name])) in allowed
               for name, allowed in parsed.items())


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
