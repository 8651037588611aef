"""The lane picture is drawn from cells reduced with torch (lane_picture.lane_cells) and the
report's per-row counts from packed words (report._per_row): both must be what the
plain per-lane computation gives, at shapes that divide into cells and at ones that do
not."""

import numpy as np
import pytest
import torch

from remap_ab.subjects.remap.report import lane_picture
from remap_ab.subjects.remap.report.report import _per_row


def _plain_cells(da, db, valid):
    """The picture's cells lane by lane, in numpy: each lane's code (0 empty, 1 valid,
    2 only A differs, 3 only B, 4 both), the largest per cell; the valid share per cell."""
    t, k = valid.shape
    codes = np.where(valid, 1, 0)
    codes = np.where(da & ~db, 2, codes)
    codes = np.where(db & ~da, 3, codes)
    codes = np.where(da & db, 4, codes)
    rh, cw = lane_picture.cell_size(t, k)
    rows, cols = -(-t // rh), -(-k // cw)
    padded = np.zeros((rows * rh, cols * cw), np.int8)
    padded[:t, :k] = codes
    shares = np.zeros((rows * rh, cols * cw))
    shares[:t, :k] = valid
    return (padded.reshape(rows, rh, cols, cw).max(axis=(1, 3)),
            shares.reshape(rows, rh, cols, cw).mean(axis=(1, 3)), codes)


@pytest.mark.parametrize("shape", [(3, 128), (300, 640), (1030, 2048), (513, 1100)])
@pytest.mark.parametrize("sides", ["a", "b", "ab"])
def test_lane_cells_are_the_plain_reduction(shape, sides):
    gen = torch.Generator().manual_seed(sum(shape))
    t, k = shape
    valid = torch.rand(shape, generator=gen) < 0.6
    # Sparse differences, so that cells with none, one side's and both sides' occur.
    da = (torch.rand(shape, generator=gen) < 0.002) if "a" in sides else None
    db = (torch.rand(shape, generator=gen) < 0.002) if "b" in sides else None
    for differs, lane in ((da, (t - 1, k - 1)), (db, (0, 1))):  # at least one each, in a padded cell too
        if differs is not None:
            differs[lane] = True
    zero = np.zeros(shape, bool)
    want_cells, want_share, codes = _plain_cells(zero if da is None else da.numpy(), zero if db is None else db.numpy(),
                                                 valid.numpy())
    window = lane_picture.zoom_window(shape, (t // 2, k - 3), False, np.zeros(t, np.int64))
    cells, share, zoom = lane_picture.lane_cells(da, db, valid, window)
    assert np.array_equal(cells, want_cells) and (cells >= 2).any()
    assert np.array_equal(share, want_share)  # bit for bit: the same pixels
    assert window is not None and zoom is not None
    assert np.array_equal(zoom, codes[window.rlo:window.rhi, window.clo:window.chi])


@pytest.mark.parametrize("k", [8, 1016, 1024, 2048, 2040 * 8, 12])
def test_per_row_counts_every_set_lane(k):
    gen = torch.Generator().manual_seed(k)
    for p in (0.0, 0.3, 1.0):  # all lanes set: each packed byte at its largest count
        differs = torch.rand((5, k), generator=gen) < p
        assert torch.equal(_per_row(differs), differs.sum(dim=1))
    strided = (torch.rand((4, 2 * k), generator=gen) < 0.5)[:, ::2]
    assert torch.equal(_per_row(strided), strided.sum(dim=1))
