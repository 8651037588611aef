"""The machinery runs a subject it knows nothing of: the sweep, the worker pool, the run
folder, the summary, the report cap and ``remap-ab report`` take a subject of the suite's
own (tests/sums_subject.py: no kernel, no tensor, declared on remap_ab.declare) through
the same paths as the remap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import sums_subject as sums

from remap_ab import runtime, subjects
from remap_ab.errors import ConfigError, InternalError, UsageError
from remap_ab.subject import Subject
from remap_ab.sweep.run import Sweep, SweepOptions
from remap_ab.sweep.summary import format_summary

REPO = Path(__file__).resolve().parents[1]
SUMS = "sums_subject:SUBJECT"


def sweep(tmp_path: Path, workers: int, **kw) -> tuple[Sweep, dict]:
    # The sums subject runs no kernel; the device is whatever this process already uses.
    s = Sweep(SweepOptions(subject=SUMS, device=runtime.default_device(), root=str(tmp_path), workers=workers,
                           progress=False, **kw))
    s.prepare()
    return s, s.run()


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "workers"])
def test_a_subject_without_a_kernel_runs_through_the_sweep(tmp_path, workers):
    s, summary = sweep(tmp_path, workers)
    assert summary["passed"] and summary["cases"] == len(sums.SUBJECT.grid.cases()) == summary["selected"] == 12
    table = pd.read_csv(s.folder / "results.csv", dtype=str, keep_default_na=False)
    assert list(table.columns) == ["index", "case_id", "n", "step", *sums.SUBJECT.columns, "worker", "gpu"]
    # Workers append rows as their cases finish, so the file's order is not the grid's.
    table = table.sort_values("index", key=lambda c: c.astype(int))
    assert (table["oracle_value"] == table["b_value"]).all() and table.loc[table["n"] == "1000", "b_value"].tolist() \
        == ["499500", "249500"]
    meta = json.loads((s.folder / "run.json").read_text())
    assert meta["subject"] == SUMS and meta["a"] == "loop" and meta["b"] == "formula"
    text = format_summary(summary)
    assert "PASS — every case passed: 12/12 on the sums grid" in text and "largest n where B is wrong: None" in text


def test_a_failing_case_is_reported_counted_by_dimension_and_resumed(tmp_path, monkeypatch):
    monkeypatch.setenv(sums.B_WRONG_FROM, "100")
    s, summary = sweep(tmp_path, 2)
    assert not summary["passed"] and summary["counts"]["fail"] == 4
    assert summary["failures_by_check"]["b-vs-oracle"]["cases"] == 4
    assert summary["failures_by_dimension"]["n"]["100"] == [2, 2] and summary["failures_by_dimension"]["n"]["7"] == [0, 2]
    text = format_summary(summary)
    first = summary["failures"][0]
    assert f"report: {s.folder / first['report'] / 'report.md'}" in text
    report = (s.folder / first["report"] / "report.md").read_text()
    assert f"case {first['report']} — FAIL [b-vs-oracle]" in report and "remap-ab replay --subject sums_subject:SUBJECT" in report
    # One failure class (b-vs-oracle), so --reports' default 3 folders for the 4 failing cases.
    assert summary["report_folders"] == 3 and len([p for p in s.folder.iterdir() if (p / "report.md").is_file()]) == 3
    assert "largest n where B is wrong: 1000" in text and "FAIL — not every case passed" in text

    # A resume of a finished run runs nothing and says the same; `remap-ab report` reads it back.
    again = Sweep(SweepOptions(resume=True, run=s.folder.name, root=str(tmp_path), progress=False))
    again.prepare()
    assert again.subject.name == SUMS and again.todo == []
    paths = [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    r = subprocess.run([sys.executable, "-m", "remap_ab", "report", str(s.folder)], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 1 and "largest n where B is wrong: 1000" in r.stdout, r.stderr


def test_the_subjects_filters_and_cap_reach_the_run(tmp_path):
    s, summary = sweep(tmp_path, 0, filters=["step=2"], max_size=7)
    assert summary["cases"] == 4 and summary["grid_total"] == 12
    assert summary["cap_note"] == "2 of 6 selected cases (n 100, 1000) not run: n > 7, the size cap"


def test_reports_caps_the_folders_and_a_bad_filter_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(sums.B_WRONG_FROM, "0")
    s, summary = sweep(tmp_path, 0, reports=1)
    assert summary["failing_cases"] == 12 and summary["report_folders"] == 1
    with pytest.raises(ConfigError, match="the sums grid has no axis 'm'; choose one of n, step or case"):
        sweep(tmp_path, 0, filters=["m=1"])


def test_an_unknown_subject_is_one_line():
    with pytest.raises(UsageError, match="no such subject; choose one of remap, slotmap, topology"):
        subjects.get("nope")
    with pytest.raises(UsageError, match="cannot load it"):
        subjects.get("sums_subject_nope:SUBJECT")


def test_every_shipped_subject_declares_what_the_machinery_asks():
    asked = [n for n in dir(Subject) if not n.startswith("_")] + list(Subject.__annotations__)
    for name in subjects.names():
        subject = subjects.get(name)
        missing = [n for n in asked if not hasattr(subject, n)]
        assert not missing, f"{name} lacks {missing}"
        assert {"status", "check", "first_mismatch", "report"} <= set(subject.columns)


def test_a_row_field_without_a_column_stops_the_run_instead_of_vanishing(tmp_path, monkeypatch):
    judge = sums.SUBJECT.judge

    def misspelt(configs, settings, times):
        return [{**row, "oracle_valeu": row["oracle_value"]} for row in judge(configs, settings, times)]

    monkeypatch.setattr(sums.SUBJECT, "judge", misspelt)
    s = Sweep(SweepOptions(subject=SUMS, device=runtime.default_device(), root=str(tmp_path), workers=0, progress=False))
    s.prepare()
    with pytest.raises(InternalError, match="oracle_valeu"):
        s.run()


def test_a_batch_that_raises_is_judged_case_by_case_and_only_the_raising_case_crashes(tmp_path, monkeypatch):
    judge = sums.SUBJECT.judge

    def raises_at_seven(configs, settings, times):
        if any(c["n"] == 7 for c in configs):
            raise RuntimeError("seven")
        return judge(configs, settings, times)

    monkeypatch.setattr(sums.SUBJECT, "judge", raises_at_seven)
    s, summary = sweep(tmp_path, 0, batch=4)
    table = pd.read_csv(s.folder / "results.csv", dtype=str, keep_default_na=False)
    crashed = table[table["status"] == "crash"]
    assert len(table) == 12 and set(crashed["n"]) == {"7"} and len(crashed) == 2
    assert (table[table["n"] != "7"]["status"] == "pass").all() and "RuntimeError: seven" in crashed["first_mismatch"].iloc[0]


def test_memcheck_is_refused_for_a_subject_without_one_instead_of_claimed(tmp_path):
    with pytest.raises(UsageError, match="--memcheck: sums_subject:SUBJECT has no memory check"):
        sweep(tmp_path, 0, memcheck=True)
    assert not any(tmp_path.iterdir())  # refused before anything is written
    assert subjects.get("remap").memcheck and not subjects.get("topology").memcheck
