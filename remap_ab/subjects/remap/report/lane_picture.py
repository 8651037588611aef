"""The lane picture of a failing remap case's report: which of the [T, K] output lanes A
and B depart from the oracle in, drawn with the bench machinery's matplotlib primitives
(``remap_ab/bench/charts.py``; matplotlib optional, as there).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remap_ab.bench.charts import pyplot

if TYPE_CHECKING:
    import numpy as np

# The lane picture's colours: A's and B's departures, both, valid and invalid lanes.
ONLY_A = "#D55E00"  # vermillion
ONLY_B = "#0072B2"  # blue
BOTH = "#CC79A7"  # reddish purple
VALID = "#C8C8C8"  # a lane the oracle holds a valid value in (or a compacted prefix)
EMPTY = "#FFFFFF"


@dataclass(frozen=True)
class LaneMap:
    """What the lane picture shows, as numpy arrays already reduced to the picture's
    cells (``lane_cells`` makes them from the [T, K] lanes; no torch needed here).

    shape                 (T, K), the lanes the picture covers
    cells                 [rows, cols] int8, ``cell_size``'s cells: the most telling lane
                          of each (0 empty, 1 valid, 2 only A differs, 3 only B, 4 both)
    valid_share           [rows, cols] float: the share of each cell's lanes shaded valid
                          (the oracle's valid lanes, or the compacted prefix)
    zoom                  the codes (as ``cells``) of the lanes ``zoom_window`` names,
                          lane by lane; None when it names none
    counts                label -> [T] int: each row's valid count; "oracle" always,
                          A's and B's when they returned counts that differ
    compacted             the output is compacted: a row's count is where its prefix
                          ends, drawn as a line across the lanes
    first                 (row, col) of the verdict's first mismatch, or (row, -1) for a
                          per-row one; None when the verdict names no row
    """

    shape: tuple[int, int]
    cells: np.ndarray
    valid_share: np.ndarray
    zoom: np.ndarray | None
    label_a: str
    label_b: str
    block_n: int
    counts: Mapping[str, np.ndarray]
    compacted: bool
    first: tuple[int, int] | None


MAX_CELL_ROWS = 256  # the overview downsamples beyond these (any lane in a cell marks it)
MAX_CELL_COLS = 512
MARKED_CELLS = 400  # up to this many differing cells get a ring each, so one lane shows
ZOOM_COLS = 48  # the zoom shows this many lanes around the first mismatch
ZOOM_ROWS = 7


def cell_size(t: int, k: int) -> tuple[int, int]:
    """Lanes per cell of the overview of [t, k] lanes, vertically and horizontally."""
    return -(-t // MAX_CELL_ROWS), -(-k // MAX_CELL_COLS)


@dataclass(frozen=True)
class ZoomWindow:
    """Where the lane-by-lane zoom looks: around (row, col), rows rlo..rhi-1 and
    columns clo..chi-1; ``lane_named``: the verdict names that lane (else the end of
    a compacted row's valid prefix)."""

    row: int
    col: int
    lane_named: bool
    rlo: int
    rhi: int
    clo: int
    chi: int


def first_marks(shape: tuple[int, int], first, compacted: bool, oracle_counts) -> tuple[int | None, int | None, bool]:
    """``(row, col, lane_named)`` the picture marks for the verdict's ``first``: the row
    (None: none in the picture), the column (the lane's, or where a compacted row's
    valid prefix ends; None: neither), and whether the verdict named that lane."""
    t, k = shape
    row: int | None = None
    col: int | None = None
    if first is not None and 0 <= first[0] < t:
        row = first[0]
        col = first[1] if 0 <= first[1] < k else None
    lane_named = col is not None  # else the verdict names a row's count
    if row is not None and col is None and compacted:
        col = min(k - 1, int(oracle_counts[row]))  # where its prefix ends
    return row, col, lane_named


def zoom_window(shape: tuple[int, int], first, compacted: bool, oracle_counts) -> ZoomWindow | None:
    """The lanes the zoom shows (``first_marks``'s lane and those around it), or None."""
    t, k = shape
    r0, c0, lane_named = first_marks(shape, first, compacted, oracle_counts)
    if r0 is None or c0 is None:
        return None
    rlo = max(0, min(r0 - ZOOM_ROWS // 2, t - ZOOM_ROWS))
    clo = max(0, min(c0 - ZOOM_COLS // 2, k - ZOOM_COLS))
    return ZoomWindow(r0, c0, lane_named, rlo, min(t, rlo + ZOOM_ROWS), clo, min(k, clo + ZOOM_COLS))


def lane_cells(differs_a, differs_b, valid, window: ZoomWindow | None):
    """``(cells, valid_share, zoom)`` of ``LaneMap`` from [T, K] bool torch tensors
    (``differs_a``/``differs_b`` None: that side has no comparable output), reduced to
    the picture's cells with torch on the tensors' device: only the cells (at most
    MAX_CELL_ROWS x MAX_CELL_COLS) and the zoom's few lanes move to the host."""
    import torch

    t, k = valid.shape
    rh, cw = cell_size(t, k)
    rows, cols = -(-t // rh), -(-k // cw)

    def by_cell(x):  # [T, K] uint8 as [rows, rh, cols, cw], zero past T and K
        if (rows * rh, cols * cw) != (t, k):
            x = torch.nn.functional.pad(x, (0, cols * cw - k, 0, rows * rh - t))
        return x.reshape(rows, rh, cols, cw)

    # A lane's code is 1 + (A differs) + 2 (B differs) where either does, else 1 if it
    # is valid: a cell shows its most telling lane (the largest code), a cell without
    # difference is shaded by the share of its lanes that are valid.
    none = torch.zeros((t, k), dtype=torch.uint8, device=valid.device)
    a8 = none if differs_a is None else differs_a.view(torch.uint8)
    departs = a8.add(none if differs_b is None else differs_b.view(torch.uint8), alpha=2)
    valid8 = valid.to(torch.bool).view(torch.uint8)
    # Over a cell's rows first: whole rows at a time, where over its few columns first
    # is one short reduction per cell (4x-10x slower on a CPU).
    worst = by_cell(departs).amax(dim=1).amax(dim=2)
    valid_lanes = by_cell(valid8).sum(dim=1, dtype=torch.int16 if rh < 2**15 else torch.int32).sum(dim=2, dtype=torch.int32)
    cells = torch.where(worst > 0, worst + 1, (valid_lanes > 0).to(torch.uint8)).to(torch.int8)
    zoom = None
    if window is not None:
        lanes = (slice(window.rlo, window.rhi), slice(window.clo, window.chi))
        d = departs[lanes]
        zoom = torch.where(d > 0, d + 1, valid8[lanes]).to(torch.int8).cpu().numpy()
    # The share in float64 from exact integer counts: what numpy's mean over the cell gives.
    share = valid_lanes.cpu().numpy().astype("float64") / (rh * cw)
    return cells.cpu().numpy(), share, zoom


def lane_png(m: LaneMap) -> bytes:
    """The PNG of ``m``: an overview of all [T, K] lanes (downsampled when large, with
    every differing cell ringed when there are few, so a single lane is visible at any
    T and K), each row's valid counts beside it, and, when the verdict names a lane or
    a compacted row, a lane-by-lane zoom around it. PlotsUnavailable without matplotlib."""
    import numpy as np

    plt = pyplot()
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    t, k = m.shape
    rh, cw = cell_size(t, k)
    cells = np.asarray(m.cells)
    rows, cols = cells.shape
    rgb = _rgb(EMPTY) + np.asarray(m.valid_share)[..., None] * (_rgb(VALID) - _rgb(EMPTY))
    for code, colour in ((2, ONLY_A), (3, ONLY_B), (4, BOTH)):
        rgb[cells == code] = _rgb(colour)

    first_row, first_col, first_lane_named = first_marks(m.shape, m.first, m.compacted, np.asarray(m.counts["oracle"]))
    zoom = first_row is not None and first_col is not None

    over_h = min(6.0, max(1.1, 0.022 * rows + 0.9))
    zoom_h = 2.3 if zoom else 0.0
    # Fixed margins in inches (title, axis labels, legend), not bbox_inches="tight":
    # that draws the figure twice, and a sweep may write many reports.
    top, bottom, gap = 0.45, 1.05, 0.75 if zoom else 0.0
    height = top + over_h + gap + zoom_h + bottom
    fig = plt.figure(figsize=(11.0, height), dpi=100)
    grid = fig.add_gridspec(2 if zoom else 1, 2, height_ratios=[over_h, zoom_h] if zoom else [1],
                            width_ratios=[10, 1.4], hspace=gap / ((over_h + zoom_h) / (2 if zoom else 1)),
                            wspace=0.04, left=0.085, right=0.985, top=1 - top / height, bottom=bottom / height)
    ax = fig.add_subplot(grid[0, 0])
    ax.imshow(rgb, aspect="auto", interpolation="nearest", extent=(0, cols * cw, rows * rh, 0))
    ax.set_xlim(0, k)
    ax.set_ylim(t, 0)
    ax.set_xlabel(f"column (K={k})" + (f", one cell = {cw} columns" if cw > 1 else ""), fontsize=9)
    ax.set_ylabel(f"row (T={t})" + (f"\none cell = {rh} rows" if rh > 1 else ""), fontsize=9)
    ax.tick_params(labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if t <= 8:
        ax.set_yticks([r + 0.5 for r in range(t)], [str(r) for r in range(t)])
    tiles = k // m.block_n if m.block_n else 0
    if 1 < tiles <= 64:
        ax.vlines(range(m.block_n, k, m.block_n), 0, t, color="#9a9a9a", linewidth=0.5)
    styles = {"oracle": ("black", "-"), m.label_a: (ONLY_A, "--"), m.label_b: (ONLY_B, ":")}
    ys = np.arange(t + 1)
    oracle_counts = np.asarray(m.counts["oracle"])
    if m.compacted:
        # The oracle's prefix end on every row; A's or B's only where theirs differs.
        _count_line(ax, np.clip(oracle_counts, 0, k), ys)
        for label, counts in m.counts.items():
            if label != "oracle":
                bad = np.nonzero(np.asarray(counts) != oracle_counts)[0]
                ax.scatter(np.clip(np.asarray(counts)[bad], 0, k), bad + 0.5, marker="|", s=160, linewidths=2.5,
                           color=styles.get(label, ("black", "-"))[0], zorder=4)
    marked = np.argwhere(cells >= 2)
    if 0 < len(marked) <= MARKED_CELLS:
        colours = [(ONLY_A, ONLY_B, BOTH)[cells[r, c] - 2] for r, c in marked]
        ax.scatter((marked[:, 1] + 0.5) * cw, (marked[:, 0] + 0.5) * rh, s=120, facecolors="none",
                   edgecolors=colours, linewidths=1.8, zorder=3)
    title = "all lanes"
    if first_row is not None:
        # Marks beside (on the right, clear of the tick labels) and above the plot
        # point at the row and column the verdict names, however thin they are drawn.
        ax.plot([1.012], [first_row + 0.5], marker="<", markersize=10, color="black", clip_on=False,
                transform=ax.get_yaxis_transform(), zorder=4)
        if first_col is not None:
            ax.plot([first_col + 0.5], [1.02], marker="v", markersize=10, color="black", clip_on=False,
                    transform=ax.get_xaxis_transform(), zorder=4)
        where = f"col {first_col}" if first_col is not None and first_lane_named else "its valid count"
        title += f" — {'▼ ' if first_col is not None else ''}◀ the verdict's first mismatch: row {first_row}, {where}"
    ax.set_title(title, fontsize=9, pad=10)

    # Each row's valid counts, beside its lanes: the oracle's, and A's or B's where
    # they returned other counts.
    cx = fig.add_subplot(grid[0, 1], sharey=ax)
    if t == 1:
        cx.plot([0, oracle_counts[0]], [0.5, 0.5], color="black", linewidth=2)
    else:
        _count_line(cx, oracle_counts, ys)
    for label, counts in m.counts.items():
        if label != "oracle":  # a dot on every row whose count is wrong, however many rows
            bad = np.nonzero(np.asarray(counts) != oracle_counts)[0]
            cx.scatter(np.clip(np.asarray(counts)[bad], 0, k), bad + 0.5, s=30, zorder=3, clip_on=False,
                       color=styles.get(label, ("black", "-"))[0])
    cx.set_xlim(0, k)
    cx.set_xticks([0, k], ["0", str(k)])
    cx.set_xlabel("valid count", fontsize=9)
    cx.tick_params(labelsize=8, labelleft=False)
    cx.grid(axis="x", alpha=0.3)
    if first_row is not None and t > 1:
        cx.axhspan(first_row, first_row + 1, color="#f5d000", alpha=0.5, zorder=0)

    handles = [Rectangle((0, 0), 1, 1, facecolor=f, edgecolor="#777") for f in (ONLY_A, ONLY_B, BOTH, VALID)]
    names = [f"only {m.label_a} differs", f"only {m.label_b} differs", "both differ",
             "valid lane (compacted prefix), equal" if m.compacted else "valid lane, equal"]
    for label in m.counts:
        colour = styles.get(label, ("black", "-"))[0]
        if label == "oracle":
            handles.append(plt.Line2D([], [], color=colour))
            names.append("oracle's valid count" + (" (its prefix ends)" if m.compacted else ""))
        else:
            handles.append(plt.Line2D([], [], color=colour, marker="o", linestyle="none"))
            names.append(f"{label}'s valid count, where it differs")
    fig.legend(handles, names, loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=min(len(names), 4),
               fontsize=8, frameon=False)

    if first_row is not None and first_col is not None:
        window = zoom_window(m.shape, m.first, m.compacted, oracle_counts)
        if window is None or m.zoom is None:
            raise ValueError("a LaneMap whose verdict names a lane needs its zoom (lane_cells with zoom_window)")
        _zoom(fig.add_subplot(grid[1, :]), m.zoom, m, window, styles)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _zoom(zx, codes, m: LaneMap, window: ZoomWindow, styles) -> None:
    """Lane by lane, ``window``'s rows and columns (``codes``), its lane boxed."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    r0, c0, lane_named = window.row, window.col, window.lane_named
    rlo, rhi, clo, chi = window.rlo, window.rhi, window.clo, window.chi
    cmap = ListedColormap([EMPTY, VALID, ONLY_A, ONLY_B, BOTH])
    zx.imshow(codes, cmap=cmap, vmin=0, vmax=4, aspect="auto", interpolation="nearest",
              extent=(clo, chi, rhi, rlo))
    around = "the first mismatch" if lane_named else f"where row {r0}'s valid count ends"
    zx.set_title(f"lane by lane around {around} (rows {rlo}-{rhi - 1}, columns {clo}-{chi - 1})", fontsize=9)
    zx.set_xticks([x + 0.5 for x in range(clo, chi, max(1, (chi - clo) // 12))],
                  [str(x) for x in range(clo, chi, max(1, (chi - clo) // 12))])
    zx.set_yticks([r + 0.5 for r in range(rlo, rhi)], [str(r) for r in range(rlo, rhi)])
    zx.tick_params(labelsize=8)
    zx.vlines(range(clo, chi + 1), rlo, rhi, color="white", linewidth=0.5)
    zx.hlines(range(rlo, rhi + 1), clo, chi, color="white", linewidth=0.5)
    if m.block_n:
        tile_edges = [x for x in range(-(-clo // m.block_n) * m.block_n, chi, m.block_n) if x > clo]
        zx.vlines(tile_edges, rlo, rhi, color="#555", linewidth=1.2)
    if m.compacted:
        oracle_counts = np.asarray(m.counts["oracle"])
        for label, ends in m.counts.items():
            colour, dash = styles.get(label, ("black", "-"))
            ends = np.asarray(ends)
            for r in range(rlo, rhi):
                if clo <= ends[r] <= chi and (label == "oracle" or ends[r] != oracle_counts[r]):
                    zx.plot([ends[r], ends[r]], [r, r + 1], color=colour, linestyle=dash, linewidth=2.5)
    if lane_named:  # a lane, not a row's count
        zx.add_patch(Rectangle((c0, r0), 1, 1, fill=False, edgecolor="black", linewidth=2.2))
    zx.set_xlim(clo, chi)
    zx.set_ylim(rhi, rlo)


def _count_line(axes, counts, ys) -> None:
    """Each row's count: a step line while rows are several pixels tall, a dot per
    row beyond (a step line over thousands of rows is a black smear)."""
    if len(counts) <= MAX_CELL_ROWS:
        import numpy as np

        axes.step(np.append(counts, counts[-1]), ys, where="post", color="black", linewidth=1.2)
    else:
        axes.scatter(counts, ys[:-1] + 0.5, s=0.6, color="black", linewidths=0)


def _rgb(colour: str):
    import numpy as np

    return np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
