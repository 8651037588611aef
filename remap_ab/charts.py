"""One grouped bar chart, written as PNG through matplotlib when it is importable and
as a hand-written SVG otherwise.

matplotlib is not a dependency of remap-ab (the GPU images have it, CPU CI may not),
so the SVG path is what keeps ``nondet`` and ``bench`` able to draw everywhere.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Mapping, Sequence

# Colour-blind-safe (Okabe-Ito) colours, in series order.
_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def bar_chart(
    stem: Path | str,
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    ylabel: str,
    *,
    log: bool = False,
) -> Path:
    """Draw ``series`` (name -> one value per group) as bars grouped by ``groups``.

    Writes ``stem`` + ".png" (matplotlib) or ".svg" and returns the path written.
    NaN values leave a gap. With ``log``, the y axis is logarithmic (values <= 0 gap).
    """
    stem = Path(stem)
    for name, values in series.items():
        if len(values) != len(groups):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(groups)} groups")
    try:
        import matplotlib
    except ImportError:
        return _svg(stem.with_suffix(".svg"), title, groups, series, ylabel, log)
    matplotlib.use("Agg")  # no display on the machines this runs on
    return _png(stem.with_suffix(".png"), title, groups, series, ylabel, log)


def _png(path: Path, title, groups, series, ylabel, log) -> Path:
    import matplotlib.pyplot as plt

    n = max(len(series), 1)
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(min(16.0, max(8.0, 0.3 * len(groups) * n + 2)), 5.0))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, values, width=width, label=name, color=_COLOURS[i % len(_COLOURS)])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _svg(path: Path, title, groups, series, ylabel, log) -> Path:
    n = max(len(series), 1)
    bar_w, gap = 12, 14
    group_w = n * bar_w + gap
    left, right, top, bottom, plot_h = 70, 20, 40, 110, 300
    width = left + right + max(len(groups), 1) * group_w
    height = top + plot_h + bottom

    finite = [v for vs in series.values() for v in vs if _usable(v, log)]
    if log:
        lo = math.floor(math.log10(min(finite))) if finite else 0
        hi = math.ceil(math.log10(max(finite))) if finite else 1
        hi = max(hi, lo + 1)

        def y_of(v):
            return top + plot_h * (1 - (math.log10(v) - lo) / (hi - lo))

        ticks = [10.0**e for e in range(lo, hi + 1)]
        y_base = top + plot_h
    else:
        vmax = max(finite, default=1.0) or 1.0
        step = _nice_step(vmax / 5)
        vmax = step * math.ceil(vmax / step)

        def y_of(v):
            return top + plot_h * (1 - v / vmax)

        ticks = [step * i for i in range(int(round(vmax / step)) + 1)]
        y_base = y_of(0)

    e = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{e(title)}</text>',
        f'<text transform="translate(16,{top + plot_h / 2}) rotate(-90)" text-anchor="middle">{e(ylabel)}</text>',
    ]
    for t in ticks:
        y = y_of(t)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    for gi, group in enumerate(groups):
        x0 = left + gi * group_w + gap / 2
        for si, (name, values) in enumerate(series.items()):
            v = values[gi]
            if not _usable(v, log):
                continue
            y = y_of(v)
            parts.append(
                f'<rect x="{x0 + si * bar_w:.1f}" y="{min(y, y_base):.1f}" width="{bar_w - 1}" '
                f'height="{abs(y_base - y):.1f}" fill="{_COLOURS[si % len(_COLOURS)]}"><title>{e(name)}: {v:g}</title></rect>'
            )
        cx = x0 + n * bar_w / 2
        parts.append(
            f'<text transform="translate({cx:.1f},{top + plot_h + 12}) rotate(45)" font-size="9">{e(group)}</text>'
        )
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y_base:.1f}" y2="{y_base:.1f}" stroke="black"/>')
    for si, name in enumerate(series):
        x = left + si * 130
        y = height - 14
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{_COLOURS[si % len(_COLOURS)]}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{e(name)}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
    return path


def _usable(v, log: bool) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and (v > 0 if log else True)


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``raw``."""
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power
