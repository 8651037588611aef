"""The remap's speed table in a sweep's summary (``remap_ab/speed.py`` holds the
kernel-free statistics): per wrapper path × K × batch-size bucket, B's time over A's."""

from __future__ import annotations

from typing import Optional

from remap_ab.speed import both_times, bucket_label, ratio_cell, size_bucket, table_lines


def path_name(config) -> str:
    """A wrapper path in words, for grids without a ``path`` dimension."""
    if config.is_dcp:
        name = f"dcp{config.dcp_size}-" + ("compact" if config.compacts else "inplace")
    else:
        name = "convert" + ("-prefill" if config.has_prefill else "")
    return name + ("-counts" if config.counts_returned else "")


def speed_rows(records, configs: dict) -> list[dict]:
    """Per (path, K, batch-size bucket): cases timed on both sides, the median over them
    of B's time over A's, and each side's median time. ``records``: results.csv rows
    (dicts); ``configs``: case ID -> CaseConfig. A row without both times (an error,
    a rejection call, a case not in ``configs``) is left out."""
    groups: dict = {}
    for r in records:
        config = configs.get(str(r.get("case_id", "")))
        times = both_times(r)
        if config is None or times is None:
            continue
        path = str(r.get("path") or "") or path_name(config)
        groups.setdefault((path, config.topk, size_bucket(config.tokens)), []).append(times)
    return [{"path": path, "k": k, "tokens": bucket_label(bucket), **ratio_cell(times)}
            for (path, k, bucket), times in sorted(groups.items())]


def speed_lines(rows: list, device: Optional[str], a: str = "A", b: str = "B") -> list[str]:
    """The summary's speed lines: a line per path and K, a cell per batch-size bucket."""
    by_line: dict = {}
    for r in rows:
        by_line.setdefault(f"{r['path']} K={r['k']}", []).append(f"T {r['tokens']} {r['b_over_a']:.2f}x ({r['cases']})")
    return table_lines(by_line, device, a, b)
