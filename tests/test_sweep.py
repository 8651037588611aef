"""The sweep end to end on tiny subsets: a broken implementation is caught, reported
and replayed; a killed run resumes with every case exactly once; a crashing
implementation becomes a "crash" verdict; bad reports are one-line errors."""

import json
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from remap_ab.cli import main as cli_main
from remap_ab.subjects.remap.report.report import load_report

# The filters keep a rejection call as they keep a grid point, by its base case (4 token
# rows): SMALL's tokens=1 keeps none.
CALLS = 0

# kernels_new, wrong in one lane of one path: the DCP filter in place (dcp_size > 1, no
# compaction) adds 1 to the first valid lane of row 0 (a broken_impl patch).
BROKEN = """
if in_place:
    valid = (out[0] >= 0).nonzero()
    if len(valid):
        out[0, valid[0, 0]] += 1
"""

CRASHING = '''
"""kernels_new, but the DCP filter in place kills the process (as a SIGSEGV would)."""
import os, signal
import kernels_new
from kernels_new import _remap_tiling, triton_convert_req_index_to_global_index  # noqa: F401


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    if kwargs.get("compact_valid_to_front") is False and args[3] > 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    return kernels_new.triton_filter_and_convert_dcp_index(*args, **kwargs)
'''

SMALL = ["--filter", "tokens=1", "--filter", "k=128", "--filter", "oor=off"]


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory, broken_impl_module):
    """A sweep of old vs a broken implementation over 4 cases (2 fail), in this process."""
    base = tmp_path_factory.mktemp("broken")
    impl = broken_impl_module(patch=BROKEN, name="brokenimpl")
    code = cli_main(
        ["sweep", "--b", impl, *SMALL, "--filter", "invalid=0,0.3", "--filter", "path=convert,dcp-inplace",
         "-j", "0", "--root", str(base / "reports"), "--run", "broken", "--no-progress"]
    )
    return base, code


def test_broken_implementation_fails_the_sweep(broken_run):
    base, code = broken_run
    assert code == 1
    df = pd.read_csv(base / "reports" / "broken" / "results.csv", keep_default_na=False)
    assert len(df) == 4 + CALLS and df["case_id"].is_unique
    assert (df[df.rejection != ""].status == "pass").all()  # the broken lane is no precondition
    df = df[df.rejection == ""]
    assert set(df[df.path == "convert"].status) == {"pass"}
    failed = df[df.status == "fail"]
    assert len(failed) >= 1 and set(failed.path) == {"dcp-inplace"}
    assert all(failed.check == "out") and all(failed.mismatch_lanes == 1)


def test_report_names_the_first_mismatch(broken_run):
    base, _ = broken_run
    df = pd.read_csv(base / "reports" / "broken" / "results.csv", keep_default_na=False)
    row = df[df.status == "fail"].iloc[0]
    folder = base / "reports" / "broken" / row.report
    assert {p.name for p in folder.iterdir()} >= {
        "config.json", "rows.pt.gz", "verdict.json", "diff.md", "diff.html", "replay.sh"
    }
    kept = load_report(folder).kept_rows()  # the rows that differ: here row 0 only
    assert kept["rows"].tolist() == [0]
    ref = kept["roles"]["reference"]["out"]
    col = int((ref[0] >= 0).nonzero()[0, 0])  # the lane the broken module changes
    first = json.loads((folder / "verdict.json").read_text())["verdict"]["failures"][0]
    assert (first["check"], first["impl"], first["row"], first["col"]) == ("out", "brokenimpl", 0, col)
    assert first["values"] == {"old": int(ref[0, col]), "brokenimpl": int(ref[0, col]) + 1, "oracle": int(ref[0, col])}
    assert torch.equal(kept["roles"]["b"]["out"][0, col], ref[0, col] + 1)
    md = (folder / "diff.md").read_text()
    assert f"at row 0, col {col}" in md and f"| 0 | {col} | {int(ref[0, col])} | {int(ref[0, col]) + 1} |" in md
    html = (folder / "diff.html").read_text()
    assert "data:image/png;base64," in html and "<script" not in html
    assert "remap-ab replay" in (folder / "replay.sh").read_text()


def test_replay_reproduces_the_failure(broken_run, capsys):
    base, _ = broken_run
    df = pd.read_csv(base / "reports" / "broken" / "results.csv", keep_default_na=False)
    case = df[df.status == "fail"].iloc[0].case_id
    assert cli_main(["replay", str(base / "reports" / "broken" / case)]) == 1
    out = capsys.readouterr().out
    assert "reproduced: yes" in out and "FAIL" in out
    # By case ID, found under --root.
    assert cli_main(["replay", case, "--root", str(base / "reports")]) == 1
    assert "reproduced: yes" in capsys.readouterr().out
    # The correct implementation passes on the same saved inputs.
    assert cli_main(["replay", str(base / "reports" / "broken" / case), "--b", "new"]) == 0


def test_report_command_summarises_the_run(broken_run, capsys):
    base, _ = broken_run
    assert cli_main(["report", "broken", "--root", str(base / "reports")]) == 1
    out = capsys.readouterr().out
    assert "pass 2" in out or "pass " in out
    assert "failures by dimension" in out and "dcp-inplace" in out
    assert cli_main(["report", "--root", str(base / "reports"), "--json"]) == 1
    s = json.loads(capsys.readouterr().out)
    assert s["cases"] == 4 + CALLS and s["counts"]["fail"] >= 1 and not s["passed"]
    # The run's disk use: every byte under its folder, and the report folders' share.
    run = base / "reports" / "broken"
    files = [p for p in run.rglob("*") if p.is_file()]
    in_reports = [p for p in files if p.parent != run and not p.relative_to(run).parts[0].startswith(".")]
    assert s["disk"] == {"bytes": sum(p.stat().st_size for p in files),
                         "report_bytes": sum(p.stat().st_size for p in in_reports)}
    assert 0 < s["disk"]["report_bytes"] < s["disk"]["bytes"]
    assert "  disk: " in out and "of it in report folders" in out


def _one_line_error(code, capsys):
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "error:" in err
    return err


def test_missing_and_corrupt_reports_are_one_line_errors(broken_run, tmp_path, capsys):
    base, _ = broken_run
    _one_line_error(cli_main(["replay", str(tmp_path / "nowhere")]), capsys)
    _one_line_error(cli_main(["replay", "0123456789ab", "--root", str(tmp_path)]), capsys)
    _one_line_error(cli_main(["report", "nope", "--root", str(base / "reports")]), capsys)
    _one_line_error(cli_main(["report", "--root", str(tmp_path)]), capsys)

    df = pd.read_csv(base / "reports" / "broken" / "results.csv", keep_default_na=False)
    src = base / "reports" / "broken" / df[df.status == "fail"].iloc[0].report
    import shutil

    for name, damage in [
        ("rows.pt.gz", lambda p: p.write_bytes(p.read_bytes()[:100])),
        ("config.json", lambda p: p.write_text("{not json")),
        ("verdict.json", lambda p: p.unlink()),
    ]:
        copy = tmp_path / f"bad-{name}"
        shutil.copytree(src, copy)
        damage(copy / name)
        err = _one_line_error(cli_main(["replay", str(copy)]), capsys)
        assert name in err
    # Inputs that regenerate other than recorded: the recorded sha256 catches them.
    copy = tmp_path / "edited"
    shutil.copytree(src, copy)
    meta = json.loads((copy / "verdict.json").read_text())
    meta["inputs_sha256"]["token_indices"] = "0" * 64
    (copy / "verdict.json").write_text(json.dumps(meta))
    assert "sha256" in _one_line_error(cli_main(["replay", str(copy)]), capsys)

    run = tmp_path / "runcopy"
    shutil.copytree(base / "reports" / "broken", run)
    (run / "results.csv").write_text("garbage\n\x00\x01\n")
    _one_line_error(cli_main(["report", str(run)]), capsys)


SLOW_AFTER_FIRST = '''
"""kernels_new, but while REMAP_AB_TEST_SLOW is set every case after the first one in
this process takes 30 s more: a sweep that can be killed after exactly one row,
however fast the machine (a GPU finishes four real cases before any poll)."""
import os, time
import kernels_new
from kernels_new import _remap_tiling, triton_filter_and_convert_dcp_index as _dcp  # noqa: F401
from kernels_new import triton_convert_req_index_to_global_index  # noqa: F401

_calls = [0]


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    _calls[0] += 1
    if os.environ.get("REMAP_AB_TEST_SLOW") and _calls[0] > 1:
        time.sleep(30)
    return _dcp(*args, **kwargs)
'''


def test_killed_sweep_resumes_each_case_exactly_once(tmp_path, broken_impl, capsys, monkeypatch):
    broken_impl(SLOW_AFTER_FIRST, name="slowimpl")
    args = ["sweep", "--b", "slowimpl", "--filter", "tokens=1", "--filter", "k=128", "--filter", "path=dcp-compact",
            "--filter", "invalid=0,0.3", "-j", "0", "--batch", "1", "--root", "reports", "--run", "r", "--no-progress"]
    # --batch 1: on a GPU the default batch (64) would hold all four cases, and their
    # rows would be written together after the sleeps.
    env = dict(broken_impl.env(), REMAP_AB_TEST_SLOW="1")
    proc = subprocess.Popen([sys.executable, "-m", "remap_ab", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    csv_path = tmp_path / "reports" / "r" / "results.csv"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            if csv_path.exists() and len(csv_path.read_text().splitlines()) >= 2:  # header + 1 case
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be killed"
    finally:
        proc.kill()  # SIGKILL: no goodbye, as a crash or an OOM kill would leave it
        proc.wait()
    before = pd.read_csv(csv_path)
    assert len(before) == 1  # the second case sleeps 30 s: nothing else was written
    # Make the cut worse than a kill between rows: half a row at the end.
    with open(csv_path, "a") as fh:
        fh.write(before.iloc[0].case_id[:5])
    # The resume in this process (the killed one is the process under test), at full speed.
    monkeypatch.chdir(tmp_path)
    status = cli_main(["sweep", "--resume", "--run", "r", "--root", "reports", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "resuming" in err and f"1 case already done, {3 + CALLS} to run" in err
    after = pd.read_csv(csv_path)
    assert len(after) == 4 + CALLS and after["case_id"].is_unique
    assert set(before.case_id) <= set(after.case_id)


def test_truncated_results_resume_without_repeats(tmp_path, capsys):
    args = ["sweep", *SMALL, "--filter", "invalid=0.3", "--filter", "path=convert,dcp-compact",
            "-j", "0", "--root", str(tmp_path), "--run", "t", "--no-progress"]
    assert cli_main(args) == 0
    csv_path = tmp_path / "t" / "results.csv"
    full = pd.read_csv(csv_path)
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines[:2]) + lines[2][:20])  # one row, then half a row
    assert cli_main(["sweep", "--resume", "--run", "t", "--root", str(tmp_path), "--no-progress"]) == 0
    assert f"1 case already done, {1 + CALLS} to run" in capsys.readouterr().err
    after = pd.read_csv(csv_path)
    assert sorted(after.case_id) == sorted(full.case_id) and after.case_id.is_unique
    assert list(after.inputs_sha256.sort_values()) == list(full.inputs_sha256.sort_values())


def test_crashing_implementation_becomes_a_crash_verdict(tmp_path, broken_impl, capsys, monkeypatch):
    impl = broken_impl(CRASHING)
    # The sweep in this process: what crashes is its worker, a process of its own (given
    # the implementation's folder on PYTHONPATH as well as on sys.path).
    monkeypatch.setenv("PYTHONPATH", broken_impl.env()["PYTHONPATH"])
    monkeypatch.chdir(tmp_path)
    status = cli_main(["sweep", "--b", impl, *SMALL, "--filter", "invalid=0", "--filter", "path=convert,dcp-inplace",
                       "-j", "1", "--root", "reports", "--run", "c", "--no-progress"])
    out, err = capsys.readouterr()
    assert status == 1, err
    df = pd.read_csv(tmp_path / "reports" / "c" / "results.csv", keep_default_na=False)
    df = df[df.rejection == ""]  # the rejection calls pass: the crash is in a valid case
    assert dict(zip(df.path, df.status)) == {"convert": "pass", "dcp-inplace": "crash"}
    crash = df[df.status == "crash"].iloc[0]
    assert "SIGSEGV" in crash.first_mismatch
    meta = json.loads((tmp_path / "reports" / "c" / crash.case_id / "verdict.json").read_text())
    assert meta["status"] == "crash"
    assert "crash 1" in out
