"""Speed in the verdicts: B's time over A's in a sweep's summary (indicative, never
part of a verdict), and the speed gate of ``remap-ab bench`` (a statistical rule that
fails a cell).

The sweep's summary: on a GPU the batch engine times every call of A and B with CUDA events (call.py's
``CallClock``; ``a_ms``/``b_ms`` in results.csv). Those times are one call each, with
no warm-up and no repeats, and the first call of a kernel variant includes loading it,
so they tell a slower B only roughly: the summary gives, per group of cases (the
subject's: its ``speed_rows``), the median over the cases of B's time over A's, says
that it is indicative, and fails nothing. ``remap-ab bench`` (the speed gate below) is where speed
is judged. On the CPU the interpreter's times say nothing about a GPU's, and the
summary says speed is not judged there.

The speed gate: is B slower than A beyond noise, on one cell's repeated timings? One
median against another is one number each, and two equal kernels differ by a few
per cent from run to run. The rule here uses the repeats: the ratio of B's median to
A's, with a percentile bootstrap confidence interval (each side's repeats resampled
with replacement, the ratio of medians taken each time). A cell fails when the whole
interval lies above ``1 + fail_slower``: B is slower than A by more than the allowed
margin even at the fast end of what the repeats allow. A cell whose interval reaches
below that line passes, however slow its point estimate; a cell with fewer than
``MIN_REPEATS`` repeats per side is not judged, and says so (never a pass).

The threshold follows pytest-benchmark's ``--benchmark-compare-fail`` convention:
``--fail-slower 5%`` (a percentage, or a fraction such as 0.05); ``off`` turns the
gate off. ``judge_speed`` is a pure function of the timings: tested on synthetic timings.

This module needs neither torch nor Triton (the summary is core).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from remap_ab.errors import UsageError

INDICATIVE = ("indicative only, never a verdict: one call per case without warm-up (a variant's first call includes "
              "loading it); `remap-ab bench` judges speed with repeats and a confidence interval")
NOT_ON_CPU = "speed: not judged on the CPU (the Triton interpreter's times say nothing about a GPU's); " \
             "`remap-ab bench` on a GPU judges it"


def size_bucket(size: int) -> int:
    """A case's size bucket: the power of two its size reaches (1; 2-3; 4-7; ...;
    256-511; ...)."""
    return max(int(size), 1).bit_length()


def bucket_label(bucket: int) -> str:
    low, high = 1 << (bucket - 1), (1 << bucket) - 1
    return str(low) if low == high else f"{low}-{high}"


def both_times(record) -> Optional[tuple[float, float]]:
    """``(a_ms, b_ms)`` of a results.csv row (a dict) timed on both sides, else None (an
    error, a call the subject refuses before any launch, a time that is not positive)."""
    a, b = _ms(record.get("a_ms")), _ms(record.get("b_ms"))
    return None if a is None or b is None else (a, b)


def _ms(value) -> Optional[float]:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None  # NaN compares False: dropped too


def ratio_cell(times: Sequence[tuple[float, float]]) -> dict:
    """One group of cases' ``(a_ms, b_ms)``: how many, the median over them of B's time
    over A's, and each side's median time."""
    return {
        "cases": len(times),
        "b_over_a": statistics.median(b / a for a, b in times),
        "a_ms": statistics.median(a for a, _ in times), "b_ms": statistics.median(b for _, b in times),
    }


def table_lines(cells_by_line: dict[str, list[str]], device: Optional[str], a: str = "A", b: str = "B") -> list[str]:
    """The summary's speed lines: on a GPU a line per group label (the subject's, e.g. a
    path and a width) holding its cells, in order; one line on the CPU."""
    if device != "cuda":
        return ["  " + NOT_ON_CPU]
    if not cells_by_line:
        return [f"  speed: no case timed on both sides ({INDICATIVE})"]
    lines = [f"  speed, {b}'s time over {a}'s per call (median over the cases; cases in brackets) — {INDICATIVE}:"]
    width = max(len(label) for label in cells_by_line)
    for label, cells in cells_by_line.items():
        lines.append(f"    {label:<{width}}  " + ", ".join(cells))
    return lines


# ------------------------------------------------------------------- the speed gate
DEFAULT_FAIL_SLOWER = 0.05
CONFIDENCE = 0.95
RESAMPLES = 2000
MIN_REPEATS = 5


@dataclass(frozen=True)
class SpeedJudgement:
    """One cell under the gate. ``ratio``: B's median over A's; ``low``/``high``: the
    confidence interval of that ratio; ``slower``: the gate fails the cell; ``judged``:
    False when there were too few repeats to judge (``why`` says so)."""

    ratio: float
    low: float
    high: float
    fail_slower: float
    confidence: float
    judged: bool
    slower: bool
    why: str = ""

    def line(self, a: str = "A", b: str = "B") -> str:
        """The judgement in words, e.g. "new/old 1.32x (95 % CI 1.28-1.36) > 1.05: SLOWER"."""
        if not self.judged:
            return f"{b}/{a} not judged: {self.why}"
        ci = f"{b}/{a} {self.ratio:.3f}x ({100 * self.confidence:.0f} % CI {self.low:.3f}-{self.high:.3f})"
        limit = 1 + self.fail_slower
        if self.slower:
            return f"{ci}: SLOWER, the whole interval above {limit:.2f}"
        return f"{ci}: ok (not slower beyond {limit:.2f} with {100 * self.confidence:.0f} % confidence)"


def parse_fail_slower(text: str) -> Optional[float]:
    """``"5%"`` or ``"0.05"`` -> 0.05; ``"off"`` -> None. Anything else: UsageError."""
    raw = str(text).strip().lower()
    if raw in ("off", "none", "no"):
        return None
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = float("nan")
    if not (0 <= value < 10):  # NaN fails too
        raise UsageError(f"--fail-slower {text!r}: give how much slower B may be, as a percentage (5%) or a "
                         "fraction (0.05), or off")
    return value


def _median_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    return statistics.median(b) / statistics.median(a)


def judge_speed(a: Sequence[float], b: Sequence[float], *, fail_slower: float = DEFAULT_FAIL_SLOWER,
                confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0,
                min_repeats: int = MIN_REPEATS) -> SpeedJudgement:
    """The gate on one cell: ``a`` and ``b`` are the repeats' times (any unit, the same
    for both). Deterministic for a given ``seed``."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    few = [f"{name} has {len(xs)}" for name, xs in (("A", a), ("B", b)) if len(xs) < min_repeats]
    bad = [name for name, xs in (("A", a), ("B", b)) if any(not (x > 0) for x in xs)]
    if few or bad:
        why = (f"too few repeats ({', '.join(few)}; at least {min_repeats} each)" if few
               else f"{' and '.join(bad)} has a time that is not positive")
        ratio = _median_ratio(a, b) if a and b and not bad else float("nan")
        return SpeedJudgement(ratio, float("nan"), float("nan"), fail_slower, confidence, False, False, why)
    rng = random.Random(seed)
    ratios = sorted(_median_ratio(rng.choices(a, k=len(a)), rng.choices(b, k=len(b))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = ratios[int(tail * (resamples - 1))]
    high = ratios[int(round((1 - tail) * (resamples - 1)))]
    return SpeedJudgement(_median_ratio(a, b), low, high, fail_slower, confidence, True, low > 1 + fail_slower)
