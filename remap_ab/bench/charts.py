"""Pictures, drawn with matplotlib (which ``pyplot`` loads for every chart): grouped bar
charts (the bench page's; a subject's studies, such as the remap's ``nondet``) and the
primitives every other chart is drawn with (the bench page's, ``figures.py``; a
subject's report pictures). Kernel-free, like the rest of bench/.

matplotlib is an optional extra (``pip install 'remap-ab[plots]'``): the GPU images
have it, a bare CPU install need not. Without it nothing here draws; callers say so
in one line (``MISSING``) and carry on, because a picture never outweighs the
measurements or the verdict it illustrates.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from remap_ab.errors import PlotsUnavailable

INSTALL = "pip install 'remap-ab[plots]'"
MISSING = f"no picture: matplotlib is not installed ({INSTALL} draws one)"

# Colour-blind-safe (Okabe-Ito) colours, in series order.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, or PlotsUnavailable."""
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(MISSING) from None
    matplotlib.use("Agg")  # no display on the machines this runs on
    import matplotlib.pyplot as plt

    return plt


def available() -> bool:
    try:
        pyplot()
    except PlotsUnavailable:
        return False
    return True


def png_bytes(fig) -> bytes:
    """``fig`` as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    pyplot().close(fig)
    return buf.getvalue()


def grouped_bars(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    ylabel: str,
    *,
    log: bool = False,
) -> bytes:
    """``series`` (name -> one value per group) as bars grouped by ``groups``, PNG bytes.
    NaN values leave a gap; with ``log`` the y axis is logarithmic. PlotsUnavailable
    (one line, with the install hint) without matplotlib."""
    for name, values in series.items():
        if len(values) != len(groups):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(groups)} groups")
    plt = pyplot()
    n = max(len(series), 1)
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(min(16.0, max(7.5, 0.3 * len(groups) * n + 2)), 4.6))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, values, width=width, label=name, color=COLOURS[i % len(COLOURS)])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return png_bytes(fig)


def pivot(rows, group: Callable, series: Callable, value: Callable) -> tuple[list, dict]:
    """Rows of any kind as ``grouped_bars`` input: ``(groups, {series: [value per group]})``,
    groups and series in first-seen order, NaN where a series has no row for a group."""
    groups: list = []
    cells: dict = {}
    for r in rows:
        g = group(r)
        if g not in groups:
            groups.append(g)
        cells.setdefault(series(r), {})[g] = float(value(r))
    return groups, {name: [per.get(g, float("nan")) for g in groups] for name, per in cells.items()}


def bar_chart(
    stem: Path | str,
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    ylabel: str,
    *,
    log: bool = False,
) -> Path:
    """``grouped_bars`` written to ``stem`` + ".png"; returns that path."""
    png = grouped_bars(title, groups, series, ylabel, log=log)
    path = Path(stem).with_suffix(".png")
    path.write_bytes(png)
    return path
