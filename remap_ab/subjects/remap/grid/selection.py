"""Which grid points a sweep runs: the grid, the user's filters and an optional token cap.

Every device runs the whole grid by default (on the CPU the batched interpreter runs a
launch's programs together: all 1728 in about 3 minutes on 2 cores). ``--max-tokens N``
keeps the points with at most N token rows for a quicker look (``--max-tokens 3``: 576
cases, under a minute), and ``cap_note`` names what it left out, so no summary claims more.
"""

from __future__ import annotations

from typing import Optional

from remap_ab.errors import ConfigError
from remap_ab.status import plural
from remap_ab.subject import Selection
from remap_ab.subjects.remap.grid import grid as gridmod


def select(g: gridmod.Grid, filters: list, max_tokens: Optional[int]) -> list:
    """The grid points the filters keep (ConfigError when none)."""
    return select_with_calls(g, filters, max_tokens, [])[0]


def select_with_calls(g: gridmod.Grid, filters: list, max_tokens: Optional[int], calls: list) -> tuple[list, list]:
    """(grid points, rejection calls) a sweep runs. ``calls`` are every rejection call
    (rejections.sweep_points); the filters keep them as they keep the grid's points
    (``call_kept``), and ``--filter case=ID,...`` keeps exactly the rows named, of
    either kind (IDs of neither are refused). ``--max-tokens`` caps the grid only: a
    call is a few token rows, refused before any launch by a correct wrapper."""
    parsed = gridmod.parse_filters(g, filters)
    ids = parsed.get(gridmod.CASE_FILTER)
    points = g.select(parsed, max_tokens=max_tokens)
    calls = [c for c in calls if call_kept(g, parsed, c)]
    if ids is not None:
        unknown = sorted(ids - {p.case_id for p in g.points()} - {c.case_id for c in calls})
        if unknown:
            spec = next(f for f in filters if f.strip().startswith(gridmod.CASE_FILTER))
            raise ConfigError(f"--filter {spec!r}: no case of the grid has ID {unknown[0]}"
                              + (f" ({len(unknown)} IDs unknown)" if len(unknown) > 1 else "")
                              + "; `remap-ab sweep --list` lists the grid's cases")
        calls = [c for c in calls if c.case_id in ids]
        if points or calls:
            return points, calls
    if not points:
        raise ConfigError(
            "the filters select no configuration"
            + (f" with tokens <= {max_tokens} (raise --max-tokens)" if max_tokens is not None else "")
        )
    return points, calls


def listing(selection: Selection, filters: list, max_tokens: Optional[int], device: str) -> tuple[list[str], str]:
    """``sweep --list``: a line per grid point, then per rejection call, of what the
    subject's ``select`` chose, and the closing sentence: what the cap and the features'
    plan left out (the points neither side's wrapper takes are not run: not listed either)."""
    g = selection.grid
    points, calls = selection.points[:selection.grid_points], selection.points[selection.grid_points:]
    parsed = gridmod.parse_filters(g, filters)
    unrunnable = len(g.select(parsed, max_tokens=max_tokens)) - len(points)
    note = selection.note
    listed, rejections = plural(len(points), "configuration"), plural(len(calls), "rejection call")
    if unrunnable:
        skipped = (f"{plural(unrunnable, 'selected configuration')} not listed: they pass a parameter that neither "
                   f"A ({selection.a}) nor B ({selection.b}) takes on the wrapper they call")
        note = f"{note}; {skipped}" if note else skipped
    lines = [p.line() for p in (*points, *calls)]
    if note:
        return lines, f"listed {listed} and {rejections}, what `sweep` runs on {device}; {note}"
    return lines, (f"listed {listed}: every one the filters select ({len(g.select(parsed))}; the grid has "
                   f"{len(g.points())}), and {rejections} (rejections.toml): what `sweep` runs on {device}")


def call_kept(g: gridmod.Grid, parsed: dict, call) -> bool:
    """Whether the parsed filters keep a rejection call (a ``RejectionPoint``). A call is
    judged on its base case (the valid case whose call is then broken), so it has a
    value on every dimension the grid's points have: on a grid axis, the labels of the
    axis values whose fields the base case holds (its ``path``: the wrapper, mode and
    counts of its base; ``-`` where none fits, as a rotation a case does not use); on a
    configuration field, the base case's value. ``case=`` is left to the caller."""
    base = call.config.base
    # As in the grid, a rotation is "-" where a dimension's value sets its fields.
    set_by_dimensions = {name for d in g.dimensions for v in _values_held(d, base) for name, _ in v.fields}
    axes = {a.name: a for a in g.axes}
    for key, allowed in parsed.items():
        if key == gridmod.CASE_FILTER:
            continue
        if key in axes:
            values = _axis_labels(axes[key], base, set_by_dimensions if axes[key] in g.rotations else set())
        else:
            values = {gridmod._norm(getattr(base, key))}
        if not values & set(allowed):
            return False
    return True


def _values_held(axis: gridmod.Axis, config) -> list:
    """The values of ``axis`` whose every field ``config`` holds."""
    return [v for v in axis.values
            if all(gridmod._norm(getattr(config, name)) == gridmod._norm(value) for name, value in v.fields)]


def _axis_labels(axis: gridmod.Axis, config, overridden: set) -> set:
    """The labels of ``axis`` that ``config`` sits on (``-``: none, or a rotation whose
    fields a dimension sets)."""
    names = {name for v in axis.values for name, _ in v.fields}
    if names & overridden:
        return {"-"}
    if axis.modulo is not None:  # a rotation taken modulo a field: labelled by the value the case has
        return {str(getattr(config, name)) for name in names}
    return {v.label for v in _values_held(axis, config)} or {"-"}


def cap_note(g: gridmod.Grid, filters: list, max_tokens: Optional[int]) -> str:
    """One sentence on what the token cap left out ('' when nothing)."""
    if max_tokens is None:
        return ""
    everything = g.select(gridmod.parse_filters(g, filters))
    left = [p for p in everything if p.config.tokens > max_tokens]
    if not left:
        return ""
    tok = sorted({p.config.tokens for p in left})
    return (
        f"--max-tokens: tokens <= {max_tokens}; {len(left)} of {len(everything)} selected configurations "
        f"(tokens {', '.join(map(str, tok))}) not run — --max-tokens {max(tok)} runs them"
    )
