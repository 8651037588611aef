"""How remap-ab starts its worker processes (the sweep's and the soak's pool, compile
workers, any ``map_tasks`` pool): the one place that picks the start method.

Workers are never forked from the process that runs the cases (its Triton backend is
chosen, and on a GPU its CUDA context is live). A process of remap-ab's own
(``tuning.owned()``: the command line, a worker) starts them from multiprocessing's fork
server with torch imported once there: each worker then starts without importing torch
again, which costs seconds of a core per process. A guest (the pytest plugin, a library
call) spawns them, as Python does, and leaves the fork server alone: its preload list is
process-wide. ``REMAP_AB_TWEAKS_OFF=fork_server`` spawns them everywhere (tuning.py).

A worker forked from the server would have the server's environment, taken when the
server started; ``adopt`` gives it its parent's as it is at the worker's start, before
anything in it reads one (CUDA_VISIBLE_DEVICES, TRITON_INTERPRET, a test's variables).
Each pool worker then has one torch intra-op thread: it is one of many processes on the
host's cores.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from remap_ab.host import gpus, tuning

# What the fork server imports once for every worker it starts.
PRELOAD = ("torch",)

_server_started = False


def context() -> Any:
    """The multiprocessing context for a worker started now."""
    if not (tuning.owned() and tuning.enabled("fork_server")) or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    global _server_started
    ctx = mp.get_context("forkserver")
    if not _server_started:  # a server already running (started by someone else) keeps its preload
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(list(PRELOAD))
        # Started with the stop signals blocked, it passes the mask on to every worker, as
        # a spawned worker has it from start_process: a Ctrl-C while one starts cannot
        # raise in it. Each worker unblocks them once it has its own handlers.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, gpus.STOP_SIGNALS)
        try:
            forkserver.ensure_running()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        _server_started = True
    return ctx


def environment(extra: Mapping[str, str] = {}) -> dict:
    """This process's environment with ``extra``: what a worker started now adopts."""
    return {**os.environ, **extra}


def adopt(environ: Mapping[str, str]) -> None:
    """The first step of a worker: its parent's environment (``environment()``) as its own."""
    if dict(os.environ) != dict(environ):
        os.environ.clear()
        os.environ.update(environ)


def _adopt_then(environ: Mapping[str, str], initializer: Callable | None, *initargs) -> None:
    adopt(environ)
    _one_intra_op_thread()
    # A pool worker of a fork server starts with the stop signals blocked (context());
    # a spawned one has its parent's mask, which lets them through.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, gpus.STOP_SIGNALS)
    if initializer is not None:
        initializer(*initargs)


def _one_intra_op_thread() -> None:
    """A pool worker is one of a pool's processes sharing the host's cores: torch's
    intra-op threads, one per core in each of them, spun beside the others' work (the
    compile workers took 4.7x as long; docs/performance.md). One thread each, set now
    where torch is loaded (the fork server's), else through the variable torch reads
    when it loads."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    else:
        os.environ["OMP_NUM_THREADS"] = "1"


def stop_executor(pool: ProcessPoolExecutor) -> None:
    """End ``pool`` now: queued tasks cancelled and the tasks running ended with their
    processes. ``shutdown(wait=False)`` alone leaves them running, and the interpreter's
    exit then waits for each (a command past its deadline still waiting on compiles)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public handle before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)


def executor(workers: int, initializer: Callable | None = None, initargs: tuple = ()) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` of ``workers`` processes started as ``context()`` says,
    each with this process's environment of now, one torch intra-op thread, then
    ``initializer(*initargs)``."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=context(), initializer=_adopt_then,
                               initargs=(environment(), initializer, *initargs))
