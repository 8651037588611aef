"""A soak stops within seconds of its deadline whatever B does, and names the case in
flight (issue 60, item 6; remap_ab/soak/run.py): a B whose calls sleep for an hour is
stopped ``DEADLINE_GRACE_S`` past the deadline, in this process (the alarm) and in
worker processes (pool.py kills them); a B stuck in a C call that no signal brings back
(SIGALRM blocked, the GIL released, as a CUDA synchronize on a kernel that never ends)
is stopped by the watchdog ``STUCK_AFTER_S`` later, the summary printed and soak.json
written. Each run is a process of its own, timed from outside.

Before: the same soaks ran until an outer ``timeout`` killed them (a sweep's
--case-timeout, 900 s, bounded the pool's).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remap_ab.soak import run as engine

STALLS = str(Path(__file__).resolve().parent / "impls" / "stalls.py")
REPO = Path(__file__).resolve().parent.parent
MINUTES = 0.05  # a 3 s soak


def _check_abandoned(proc, data, words: str) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr  # no case finished: nothing was checked
    assert "Traceback" not in proc.stderr, proc.stderr
    [case] = data["abandoned"]
    assert re.fullmatch(r"[0-9a-f]{12}", case["case_id"]) and case["replay"].startswith("remap-ab run")
    out = proc.stdout
    assert f"  ABANDONED {case['case_id']}: in flight at the deadline, stopped" in out
    assert f"       run it alone: {case['replay']}" in out
    assert words in out + proc.stderr
    assert "soak: no case finished; nothing was checked; 1 more, in flight at the deadline, abandoned unjudged" in out


def _run(tmp_path, minutes, *extra, **env):
    started = time.time()
    environ = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "", **env}
    proc = subprocess.run([sys.executable, "-m", "remap_ab", "soak", "--minutes", f"{minutes:g}", "--b", STALLS,
                           "--device", "cpu", "--seed", "1", "--root", str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=120, env=environ, cwd=tmp_path)
    wall = time.time() - started
    [written] = list((tmp_path / "soak").glob("*/soak.json"))
    data = json.loads(written.read_text())
    return proc, data, wall


def test_a_call_that_sleeps_is_stopped_at_the_deadline_s_grace(tmp_path):
    proc, data, wall = _run(tmp_path, MINUTES)
    _check_abandoned(proc, data, "")
    past = data["seconds"] - MINUTES * 60
    assert engine.DEADLINE_GRACE_S - 0.5 <= past <= engine.DEADLINE_GRACE_S + 3, past
    assert wall < 60  # the process too (imports included), not an hour


def test_a_call_stuck_outside_python_is_left_by_the_watchdog(tmp_path):
    proc, data, wall = _run(tmp_path, MINUTES, REMAP_AB_STALL_IN_C="1")
    _check_abandoned(proc, data, "stuck outside Python); printing the summary and leaving the process")
    past = data["seconds"] - MINUTES * 60
    limit = engine.DEADLINE_GRACE_S + engine.STUCK_AFTER_S
    assert limit - 0.5 <= past <= limit + 3, past
    assert wall < 60


@pytest.mark.parametrize("workers", [2])
def test_worker_processes_in_flight_are_killed_at_the_deadline_s_grace(tmp_path, workers):
    minutes = 0.2  # room for the workers to start and take a case each
    proc, data, wall = _run(tmp_path, minutes, "--workers", str(workers))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert data["abandoned"] and len(data["abandoned"]) <= workers
    assert data["cases"] == 0
    for case in data["abandoned"]:
        assert f"  ABANDONED {case['case_id']}: in flight at the deadline" in proc.stdout
    past = data["seconds"] - minutes * 60
    assert past <= engine.DEADLINE_GRACE_S + 3, past



def test_a_soak_that_judged_cases_and_abandoned_one_is_incomplete_not_a_pass(tmp_path):
    # B answers its first calls, then stalls: the cases judged passed, the one in flight
    # at the deadline did not, and the soak must not read as a pass.
    proc, data, wall = _run(tmp_path, 0.1, REMAP_AB_STALL_AFTER="4")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["cases"] >= 1 and len(data["abandoned"]) == 1, data
    assert "soak: PASS" not in proc.stdout
    assert (f"soak: INCOMPLETE — {data['cases']} cases judged, all passed; 1 more, in flight at the deadline, "
            "abandoned unjudged (ABANDONED above)") in proc.stdout
