"""``pytest --remap-grid``: one pytest item per grid case, judged in batches behind the
items, with pytest's -k, --lf, --junitxml and pytest-xdist (-n 2) working on
them. Each run that judges cases is a real pytest subprocess of this checkout; a session
that stops at a usage error runs in this process (pytester)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# 8 cases; B (conftest's badlane) changes lane (0, 0) when it is valid, which fails 3 of them.
GRID = ["--remap-grid", "--remap-grid-max-tokens=1", "--remap-grid-filter=path=convert", "--remap-grid-filter=k=128",
        "--remap-b=badlane"]
FIRST = "4a4bd9116017"  # the grid's first case: its lane (0, 0) is valid, so it fails


def _closes(r, counts: str) -> bool:
    """Whether pytest's closing line gives these counts (a GPU run adds ", N warnings")."""
    return re.match(re.escape(counts) + r"(, \d+ warnings?)? in ", r.stdout.splitlines()[-1]) is not None


def _pytest(badlane, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # badlane's folder and this checkout first, the caller's PYTHONPATH behind (it may hold the installed packages).
    env = badlane.env()
    # CI and BUILD_NUMBER make pytest print whole failure texts in its short summary too.
    for k in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_CURRENT_TEST", "CI",
              "BUILD_NUMBER"):
        env.pop(k, None)
    argv = [sys.executable, "-m", "pytest", *GRID, f"--remap-grid-reports={tmp_path / 'reports'}", "-q",
            "-p", "no:randomly", *args]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _folders(tmp_path: Path) -> set:
    """The report folders written (not the slot counter's hidden folder)."""
    return {p.name for p in (tmp_path / "reports").iterdir() if not p.name.startswith(".")}


def _cases(xml_path: Path) -> dict:
    root = ET.parse(xml_path).getroot()
    return {str(c.get("name")).split("[")[0]: c for c in root.iter("testcase")}


def test_grid_items_run_under_xdist_in_batches_with_junit(tmp_path, badlane):
    # One run: `-n 2` is xdist's `--tx 2*popen --dist load`, and the plugin reads neither
    # option (only a worker's queue), so `--tx` would take the same path.
    xml_path = tmp_path / "grid.xml"
    r = _pytest(badlane, tmp_path, "-n", "2", f"--junitxml={xml_path}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert _closes(r, "3 failed, 5 passed"), r.stdout
    cases = _cases(xml_path)
    assert len(cases) == 8
    failing = {k for k, c in cases.items() if c.find("failure") is not None}
    assert len(failing) == 3 and FIRST in failing
    assert _folders(tmp_path) == failing  # a report for each (3 of one failure class: the default cap), no other
    for case_id in failing:
        message = cases[case_id].find("failure").get("message")
        lines = message.splitlines()
        assert lines[0].startswith("FAIL [out] badlane: output differs from the oracle at row 0, col 0 (")
        assert lines[0].endswith("); 1 lane in 1 row differs")
        assert lines[1] == f"report: {tmp_path / 'reports' / case_id / 'diff.md'}"
        assert lines[2].startswith("replay: PYTHONPATH=") and lines[2].endswith(
            f"remap-ab replay {(tmp_path / 'reports' / case_id).resolve()}")
        assert lines[3].startswith(f"run it alone: pytest --remap-grid --remap-a=old --remap-b=badlane -k {case_id}")
    # Batches, not one case each: the 8 cases were judged in fewer batches than cases,
    # and by both workers' processes.
    batches = {c.find("properties/property[@name='remap_ab_batch']").get("value") for c in cases.values()}
    processes = {b.split(":")[0] for b in batches}
    assert len(batches) < 8 and any(not b.endswith("/1") for b in batches), batches
    assert len(processes) == 2, batches


def test_k_case_id_judges_only_that_case(tmp_path, badlane):
    r = _pytest(badlane, tmp_path, "-p", "no:xdist", "-k", FIRST)
    assert r.returncode == 1
    assert _closes(r, "1 failed, 7 deselected"), r.stdout
    assert sorted(_folders(tmp_path)) == [FIRST]


def test_report_folders_are_capped_per_failure_class_and_lf_reruns_the_failed_cases_only(tmp_path, badlane):
    # One session serves both: its cap (an earlier session's slots all taken: this session
    # counts its own), then --lf from its cache. This project's pytest settings turn the
    # cache off (addopts); --lf needs it back.
    cache = ["-o", "addopts=", "-o", f"cache_dir={tmp_path / 'cache'}", "-p", "no:xdist"]
    slots = tmp_path / "reports" / ".report-slots"
    slots.mkdir(parents=True)
    for taken in ("out.convert.0", "out.convert-counts.0"):
        (slots / taken).write_text("an earlier session's case\n")
    r = _pytest(badlane, tmp_path, *cache, "--remap-grid-report-cases=1")
    assert _closes(r, "3 failed, 5 passed"), r.stdout
    assert _folders(tmp_path) == {FIRST}
    told = [ln for ln in r.stdout.splitlines() if ln.startswith("no report folder: ")]
    assert told == ["no report folder: the first 1 failing cases of each failure class (check × path) got one; "
                    "the command below writes this case's"] * 2, r.stdout
    assert r.stdout.count("--reports all)") == 3, r.stdout
    again = _pytest(badlane, tmp_path, *cache, "--lf")
    assert _closes(again, "3 failed, 5 deselected"), again.stdout


def _usage_error(pytester, badlane, *args: str):
    """A pytest session of the grid that stops at a usage error, run in this process:
    it stops before any case runs (and before pytest starts a worker), so a process of
    its own would only add the seconds of importing torch and Triton again. (``badlane``
    puts GRID's B on sys.path: the plugin resolves it before it reads the grid options.)"""
    return pytester.runpytest_inprocess("-p", "remap_ab.pytest.plugin", "-p", "no:xdist", "-p", "no:cacheprovider",
                                        *GRID, f"--remap-grid-reports={pytester.path / 'reports'}", *args)


def test_a_report_cap_that_is_no_count_is_a_usage_error(pytester, badlane):
    bad = _usage_error(pytester, badlane, "--remap-grid-report-cases=some")
    assert bad.ret == 4
    assert "--remap-grid-report-cases: 'some' is neither a count (0 or more) nor 'all'" in bad.stderr.str()


def test_a_filter_that_selects_nothing_is_a_usage_error(pytester, badlane):
    r = _usage_error(pytester, badlane, "--remap-grid-filter=case=abcdef123456")
    assert r.ret == 4
    assert ("ERROR: --remap-grid: --filter 'case=abcdef123456': no case of the grid has ID abcdef123456; "
            "`remap-ab sweep --list` lists the grid's cases") in r.stderr.str()
