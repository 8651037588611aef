"""Hypothesis strategies for topology cases, sized by the active test profile
(``remap_ab.properties.profiles``: its budget's ``max_rows`` bounds the rows).

``cases()`` draws pattern cases (the grid's axes, any values); ``explicit_cases()``
draws the rows themselves, so that shrinking a failing property reaches the smallest
rows, lengths and segment count that break it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from remap_ab.properties import profiles
from remap_ab.subjects.topology.config import INT32_MAX, LEARNED_PATTERNS, LENS_PATTERNS, MAX_SEGMENTS, TopologyCase

MODEL_WIDTHS = (2048, 2176)
WIDE_ROWS = 2  # rows of a case at a model width, in the interpreter


def _max_rows() -> int:
    return profiles.active().budget.max_rows


@st.composite
def cases(draw, max_rows: int | None = None) -> TopologyCase:
    """A pattern case: any rows (within the profile's budget), topk, S, keep and budget."""
    rows_cap = max_rows or _max_rows()
    topk = draw(st.one_of(st.integers(1, 256), st.sampled_from(MODEL_WIDTHS)))
    if topk in MODEL_WIDTHS and rows_cap < 1024:  # an interpreter-sized budget
        rows_cap = min(rows_cap, WIDE_ROWS)
    rows = draw(st.integers(1, rows_cap))
    segments = draw(st.integers(1, MAX_SEGMENTS))
    keep = draw(st.one_of(st.sampled_from((0, topk)), st.integers(0, topk)))
    max_replacements = draw(st.one_of(st.sampled_from((0, 1, segments, topk - keep, INT32_MAX)), st.integers(0, topk + 2)))
    return TopologyCase(
        rows=rows, topk=topk, segments=segments, keep=keep, max_replacements=max_replacements,
        lens=draw(st.sampled_from(LENS_PATTERNS)), learned=draw(st.sampled_from(tuple(LEARNED_PATTERNS))),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@st.composite
def explicit_cases(draw, max_rows: int = 1, max_length: int = 64, past_end: bool = True) -> TopologyCase:
    """A case given by its rows: lengths in [0, max_length], entries -1 (padding), in
    [0, L), or (``past_end``) up to 2 L + 2. Shrinks towards one short row."""
    segments = draw(st.integers(1, MAX_SEGMENTS))
    rows = draw(st.integers(1, max_rows))
    topk = draw(st.integers(1, 8))
    lens = tuple(draw(st.integers(0, max_length)) for _ in range(rows))
    learned = tuple(
        tuple(draw(st.integers(-1, (2 * n + 2) if past_end else max(n - 1, -1))) for _ in range(topk)) for n in lens
    )
    keep = draw(st.integers(0, topk))
    max_replacements = draw(st.integers(0, segments))
    return TopologyCase(
        rows=rows, topk=topk, segments=segments, keep=keep, max_replacements=max_replacements,
        explicit_learned=learned, explicit_lens=lens,
    )
