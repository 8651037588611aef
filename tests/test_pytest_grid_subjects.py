"""``pytest --remap-grid`` for any subject, through the Subject protocol alone: the suite's
kernel-free ``tests/sums_subject.py`` (no ``pytest_*`` functions of its own), a copy, run as
grid items in this process; and the remap grid's points, kept per file text in a process,
are the same cases under every spelling of the grid's name."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.grid import grid as gridmod

SUMS = Path(__file__).with_name("sums_subject.py")


def _sums(pytester, *args: str):
    # A copy in the session's folder: the items' file is the subject's module (it has no grid file).
    if not (pytester.path / "sums_copy.py").exists():
        pytester.makepyfile(sums_copy=SUMS.read_text())
        pytester.syspathinsert()
    return pytester.runpytest_inprocess("-p", "remap_ab.pytest.plugin", "-p", "no:xdist", "-p", "no:cacheprovider",
                                        "--remap-grid", "--remap-subject=sums_copy:SUBJECT",
                                        f"--remap-grid-reports={pytester.path / 'reports'}",
                                        f"--junitxml={pytester.path / 'sums.xml'}", *args)


def test_a_subject_of_ones_own_runs_as_grid_items(pytester, monkeypatch):
    ok = _sums(pytester)
    ok.assert_outcomes(passed=12)
    assert "remap-ab grid: sums: A is a loop, B is the formula" in ok.stdout.str()  # the selection's header
    monkeypatch.setenv("SUMS_B_WRONG_FROM", "1000")  # B one too high at n = 1000 (both steps)
    bad = _sums(pytester, "-v", "--remap-grid-filter=n=7,1000")
    bad.assert_outcomes(passed=2, failed=2)
    root = ET.parse(pytester.path / "sums.xml").getroot()
    messages = {c.get("name"): c.find("failure").get("message") for c in root.iter("testcase") if c.find("failure") is not None}
    assert len(messages) == 2
    for name, message in messages.items():
        lines = message.splitlines()
        assert "n=1000" in name
        assert lines[0].startswith("FAIL [b-vs-oracle] B's output out differs from the oracle's: A ")
        assert lines[1].endswith("report.md") and lines[2].startswith("replay: PYTHONPATH=")
        assert "remap-ab replay --subject sums_copy:SUBJECT" in lines[2]
        cid = name.split("[")[0]
        assert lines[3].startswith(f"run it alone: pytest --remap-grid --remap-subject=sums_copy:SUBJECT "
                                   f"--remap-a=loop --remap-b=formula -k {cid}")


def test_the_points_are_kept_per_file_text_and_the_envelope(monkeypatch):
    gridmod.load.cache_clear()
    first = gridmod.load(None).points()
    again = gridmod.load(str(gridmod.shipped()["pr"])).points()  # another spelling, the same text
    assert again is first
    # Another envelope (a new object, as a test's monkeypatch makes one): expanded again, the same cases.
    other = dataclasses.replace(envelope.load())
    monkeypatch.setattr(envelope, "load", lambda path=None: other)
    gridmod.load.cache_clear()
    rebuilt = gridmod.load("pr").points()
    assert rebuilt is not first
    assert [(p.index, p.case_id, p.labels) for p in rebuilt] == [(p.index, p.case_id, p.labels) for p in first]
    gridmod.load.cache_clear()


def test_a_shipped_grid_by_name_and_the_remaps_header(pytester):
    # --remap-grid=pr names the shipped grid (not a file ./pr); the header says what a PASS
    # covers and names the grids left out.
    r = pytester.runpytest_inprocess("-p", "remap_ab.pytest.plugin", "-p", "no:xdist", "-p", "no:cacheprovider",
                                     "--remap-grid=pr", "--remap-grid-filter=path=convert", "--remap-grid-filter=k=128",
                                     "--remap-grid-max-tokens=1", "--collect-only")
    assert r.ret == 0
    out = r.stdout.str()
    assert "remap-ab grid: 8 remap cases of pr, judged in batches" in out
    assert "remap-ab grid: capped: --max-tokens: tokens <= 1; 40 of 48 selected configurations" in out
    assert ("remap-ab grid: a PASS covers the pr grid (rows 1, dense caches, no caller buffers); "
            "not run: --grid callers, --grid models;") in out
    assert out.count("<GridCase ") == 8 and "<GridCases grid.toml>" in out
