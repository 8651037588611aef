"""What each shipped grid covers of the call envelope, as every summary says it of the
grids a run did not run: read from grids/envelopes.json (expanding a grid costs seconds),
which must say what expanding it says."""

import json
from importlib import resources

from remap_ab.subjects.remap.grid import grid

REFRESH = "python -c 'from remap_ab.subjects.remap.grid.grid import write_envelopes; write_envelopes()'"


def test_the_stored_envelopes_are_what_the_grids_expand_to():
    stored = json.loads(resources.files("remap_ab.subjects.remap.grid").joinpath(
        grid.GRIDS_FOLDER, grid.ENVELOPES_FILE).read_text(encoding="utf-8"))
    assert stored == grid.envelopes_record(), f"grids/envelopes.json is stale: refresh it with {REFRESH}"


def test_a_grid_changed_since_is_described_from_its_cases(monkeypatch):
    # The stored text is used only for the very file it was written for.
    grid.shipped_envelope.cache_clear()
    real = grid._stored_envelopes()
    try:
        monkeypatch.setattr(grid, "_stored_envelopes", lambda: {n: {**e, "envelope": "stored"} for n, e in real.items()})
        assert grid.shipped_envelope("callers") == "stored"
        grid.shipped_envelope.cache_clear()
        monkeypatch.setattr(grid, "_stored_envelopes",
                            lambda: {n: {"sha256": "0" * 64, "envelope": "stored"} for n in real})
        assert grid.shipped_envelope("callers") == grid.described_envelope("callers") != "stored"
    finally:
        grid.shipped_envelope.cache_clear()
