"""Which grid points a sweep runs: the grid, the user's filters and an optional token cap.

Every device runs the whole grid by default (on the CPU the batched interpreter runs a
launch's programs together: all 1728 in about 3.5 minutes on 2 cores). ``--max-tokens N``
keeps the points with at most N token rows for a quicker look (``--max-tokens 3``: 576
cases, under a minute), and ``cap_note`` names what it left out, so no summary claims more.
"""

from __future__ import annotations

from typing import Optional

from remap_ab import grid as gridmod
from remap_ab.errors import ConfigError


def select(g: gridmod.Grid, filters: list, max_tokens: Optional[int]) -> list:
    parsed = gridmod.parse_filters(g, filters)
    points = g.select(parsed, max_tokens=max_tokens)
    if not points:
        raise ConfigError(
            "the filters select no configuration"
            + (f" with tokens <= {max_tokens} (raise --max-tokens)" if max_tokens is not None else "")
        )
    return points


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


def selection_fingerprint(points: list) -> str:
    """A short hash of the selected case IDs, in order: a resumed run must select
    exactly the cases its results table was written for."""
    import hashlib

    return hashlib.sha256("\n".join(p.case_id for p in points).encode()).hexdigest()[:16]
