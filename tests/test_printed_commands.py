"""Every command a sweep prints runs as printed: each line of a failing, an interrupted
and a timed-out sweep is run in a fresh shell (``bash -c LINE``, an environment holding
only PATH and HOME, another working folder) and does what its line says, with the exit
status the README gives it. The sweeps find B (or the subject) through a relative
PYTHONPATH and write under a relative --root, so a line that dropped either would fail
here: the resume line once did (issue 60)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SELECT = ["--max-tokens", "1", "--filter", "path=convert", "--filter", "k=128", "--device", "cpu", "--no-progress"]

pytestmark = pytest.mark.skipif(not (BIN / "remap-ab").is_file(), reason="needs the installed remap-ab command")

# kernels_new unchanged: a B that passes, imported through PYTHONPATH. With HANG_ONCE set,
# its first call removes that file and sleeps (the case then runs past --case-timeout).
PASSING = """
import os, time
import kernels_new as _k
from kernels_new import *  # noqa: F401,F403
if hasattr(_k, "_remap_tiling"):
    _remap_tiling = _k._remap_tiling
HANG_ONCE = {hang!r}

def _maybe_hang():
    try:
        os.unlink(HANG_ONCE)
    except OSError:
        return
    time.sleep(120)

def triton_convert_req_index_to_global_index(*a, **k):
    _maybe_hang()
    return _k.triton_convert_req_index_to_global_index(*a, **k)

def triton_filter_and_convert_dcp_index(*a, **k):
    _maybe_hang()
    return _k.triton_filter_and_convert_dcp_index(*a, **k)
"""


def bare_env(tmp_path: Path, **more: str) -> dict:
    """What a fresh login shell has: PATH (this venv's commands first) and HOME, nothing
    of the test's PYTHONPATH."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", **more}


def shell(line: str, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def printed_lines(text: str) -> list[str]:
    """The commands in a summary: each `...` that runs remap-ab on this run's cases, and
    the resume line (`remap-ab bench`, named as what judges speed on a GPU, is no line of
    the run)."""
    quoted = [q for q in re.findall(r"`([^`]+)`", text) if "remap-ab " in q and q != "remap-ab bench"]
    return quoted + re.findall(r"resume with: (.+?)(?: \(re-runs|$)", text, flags=re.M)


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    """The sweep's working folder (holding mods/ and runs/) and another one to run its lines from."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "mods").mkdir(parents=True)
    elsewhere.mkdir()
    return work, elsewhere


def _table(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)


def _git_commit(work: Path, env: dict) -> None:
    for argv in (["init", "-q"], ["add", "mods"], ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "B"]):
        subprocess.run(["git", *argv], cwd=work, env=env, check=True, capture_output=True)


# B found through a relative PYTHONPATH, or read at a git revision of the working folder's repository.
@pytest.mark.parametrize("found", ["pythonpath", "revision"])
def test_the_lines_of_a_failing_sweep_run_in_a_fresh_shell(tmp_path, found):
    work, elsewhere = _folders(tmp_path)
    shutil.copy(REPO / "tests" / "impls" / "writes_inputs.py", work / "mods" / "writes_inputs.py")
    if found == "revision":
        if shutil.which("git") is None:
            pytest.skip("needs git")
        _git_commit(work, bare_env(tmp_path))
        b, needs = "HEAD:mods/writes_inputs.py", f"--repo {work}"
    else:
        b, needs = "writes_inputs", f"PYTHONPATH={work / 'mods'}"
    prefix = "PYTHONPATH=mods " if found == "pythonpath" else ""
    sweep = shell(f"{prefix}remap-ab sweep --b {b} " + " ".join(SELECT) + " --root runs --run fail -j 0",
                  work, bare_env(tmp_path))
    assert sweep.returncode == 1, sweep.stdout + sweep.stderr
    folder = work / "runs" / "fail"
    table = _table(folder)
    failing = table[table.status == "fail"]
    unreported = failing[failing.report == ""].case_id.iloc[0]  # a case whose report the lines get
    reported = failing[failing.report != ""].report.iloc[0]
    lines = printed_lines(sweep.stdout)
    assert len(lines) == 2, sweep.stdout  # the new run of some cases, the replay by ID
    report_md = (folder / reported / "diff.md").read_text()
    lines += [m.strip() for m in re.findall(r"^ {4}((?:PYTHONPATH=\S+ )?remap-ab (?:replay|run) .+)$", report_md, flags=re.M)]
    assert len(lines) == 4, report_md  # and the report's replay of its folder and its run line
    for line in lines:
        assert needs in line, line
        line = line.replace("ID[,ID...]", unreported).replace(" ID ", f" {unreported} ")
        r = shell(line, elsewhere, bare_env(tmp_path))
        # 1: the case fails again, as it did (writes_inputs writes into its input).
        assert r.returncode == 1, (line, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, (line, r.stderr)
        assert "inputs_written" in r.stdout + r.stderr, (line, r.stdout)
    # The new run landed under the sweep's --root, not under the shell's working folder.
    assert len([p for p in (work / "runs").iterdir() if p.is_dir()]) == 2 and list(elsewhere.iterdir()) == []
    # The replay.sh beside the report, run from anywhere.
    r = shell(f"sh {folder / reported / 'replay.sh'}", elsewhere, bare_env(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr


def _stopped(tmp_path: Path, work: Path, args: str, signum: int, moment: str = "row") -> subprocess.CompletedProcess:
    """``ARGS --root runs --run r`` (``[VAR=VALUE ...] remap-ab sweep ...``) from a bare
    shell in ``work``, stopped by ``signum`` once it reaches ``moment`` (interrupts.moment)."""
    marker = tmp_path / "paused"
    env = bare_env(tmp_path, REMAP_AB_PAUSE_AT=f"{moment}:{marker}")
    proc = subprocess.Popen(["bash", "-c", f"exec env {args} --root runs --run r"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


# SIGTERM is what an outer `timeout` sends a sweep that ran out of time.
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "timed-out"])
def test_the_resume_line_of_a_stopped_sweep_runs_in_a_fresh_shell(tmp_path, signum):
    work, elsewhere = _folders(tmp_path)
    (work / "mods" / "passing.py").write_text(PASSING.format(hang=str(tmp_path / "no-hang")))
    r = _stopped(tmp_path, work, "PYTHONPATH=mods remap-ab sweep --b passing " + " ".join(SELECT) + " -j 0", signum)
    assert r.returncode == 128 + signum, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = printed_lines(r.stdout)
    assert len(lines) == 1 and lines[0].startswith(f"PYTHONPATH={work / 'mods'}"), r.stdout
    assert f"--root {work / 'runs'}" in lines[0]
    done = len(_table(work / "runs" / "r"))
    assert 1 <= done < 8
    again = shell(lines[0], elsewhere, bare_env(tmp_path))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{done} case{'s' if done > 1 else ''} already done, {8 - done} to run" in again.stderr
    table = _table(work / "runs" / "r")
    assert len(table) == 8 and table.case_id.nunique() == 8 and set(table.status) == {"pass"}


def test_the_resume_line_of_a_sweep_of_a_subject_found_through_pythonpath_runs_in_a_fresh_shell(tmp_path):
    work, elsewhere = _folders(tmp_path)
    shutil.copy(REPO / "tests" / "sums_subject.py", work / "mods" / "sums_subject.py")
    r = _stopped(tmp_path, work, "PYTHONPATH=mods remap-ab sweep --subject sums_subject:SUBJECT --no-progress -j 0 --batch 1",
                 signal.SIGINT)
    assert r.returncode == 130, r.stdout + r.stderr
    lines = printed_lines(r.stdout)
    assert len(lines) == 1 and lines[0].startswith(f"PYTHONPATH={work / 'mods'}"), r.stdout
    # Without it, the subject is not found: the prefix is what makes the line run.
    bare = shell(lines[0].split(" ", 1)[1], elsewhere, bare_env(tmp_path))
    assert bare.returncode == 2 and "sums_subject" in bare.stderr, bare.stderr
    again = shell(lines[0], elsewhere, bare_env(tmp_path))
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(_table(work / "runs" / "r")) == 12


def test_the_lines_of_a_sweep_with_a_timed_out_case_run_in_a_fresh_shell(tmp_path):
    work, elsewhere = _folders(tmp_path)
    hang = tmp_path / "hang"
    hang.touch()
    (work / "mods" / "passing.py").write_text(PASSING.format(hang=str(hang)))
    sweep = shell("PYTHONPATH=mods remap-ab sweep --b passing " + " ".join(SELECT)
                  + " --filter invalid=0 --filter oor=off --root runs --run t -j 1 --case-timeout 5", work,
                  bare_env(tmp_path), timeout=400)
    assert sweep.returncode == 1, sweep.stdout + sweep.stderr
    table = _table(work / "runs" / "t")
    assert list(table.status).count("timeout") == 1 and not hang.exists(), table.status
    timed_out = table[table.status == "timeout"].case_id.iloc[0]
    lines = printed_lines(sweep.stdout)
    report = table[table.status == "timeout"].report.iloc[0]
    if report:  # the timed-out case's report folder: its replay and run lines
        text = (work / "runs" / "t" / report / "diff.md").read_text()
        lines += [m.strip() for m in re.findall(r"^ {4}((?:PYTHONPATH=\S+ )?remap-ab (?:replay|run) .+)$", text, flags=re.M)]
    assert lines, sweep.stdout
    for line in lines:
        assert f"PYTHONPATH={work / 'mods'}" in line, line
        line = line.replace("ID[,ID...]", timed_out).replace(" ID ", f" {timed_out} ")
        r = shell(line, elsewhere, bare_env(tmp_path))
        # B no longer hangs: the case runs to a verdict (0; 1 where a replay names a
        # failure that does not reproduce), never a bad command line (2).
        assert r.returncode in (0, 1), (line, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, (line, r.stderr)


def test_the_lines_of_a_failing_topology_sweep_run_in_a_fresh_shell(tmp_path):
    from remap_ab.subjects.topology import mutants, report

    work, elsewhere = _folders(tmp_path)
    mutant = next(m for m in mutants.mutants() if m.id == "edge_rounded_down")
    (work / "mods" / "topo_bad.py").write_text(mutants.mutated_source(mutant))
    case = report.case_id(mutant.witness_case)
    sweep = shell(f"PYTHONPATH=mods remap-ab sweep --subject topology --b topo_bad --filter case={case} --device cpu "
                  "--root runs --run t -j 0 --no-progress", work, bare_env(tmp_path))
    assert sweep.returncode == 1, sweep.stdout + sweep.stderr
    text = (work / "runs" / "t" / case / "report.md").read_text()
    lines = printed_lines(sweep.stdout) + re.findall(r"^ {4}((?:PYTHONPATH=\S+ )?remap-ab (?:replay|sweep) .+)$", text,
                                                     flags=re.M)
    assert len(lines) >= 2, (sweep.stdout, text)
    for line in lines:
        assert f"PYTHONPATH={work / 'mods'}" in line, line
        r = shell(line.replace("ID[,ID...]", case).replace(" ID ", f" {case} "), elsewhere, bare_env(tmp_path))
        assert r.returncode == 1, (line, r.stdout, r.stderr)  # B's mismatch again
        assert "Traceback" not in r.stderr and "error:" not in r.stderr, (line, r.stderr)
    assert list(elsewhere.iterdir()) == []
