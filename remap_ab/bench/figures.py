"""The page's charts as PNG bytes, drawn with ``charts.py`` (matplotlib, an
optional extra: ``pip install 'remap-ab[plots]'``). Without matplotlib every function
returns None and the page says so in one line; no measurement depends on a chart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Optional

from remap_ab.bench import charts
from remap_ab.bench.charts import COLOURS, available, png_bytes, pyplot

INSTALL_HINT = charts.INSTALL

__all__ = ["available", "grouped_bars", "lines", "stacked_bars"]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def lines(title: str, xlabel: str, ylabel: str, series: Mapping[str, Sequence[tuple]], *,
          logx: bool = True, logy: bool = True) -> Optional[bytes]:
    """One line per series of (x, y) points; non-finite points are left out."""
    if not available():
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, (name, points) in enumerate(series.items()):
        pts = [(x, y) for x, y in points if _finite(x) and _finite(y) and (y > 0 or not logy)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, color=COLOURS[i % len(COLOURS)])
    if logx:
        from matplotlib.ticker import ScalarFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 256, not 2^8
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return png_bytes(fig)


def stacked_bars(title: str, groups: Sequence[str], stacks: Mapping[str, Sequence[float]], ylabel: str) -> Optional[bytes]:
    """One bar per group, split into the ``stacks`` (e.g. launch floor, the rest)."""
    if not available():
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(7.5, 0.32 * len(groups) + 2), 4.6))
    bottom = [0.0] * len(groups)
    for i, (name, values) in enumerate(stacks.items()):
        vals = [v if _finite(v) and v > 0 else 0.0 for v in values]
        ax.bar(range(len(groups)), vals, bottom=bottom, label=name, color=COLOURS[i % len(COLOURS)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return png_bytes(fig)


def grouped_bars(title: str, groups: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str,
                 log: bool = False) -> Optional[bytes]:
    """``charts.grouped_bars``, or None without matplotlib; a non-finite value leaves a gap."""
    if not available():
        return None
    return charts.grouped_bars(title, groups, {k: [v if _finite(v) else math.nan for v in vs] for k, vs in series.items()},
                               ylabel, log=log)
