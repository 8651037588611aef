"""The page's charts, drawn with matplotlib when it is installed (an optional extra:
``pip install 'remap-ab[plots]'``), as PNG bytes. Without matplotlib every function
returns None and the page says so in one line; no measurement depends on a chart.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Optional

INSTALL_HINT = "pip install 'remap-ab[plots]'"
_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display where this runs
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    _pyplot().close(fig)
    return buf.getvalue()


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


def lines(title: str, xlabel: str, ylabel: str, series: Mapping[str, Sequence[tuple]], *,
          logx: bool = True, logy: bool = True) -> Optional[bytes]:
    """One line per series of (x, y) points; non-finite points are left out."""
    if not available():
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, (name, points) in enumerate(series.items()):
        pts = [(x, y) for x, y in points if _finite(x) and _finite(y) and (y > 0 or not logy)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, color=_COLOURS[i % len(_COLOURS)])
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
    return _png(fig)


def stacked_bars(title: str, groups: Sequence[str], stacks: Mapping[str, Sequence[float]], ylabel: str) -> Optional[bytes]:
    """One bar per group, split into the ``stacks`` (e.g. launch floor, the rest)."""
    if not available():
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.5, 0.32 * len(groups) + 2), 4.6))
    bottom = [0.0] * len(groups)
    for i, (name, values) in enumerate(stacks.items()):
        vals = [v if _finite(v) and v > 0 else 0.0 for v in values]
        ax.bar(range(len(groups)), vals, bottom=bottom, label=name, color=_COLOURS[i % len(_COLOURS)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def grouped_bars(title: str, groups: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str,
                 log: bool = False) -> Optional[bytes]:
    if not available():
        return None
    plt = _pyplot()
    n = max(len(series), 1)
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(7.5, 0.3 * len(groups) * n + 2), 4.4))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v if _finite(v) else 0.0 for v in values], width=width, label=name, color=_COLOURS[i % len(_COLOURS)])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)
