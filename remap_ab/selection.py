"""Which grid points a sweep runs: the grid, the user's filters and the device's token cap.

On the CPU (Triton interpreter, ~2-10 ms per program) the default keeps the grid's
points with at most CPU_MAX_TOKENS token rows, so the default CPU sweep stays within a
few minutes on 2 cores; ``--max-tokens`` changes the cap (``--max-tokens 1024`` runs
everything) and ``cap_note`` names what was left out, so no summary claims more.
"""

from __future__ import annotations

from typing import Optional

from remap_ab import grid as gridmod
from remap_ab.errors import ConfigError

CPU_MAX_TOKENS = 3


def default_max_tokens(device: str) -> Optional[int]:
    return CPU_MAX_TOKENS if device == "cpu" else None


def select(g: gridmod.Grid, filters: list, max_tokens: Optional[int]) -> list:
    parsed = gridmod.parse_filters(g, filters)
    points = g.select(parsed, max_tokens=max_tokens)
    if not points:
        raise ConfigError(
            "the filters select no configuration"
            + (f" with tokens <= {max_tokens} (raise --max-tokens)" if max_tokens is not None else "")
        )
    return points


def cap_note(g: gridmod.Grid, filters: list, max_tokens: Optional[int], device: str) -> str:
    """One sentence on what the token cap left out ('' when nothing)."""
    if max_tokens is None:
        return ""
    everything = g.select(gridmod.parse_filters(g, filters))
    left = [p for p in everything if p.config.tokens > max_tokens]
    if not left:
        return ""
    tok = sorted({p.config.tokens for p in left})
    why = "CPU default" if device == "cpu" else "--max-tokens"
    return (
        f"{why}: tokens <= {max_tokens}; {len(left)} of {len(everything)} selected configurations "
        f"(tokens {', '.join(map(str, tok))}) not run — --max-tokens {max(tok)} runs them"
    )


def selection_fingerprint(points: list) -> str:
    """A short hash of the selected case IDs, in order: a resumed run must select
    exactly the cases its results table was written for."""
    import hashlib

    return hashlib.sha256("\n".join(p.case_id for p in points).encode()).hexdigest()[:16]
