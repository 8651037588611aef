"""The topology subject's grid: grid.toml's blocks expanded into cases; and, as
``pytest_*`` functions, the subject's part of the pytest grid beyond
``remap_ab.subject.Subject`` (remap_ab/pytest/grid.py looks them up here)."""

from __future__ import annotations

import itertools
import tomllib
import zlib
from functools import cache
from pathlib import Path
from typing import Optional

from remap_ab.subjects.topology.config import INT32_MAX, TopologyCase

GRID_FILE = Path(__file__).with_name("grid.toml")
CPU_MAX_ROWS = 64  # larger cases run on a GPU only
AXES = ("rows", "topk", "segments", "lens", "learned", "keep", "max_replacements")


def resolve_keep(spec: int | str, topk: int) -> int:
    named = {"half": topk // 2, "topk-1": topk - 1, "topk": topk}
    value = named[spec] if isinstance(spec, str) else spec
    return min(max(value, 0), topk)


def resolve_max(spec: int | str, segments: int, topk: int, keep: int) -> int:
    free = topk - keep
    named = {"S-1": segments - 1, "S": segments, "S+1": segments + 1, "free-1": free - 1, "free": free, "huge": INT32_MAX}
    value = named[spec] if isinstance(spec, str) else spec
    return max(value, 0)


def _seed(block: str, fields: tuple) -> int:
    return zlib.crc32(repr((block, fields)).encode())


@cache
def cases() -> tuple[TopologyCase, ...]:
    """Every case of the packaged grid, in file order, without repeats (two edges can
    resolve alike)."""
    return load(GRID_FILE)[1]


@cache
def load(path: Path) -> tuple[int, tuple[TopologyCase, ...]]:
    """``(version, cases)`` of a grid file of grid.toml's form; KeyError, TypeError or
    ValueError (a TOMLDecodeError is one) when it is not of that form."""
    data = tomllib.loads(Path(path).read_text())
    out: dict[tuple, TopologyCase] = {}
    for block in data["block"]:
        for rows, topk, segments, lens, learned, keep_spec, max_spec in itertools.product(*(block[a] for a in AXES)):
            keep = resolve_keep(keep_spec, topk)
            max_replacements = resolve_max(max_spec, segments, topk, keep)
            fields = (rows, topk, segments, keep, max_replacements, lens, learned)
            if fields not in out:
                out[fields] = TopologyCase(
                    rows=rows, topk=topk, segments=segments, keep=keep, max_replacements=max_replacements,
                    lens=lens, learned=learned, seed=_seed(block["name"], fields),
                )
    return int(data["version"]), tuple(out.values())


def cpu_cases() -> tuple[TopologyCase, ...]:
    """The cases small enough for the interpreter."""
    return tuple(c for c in cases() if c.rows <= CPU_MAX_ROWS)


def pytest_grid_file(grid: Optional[str]) -> Path:
    """The file a grid run collects: ``grid`` itself, or the packaged grid (None, ``pr``)."""
    return GRID_FILE if grid in (None, "", "pr") else Path(str(grid))


