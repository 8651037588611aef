"""A real sweep stopped by SIGINT (Ctrl-C: the whole process group) and by SIGTERM, in
this process (-j 0) and with worker processes: it prints what ran and failed so far and
the exact --resume command, exits 130 / 143, leaves no process and no warning behind,
and the printed command finishes the run."""

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

from remap_ab import command_line, runtime

REPO = Path(__file__).resolve().parents[1]

# 16 small cases; B sleeps in each call while the file SLOW_WHILE names exists, so that
# the run is still going when stopped (the test then removes it: the resume runs at speed).
SELECT = ["--max-tokens", "1", "--filter", "path=convert", "--filter", "k=128,384"]
SLOW = """
import os, time
import kernels_new as _k

SLOW_WHILE = {slow_while!r}

def triton_convert_req_index_to_global_index(*a, **k):
    if os.path.exists(SLOW_WHILE):
        time.sleep(0.3)
    return _k.triton_convert_req_index_to_global_index(*a, **k)

def triton_filter_and_convert_dcp_index(*a, **k):
    if os.path.exists(SLOW_WHILE):
        time.sleep(0.3)
    return _k.triton_filter_and_convert_dcp_index(*a, **k)
"""


def _env(tmp_path: Path) -> dict:
    (tmp_path / "mods").mkdir(exist_ok=True)
    (tmp_path / "slow").touch()
    (tmp_path / "mods" / "slowimpl.py").write_text(SLOW.format(slow_while=str(tmp_path / "slow")))
    # The caller's PYTHONPATH stays behind this checkout (it may hold the installed packages).
    path = (str(tmp_path / "mods"), str(REPO), os.environ.get("PYTHONPATH", ""))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    env.pop("REMAP_AB_TRACEBACK", None)
    return env


def _selected() -> int:
    """The 16 grid cases (path=convert keeps no rejection call: each has counts)."""
    return 16


def _rows(folder: Path) -> int:
    try:
        return max(0, len((folder / "results.csv").read_text().splitlines()) - 1)
    except OSError:
        return 0


def _alive_in_group(pgid: int) -> list:
    """Processes of process group ``pgid`` that still run (zombies waiting for init to
    reap them are gone already)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def _remap_ab(command: str) -> list:
    """The printed ``remap-ab ...`` command, run from this checkout."""
    argv = shlex.split(command)
    if argv[0].startswith("PYTHONPATH="):  # the run's own, which the test's environment holds already
        argv = argv[1:]
    assert argv[0] == "remap-ab", command
    return [sys.executable, "-m", "remap_ab", *argv[1:]]


def _resume(command: str, env: dict, tmp_path: Path, monkeypatch, capsys) -> subprocess.CompletedProcess:
    """The printed command, --no-progress -j 0. In this process where its Triton backend is
    the CPU's already (no GPU); else in a process of its own: the run's device, the CPU,
    fixes a process's backend, and this one runs kernels on cuda. -j 0: what is checked is
    which cases the resume runs (the stop's workers are the test's; a resume's are
    test_sweep_state's), and workers would cost a fork server and a start-up each."""
    argv = _remap_ab(command) + ["--no-progress", "-j", "0"]
    if runtime.default_device() != "cpu":
        return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    from remap_ab.cli import main as cli_main
    from remap_ab.subjects.remap.judge import registry

    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    capsys.readouterr()
    try:
        status = cli_main(argv[3:])
    finally:
        sys.modules.pop("slowimpl", None)  # each test writes its own
        registry.forget("slowimpl")
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, status, out, err)


# Each signal once and each mode once: Ctrl-C on the default sweep (workers), and a
# supervisor's SIGTERM on an in-process one; both signals go through one handler.
@pytest.mark.parametrize("signum, workers", [(signal.SIGINT, "2"), (signal.SIGTERM, "0")],
                         ids=["sigint-workers", "sigterm-inline"])
def test_a_stopped_sweep_says_what_ran_and_resumes_from_the_printed_command(tmp_path, signum, workers, monkeypatch,
                                                                            capsys):
    env = _env(tmp_path)
    root = tmp_path / "runs"
    folder = root / "r"
    argv = [sys.executable, "-m", "remap_ab", "sweep", "--b", "slowimpl", *SELECT, "-j", workers,
            "--device", "cpu", "--root", str(root), "--run", "r", "--no-progress"]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while _rows(folder) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be stopped"
    os.killpg(proc.pid, signum)  # as a terminal's Ctrl-C (or a supervisor) does: the workers get it too
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (out, err)

    done = _rows(folder)
    total = _selected()
    assert 2 <= done < 16, out
    name = signal.Signals(signum).name
    lines = out.splitlines()
    assert lines[0] == f"run r: old vs slowimpl (oracle checked) on cpu — {folder}"
    assert lines[1] == (f"  cases: {done} run of {total} selected (1728 in the grid); filters: path=convert k=128,384; "
                        f"{total - done} not run yet")
    assert lines[2] == f"  stopped: interrupted by {name}; the cases in flight were dropped (a resume runs them)"
    assert f"  verdicts: pass {done}, fail 0, error 0, crash 0, timeout 0" in lines
    # The PYTHONPATH that found B (tests/test_printed_commands.py runs such a line in a bare shell).
    resume = command_line.python_path(env["PYTHONPATH"].split(os.pathsep)) + f"remap-ab sweep --resume --run r --root {root}"
    assert lines[-1] == f"  result: INCOMPLETE — {total - done} of {total} selected cases not run; resume with: {resume}"
    # No traceback, no "leaked semaphore" or other warning, no line of an interrupted interpreter.
    assert err == "", err
    # Nothing left running in its process group (workers, the resource tracker).
    wait = time.monotonic() + 10
    while _alive_in_group(proc.pid) and time.monotonic() < wait:
        time.sleep(0.2)
    assert _alive_in_group(proc.pid) == []

    command = re.search(r"resume with: (.*)$", out).group(1)
    (tmp_path / "slow").unlink()
    again = _resume(command, env, tmp_path, monkeypatch, capsys)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert again.stdout.splitlines()[-1].startswith("  result: PASS — every case passed: ")
    assert f"resuming {folder}: {done} cases already done, {total - done} to run" in again.stderr
    table = pd.read_csv(folder / "results.csv", dtype=str)
    assert len(table) == total and table["case_id"].nunique() == total  # no case run twice, none missing


def test_sigterm_stops_any_command_in_one_line_with_143(tmp_path):
    # Not only the sweep: every command unwinds on SIGTERM as on Ctrl-C (clean-ups run).
    env = _env(tmp_path)
    marker = tmp_path / "started"
    (tmp_path / "mods" / "sleepyimpl.py").write_text(
        f"import pathlib, time\n"
        f"def triton_convert_req_index_to_global_index(*a, **k):\n"
        f"    pathlib.Path({str(marker)!r}).touch()\n    time.sleep(60)\n"
        f"triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index\n")
    proc = subprocess.Popen([sys.executable, "-m", "remap_ab", "run", "--b", "sleepyimpl", "--tokens", "1",
                             "--topk", "128", "--device", "cpu"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err == "remap-ab run: interrupted by SIGTERM\n"


def _report_blocked_signals(queue) -> None:
    queue.put(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))


def test_a_worker_starts_with_the_stop_signals_blocked():
    """Ctrl-C reaches the whole process group, and a worker still importing torch printed
    a KeyboardInterrupt traceback (seen on an H200 in the test above). Started through
    ``gpus.start_process`` it begins with SIGINT and SIGTERM blocked (the worker unblocks
    them once it ignores them), and the parent's own mask is left as it was."""
    import multiprocessing as mp

    from remap_ab.host import gpus

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    proc = gpus.start_process(ctx, {}, target=_report_blocked_signals, args=(queue,))
    try:
        blocked = set(queue.get(timeout=120))
    finally:
        proc.join(timeout=60)
    assert {int(signal.SIGINT), int(signal.SIGTERM)} <= blocked
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


_FRESH_START = """
import multiprocessing as mp, re, time
from remap_ab.host import gpus
proc = gpus.start_process(mp.get_context("spawn"), {}, target=time.sleep, args=(60,))
try:
    print(int(re.search(r"SigBlk:\\s*([0-9a-f]+)", open(f"/proc/{proc.pid}/status").read()).group(1), 16))
finally:
    proc.kill()
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's signal mask from /proc")
def test_the_first_process_a_fresh_interpreter_starts_has_the_stop_signals_blocked():
    # multiprocessing starts its resource tracker at the first spawn, and unblocks every
    # signal in the parent while it does: that must happen before the mask is set.
    mask = int(subprocess.run([sys.executable, "-c", _FRESH_START], capture_output=True, text=True, timeout=120,
                              check=True).stdout)
    assert mask >> (int(signal.SIGINT) - 1) & 1 and mask >> (int(signal.SIGTERM) - 1) & 1, hex(mask)
