"""Class coverage of a property suite: which equivalence classes its examples visit.

``drawn_examples(test)`` replays a ``@given`` test's example generation with a stub
body that only records the arguments — no kernel runs. Under a derandomized profile
(ci) Hypothesis seeds a test's generation from a digest of the test function's
source and signature; the stub is ``functools.wraps``-ed onto the original, so it has
the same digest and receives exactly the examples the real test receives (explicit
``@example``s first, then the generated ones), as long as the real test passes. So the
coverage of the ci run is known without running it, deterministically, in any xdist
worker. Under a random profile the replay is a fresh sample of the same strategies.

Only ``@given`` keyword arguments are seen, so properties draw everything through
``@given`` (no ``st.data()``), which this suite does.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from remap_ab.subjects.remap.case.config import CaseConfig

from .classes import REQUIRED_CLASSES, case_classes


def drawn_examples(test: Callable, **fixtures) -> list[dict]:
    """The keyword arguments ``test`` (a ``@given`` test) is called with, in order.

    ``fixtures`` fills the test's non-``@given`` parameters (pytest fixtures)."""
    handle = getattr(test, "hypothesis", None)
    if handle is None:
        raise TypeError(f"{getattr(test, '__name__', test)!r} is not a @given test")
    original = handle.inner_test
    seen: list[dict] = []

    @functools.wraps(original)
    def record_only(*args, **kwargs):
        seen.append({k: v for k, v in kwargs.items() if k not in fixtures})

    handle.inner_test = record_only
    try:
        test(**fixtures)
    finally:
        handle.inner_test = original
    return seen


@dataclass
class ClassCoverage:
    """How often each class was visited, over ``cases`` cases of ``tests`` tests."""

    counts: Counter = field(default_factory=Counter)
    per_test: dict = field(default_factory=dict)  # test name -> cases drawn
    cases: int = 0

    def add(self, test_name: str, configs: Iterable[CaseConfig]) -> None:
        n = 0
        for config in configs:
            self.counts.update(set(case_classes(config)))
            n += 1
        self.per_test[test_name] = self.per_test.get(test_name, 0) + n
        self.cases += n

    def missing(self, required: Sequence[str] = REQUIRED_CLASSES) -> list[str]:
        return [c for c in required if self.counts[c] == 0]

    def table(self, required: Sequence[str] = REQUIRED_CLASSES) -> str:
        """A plain-text table: class, cases visiting it, share of all cases."""
        width = max(len(c) for c in list(required) + list(self.counts))
        lines = [f"{'class':<{width}}  {'cases':>5}  {'share':>6}", "-" * (width + 15)]
        for c in list(required) + sorted(set(self.counts) - set(required)):
            n = self.counts[c]
            share = f"{100 * n / self.cases:5.1f}%" if self.cases else "   - "
            flag = "" if n else "  <-- never visited"
            lines.append(f"{c:<{width}}  {n:>5}  {share:>6}{flag}")
        lines.append("-" * (width + 15))
        lines.append(f"{self.cases} cases drawn by {len(self.per_test)} tests: "
                     + ", ".join(f"{name} {n}" for name, n in self.per_test.items()))
        return "\n".join(lines)


def coverage_of(tests: Iterable[Callable], **fixtures) -> ClassCoverage:
    """Class coverage of the examples the given ``@given`` tests draw."""
    cov = ClassCoverage()
    for test in tests:
        drawn = drawn_examples(test, **fixtures)
        cov.add(test.__name__, [kw["config"] for kw in drawn if isinstance(kw.get("config"), CaseConfig)])
    return cov
