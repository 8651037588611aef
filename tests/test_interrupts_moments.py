"""Ctrl-C or SIGTERM at every moment of a sweep — its imports, the run folder just made,
the worker pool starting, a row just written, the summary being written — is one line
and exit 130 / 143, never a traceback; where a run folder exists the line (or the
summary's last line) is the exact resume command, nothing already written is lost, and
the resume finishes the run. The sweep pauses at each moment through
``$REMAP_AB_PAUSE_AT`` (interrupts.moment); the imports are also caught unpaused, by
waiting for torch's library to be mapped into the process."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from remap_ab.cli import main as cli_main
from remap_ab.host.interrupts import MOMENTS

REPO = Path(__file__).resolve().parents[1]
SUMS = ["sweep", "--subject", "sums_subject:SUBJECT", "--no-progress", "--batch", "1"]  # a row at a time on a GPU too
TOTAL = 12  # the sums subject's grid


def _env(**more: str) -> dict:
    path = [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p), **more)
    env.pop("REMAP_AB_TRACEBACK", None)
    return env


def _start(root: Path, workers: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "remap_ab", *SUMS, "-j", workers, "--root", str(root), "--run", "r"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for(condition, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()
    assert condition(), "the moment never came"


def _table_bytes(folder: Path) -> bytes:
    try:
        return (folder / "results.csv").read_bytes()
    except OSError:
        return b""


def _resume(line: str, capsys) -> tuple[int, str, str]:
    """The printed resume line, run here (tests/ is on this process's sys.path: its
    PYTHONPATH is the one already in force)."""
    argv = shlex.split(line)
    if argv[0].startswith("PYTHONPATH="):
        argv = argv[1:]
    assert argv[:2] == ["remap-ab", "sweep"], line
    capsys.readouterr()
    status = cli_main([*argv[1:], "--no-progress", "-j", "0"])
    out, err = capsys.readouterr()
    return status, out, err


# Each moment once, both signals among them; the pool's needs a worker process (-j 1).
CASES = [("imports", signal.SIGINT, "0"), ("imports", signal.SIGTERM, "0"), ("prepared", signal.SIGTERM, "0"),
         ("pool", signal.SIGINT, "1"), ("row", signal.SIGINT, "0"), ("summary", signal.SIGTERM, "0")]


def test_every_moment_is_tested():
    assert {m for m, _, _ in CASES} == set(MOMENTS)


@pytest.mark.parametrize("moment, signum, workers", CASES, ids=[f"{m}-{s.name}" for m, s, _ in CASES])
def test_a_signal_at_each_moment_is_one_line_and_loses_nothing(tmp_path, moment, signum, workers, capsys):
    root, marker = tmp_path / "runs", tmp_path / "paused"
    folder = root / "r"
    proc = _start(root, workers, _env(REMAP_AB_PAUSE_AT=f"{moment}:{marker}"))
    _wait_for(marker.exists, proc)
    written = _table_bytes(folder)  # the process waits at the moment: the table is still
    os.killpg(proc.pid, signum)
    out, err = proc.communicate(timeout=120)
    word = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert proc.returncode == 128 + signum, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err

    if moment == "imports":  # nothing made yet, nothing to resume
        assert err == f"remap-ab sweep: interrupted by {word}\n" and out == ""
        assert not folder.exists()
        return
    # Nothing already written is lost: the table holds what it held at the signal.
    after = _table_bytes(folder)
    assert after[:len(written)] == written and len(after) == len(written), (written, after)
    if moment in ("pool", "row"):  # the run's own summary, ending with the resume line
        resume = re.search(r"^  result: INCOMPLETE — .*; resume with: (.+)$", out, flags=re.M).group(1)
        assert f"stopped: interrupted by {signal.Signals(signum).name}" in out
    else:  # set up, or writing the summary: one line after what the sweep said before
        last = err.splitlines()[-1]
        found = re.fullmatch(rf"remap-ab sweep: interrupted by {word}; what ran is kept; resume with: (.+)", last)
        assert found, err
        resume = found.group(1)
        assert len(err.splitlines()) <= 2, err  # the subject's header line at most, then the one line
    assert f"--resume --run r --root {root}" in resume
    rows = len(pd.read_csv(folder / "results.csv")) if written else 0
    assert rows == {"prepared": 0, "pool": 0, "row": 1, "summary": TOTAL}[moment]

    status, out, err = _resume(resume, capsys)
    assert status == 0, out + err
    table = pd.read_csv(folder / "results.csv", dtype=str)
    assert len(table) == TOTAL and table["case_id"].nunique() == TOTAL
    assert (folder / "results.csv").read_bytes()[:len(written)] == written  # the rows before the stop, kept as they were
    assert (folder / "summary.json").is_file()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads a process's mapped libraries from /proc")
def test_ctrl_c_while_torch_is_still_importing_is_one_line(tmp_path):
    # No pause: the signal lands in the middle of the first second's imports, as a
    # person's Ctrl-C right after Enter does (it printed a KeyboardInterrupt traceback).
    root = tmp_path / "runs"
    proc = _start(root, "0", _env())

    def importing_torch() -> bool:
        try:
            return "libtorch" in Path(f"/proc/{proc.pid}/maps").read_text()
        except OSError:
            return False

    _wait_for(importing_torch, proc, seconds=120)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert err == "remap-ab sweep: interrupted by Ctrl-C\n", err
    assert not (root / "r").exists() or (root / "r" / "run.json").is_file()  # nothing half-made
