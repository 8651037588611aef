"""B's time over A's in a sweep's summary: indicative, never part of a verdict.

On a GPU the batch engine times every call of A and B with CUDA events (call.py's
``CallClock``; ``a_ms``/``b_ms`` in results.csv). Those times are one call each, with
no warm-up and no repeats, and the first call of a kernel variant includes loading it,
so they tell a slower B only roughly: the summary gives, per wrapper path × K ×
batch-size bucket, the median over the cases of B's time over A's, says that it is
indicative, and fails nothing. ``remap-ab bench`` (bench/speed_gate.py) is where speed
is judged. On the CPU the interpreter's times say nothing about a GPU's, and the
summary says speed is not judged there.

This module needs neither torch nor Triton (the summary is core).
"""

from __future__ import annotations

import statistics
from typing import Optional

INDICATIVE = ("indicative only, never a verdict: one call per case without warm-up (a variant's first call includes "
              "loading it); `remap-ab bench` judges speed with repeats and a confidence interval")
NOT_ON_CPU = "speed: not judged on the CPU (the Triton interpreter's times say nothing about a GPU's); " \
             "`remap-ab bench` on a GPU judges it"


def size_bucket(tokens: int) -> int:
    """A case's batch-size bucket: the power of two its token rows reach (1; 2-3; 4-7;
    ...; 256-511; ...)."""
    return max(int(tokens), 1).bit_length()


def bucket_label(bucket: int) -> str:
    low, high = 1 << (bucket - 1), (1 << bucket) - 1
    return str(low) if low == high else f"{low}-{high}"


def path_name(config) -> str:
    """A wrapper path in words, for grids without a ``path`` dimension."""
    if config.is_dcp:
        name = f"dcp{config.dcp_size}-" + ("compact" if config.compacts else "inplace")
    else:
        name = "convert" + ("-prefill" if config.has_prefill else "")
    return name + ("-counts" if config.counts_returned else "")


def _ms(value) -> Optional[float]:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None  # NaN compares False: dropped too


def speed_rows(records, configs: dict) -> list[dict]:
    """Per (path, K, batch-size bucket): cases timed on both sides, the median over them
    of B's time over A's, and each side's median time. ``records``: results.csv rows
    (dicts); ``configs``: case ID -> CaseConfig. A row without both times (an error,
    a rejection call, a case not in ``configs``) is left out."""
    groups: dict = {}
    for r in records:
        config = configs.get(str(r.get("case_id", "")))
        a, b = _ms(r.get("a_ms")), _ms(r.get("b_ms"))
        if config is None or a is None or b is None:
            continue
        path = str(r.get("path") or "") or path_name(config)
        groups.setdefault((path, config.topk, size_bucket(config.tokens)), []).append((a, b))
    rows = []
    for (path, k, bucket), times in sorted(groups.items()):
        rows.append({
            "path": path, "k": k, "tokens": bucket_label(bucket), "cases": len(times),
            "b_over_a": statistics.median(b / a for a, b in times),
            "a_ms": statistics.median(a for a, _ in times), "b_ms": statistics.median(b for _, b in times),
        })
    return rows


def speed_lines(rows: list, device: Optional[str], a: str = "A", b: str = "B") -> list[str]:
    """The summary's speed lines: the table on a GPU, one line on the CPU."""
    if device != "cuda":
        return ["  " + NOT_ON_CPU]
    if not rows:
        return [f"  speed: no case timed on both sides ({INDICATIVE})"]
    lines = [f"  speed, {b}'s time over {a}'s per call (median over the cases; cases in brackets) — {INDICATIVE}:"]
    by_line: dict = {}
    for r in rows:
        by_line.setdefault((r["path"], r["k"]), []).append(f"T {r['tokens']} {r['b_over_a']:.2f}x ({r['cases']})")
    width = max(len(f"{p} K={k}") for p, k in by_line)
    for (path, k), cells in by_line.items():
        lines.append(f"    {f'{path} K={k}':<{width}}  " + ", ".join(cells))
    return lines
