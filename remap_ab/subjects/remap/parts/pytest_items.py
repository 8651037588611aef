"""The remap's ``PytestHooks`` (``remap_ab.subject``): what the pytest plugin
(``remap_ab/pytest/``) asks of it beyond the protocol's other members."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from remap_ab.subject import Selection
from remap_ab.subjects.remap.grid import grid as gridmod


def grid_file(grid: Optional[str]) -> Path:
    """``grid`` as a file: itself, or the shipped grid it names (None: the default)."""
    if grid and Path(grid).is_file():
        return Path(grid)
    return Path(str(gridmod.shipped()[grid or gridmod.DEFAULT_GRID]))


def header(selection: Optional[Selection], points: list) -> list[str]:
    if selection is None:
        # The properties' PASS covers no grid: say so, and name the grids (naming them
        # costs nothing; what each covers takes expanding it, which a grid run's header does).
        return [f"no grid run; the grids {', '.join(gridmod.shipped())} run with pytest --remap-grid [FILE] "
                "or remap-ab sweep --grid NAME, each header saying what it covers"]
    # What a PASS covers of the call envelope, and the grids it leaves out, by name: what
    # each of those covers takes expanding it (a second in all), which its own run's header says.
    covered = gridmod.coverage(selection.grid, [p.config for p in points], others_described=False)
    return [f"a PASS covers {covered}; each grid's own run says what it covers"]

