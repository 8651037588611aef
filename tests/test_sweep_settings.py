"""The sweep's settings: validated once into one frozen object (sweep/run.py's
``SweepOptions``), kept in run.json and read back by a resume, handed whole to the
workers (``pool.Job.settings``). tests/data/run_before_settings/ is a run folder written
by the code before that object (one of its two cases done): it still resumes."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.processes import pool
from remap_ab.report_cap import ALL
from remap_ab.subject import JudgeSettings
from remap_ab.sweep.run import GPU_BATCH, Sweep, SweepOptions

BEFORE = Path(__file__).parent / "data" / "run_before_settings"
DEVICE = runtime.default_device()  # a resume runs in this process, on the device it runs kernels on
BATCH = GPU_BATCH if DEVICE == "cuda" else 1  # a run.json from before keeps no batch: the device's default


def old_run(tmp_path: Path, drop: tuple = ()) -> Path:
    folder = tmp_path / "two"
    shutil.copytree(BEFORE, folder)
    meta = json.loads((folder / "run.json").read_text())
    meta["device"] = DEVICE
    for key in drop:  # a run.json from before these keys were written
        meta.pop(key)
    (folder / "run.json").write_text(json.dumps(meta, indent=2))
    return folder


def test_a_run_json_from_before_resumes_with_its_own_settings(tmp_path, capsys):
    folder = old_run(tmp_path)
    before = json.loads((folder / "run.json").read_text())
    assert cli_main(["sweep", "--resume", "--run", "two", "--root", str(tmp_path), "-j", "0", "--no-progress"]) == 0
    assert "1 case already done, 1 to run" in capsys.readouterr().err
    table = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    assert table["case_id"].tolist() == before["case_ids"] and set(table["status"]) == {"pass"}
    after = json.loads((folder / "run.json").read_text())
    kept = ("subject", "a", "b", "device", "filters", "max_tokens", "grid_file", "memcheck", "call_checks", "reports",
            "selection", "case_ids", "grid_version")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert after["last_session"]["workers"] == 0 and after["last_session"]["batch"] == BATCH


def test_a_resume_reads_the_settings_back_without_changing_what_was_asked(tmp_path):
    old_run(tmp_path, drop=("reports", "subject", "memcheck"))
    asked = SweepOptions(resume=True, run="two", root=str(tmp_path), workers=0, progress=False)
    sweep = Sweep(asked)
    sweep.prepare()
    sweep.lock.release()
    assert asked == SweepOptions(resume=True, run="two", root=str(tmp_path), workers=0, progress=False)
    s = sweep.opts
    # A run from before report folders were capped wrote one for every failing case.
    assert (s.subject, s.a, s.b, s.device, s.reports, s.memcheck) == ("remap", "old", "new", DEVICE, ALL, False)
    assert s.filters == ("path=convert", "k=128", "invalid=0") and s.max_size == 1 and s.call_checks == "sample"
    assert (s.workers, s.batch, s.case_timeout) == (0, BATCH, 900.0)
    assert sweep.settings == JudgeSettings("old", "new", DEVICE, str(sweep.folder), False, "sample", ALL)


def test_the_settings_are_frozen_and_validated_when_made():
    s = SweepOptions(filters=["k=128"], reports=2)
    assert s.filters == ("k=128",)
    with pytest.raises(ValidationError):
        s.workers = 3
    for bad in ({"workers": "2"}, {"reports": -1}, {"reports": "some"}, {"device": "tpu"}, {"max_size": 0},
                {"call_checks": "never"}, {"memcheck": 1}, {"colour": "red"}):
        with pytest.raises(ValidationError):
            SweepOptions(**bad)
    # A change is a new object, validated again.
    assert s.replaced(workers=3).workers == 3 and s.workers is None
    with pytest.raises(ValidationError):
        s.replaced(workers=-1.5)


def test_the_workers_receive_the_judge_settings_whole(tmp_path, monkeypatch):
    seen = []

    class Recording(pool.Pool):
        def __init__(self, job, *args, **kw):
            seen.append(job)
            super().__init__(job, *args, **kw)

    monkeypatch.setattr("remap_ab.sweep.run.Pool", Recording)
    old_run(tmp_path)
    sweep = Sweep(SweepOptions(resume=True, run="two", root=str(tmp_path), workers=1, progress=False))
    sweep.prepare()
    summary = sweep.run()
    assert summary["passed"] and len(seen) == 1
    job = seen[0]
    assert job.settings is sweep.settings and job.subject == "remap"
    assert [f.name for f in dataclasses.fields(pool.Job)] == ["settings", "subject", "threads", "judge"]


@pytest.mark.parametrize("key, value, words", [
    ("subject", 5, "field 'subject' is int 5, expected a string"),
    ("reports", -1, "field 'reports' is int -1, expected a count of report folders (0 or more) or \"all\""),
    ("reports", "some", "field 'reports' is str 'some', expected a count"),
    ("filters", "k=128", "field 'filters' is str 'k=128', expected a list"),
])
def test_a_damaged_setting_in_run_json_is_one_line_and_nothing_is_written(tmp_path, capsys, key, value, words):
    folder = old_run(tmp_path)
    meta = json.loads((folder / "run.json").read_text())
    meta[key] = value
    (folder / "run.json").write_text(json.dumps(meta))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert cli_main(["sweep", "--resume", "--run", "two", "--root", str(tmp_path), "-j", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "run.json" in err, err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
