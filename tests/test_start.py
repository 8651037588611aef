"""How remap-ab starts its workers (remap_ab/processes/start.py): from the fork server in
a process of its own, with the parent's environment of the moment; spawned in a guest and
with the switch off."""

from __future__ import annotations

import os
import sys

import pytest

from remap_ab.host import tuning
from remap_ab.processes import start


def _what_the_worker_sees(_task=None) -> dict:
    torch = sys.modules.get("torch")
    # Where torch is not loaded (a spawned worker), the count it will take when it loads.
    threads = torch.get_num_threads() if torch is not None else os.environ.get("OMP_NUM_THREADS")
    return {"variable": os.environ.get("REMAP_AB_TEST_START"), "parent": os.getppid(),
            "torch_loaded": torch is not None, "threads": threads}


def _one_task(monkeypatch, owned: bool) -> tuple[str, dict]:
    monkeypatch.setattr(tuning, "_owned", owned)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a spawned worker's torch would take 2 threads by itself
    monkeypatch.setenv("REMAP_AB_TEST_START", "before")
    method = start.context().get_start_method()  # a fork server starts here, if any
    monkeypatch.setenv("REMAP_AB_TEST_START", "after")  # after the server took its environment
    with start.executor(1) as pool:
        return method, pool.submit(_what_the_worker_sees).result(timeout=120)


def test_an_own_process_starts_workers_from_the_fork_server_with_its_environment_of_now(monkeypatch):
    method, seen = _one_task(monkeypatch, owned=True)
    assert method == "forkserver"
    assert seen["parent"] != os.getpid()  # forked by the server, not started by this process
    assert seen["variable"] == "after" and seen["torch_loaded"]
    assert seen["threads"] == 1  # one of a pool's processes on the host's cores


@pytest.mark.parametrize("owned, off", [(False, ""), (True, "fork_server")], ids=["guest", "switched-off"])
def test_a_guest_or_the_switch_spawns(monkeypatch, owned, off):
    monkeypatch.setenv(tuning.OFF_VARIABLE, off)
    method, seen = _one_task(monkeypatch, owned=owned)
    assert method == "spawn" and seen["parent"] == os.getpid() and seen["variable"] == "after"
    assert seen["threads"] == "1" and not seen["torch_loaded"]  # what torch reads when it loads


def _sleep(seconds: float) -> int:
    import time

    time.sleep(seconds)
    return os.getpid()


def test_stopping_an_executor_ends_the_task_it_runs_instead_of_waiting_for_it():
    import time
    from concurrent.futures import wait

    pool = start.executor(1)
    assert pool.submit(_sleep, 0).result(timeout=120) > 0  # the worker is up
    running = pool.submit(_sleep, 600)
    time.sleep(0.5)
    (process,) = pool._processes.values()
    began = time.monotonic()
    start.stop_executor(pool)
    assert time.monotonic() - began < 10 and not process.is_alive()
    wait([running], timeout=10)  # the pool's own thread marks it, after the process is gone
    assert running.done()  # broken or cancelled: nobody waits on it
