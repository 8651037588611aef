"""Work a run hands to helper processes so that its judging goes on: the drawing and
writing of a failing case's report folder, which costs the same host time whatever the
device and would otherwise stand between one batch on the GPU and the next.

A driver opens ``Helpers(n)`` around the part of a run that judges in its own process;
inside it, ``submit(fn, *args)`` queues ``fn(*args)`` in up to ``n`` processes, started
by ``start.executor`` on the first submission (a run that writes nothing starts none).
``in_thread(fn, *args)`` runs host work that needs this process's objects (hashing a
tensor: hashlib lets go of the GIL) on a thread and gives a ``Future``; an argument of
``submit`` that is such a future is replaced by its result before the call leaves. The
waiting, the processes' start and the hand-over happen on a thread of their own, so the
caller never blocks on them. Outside any block, or with ``n == 0``, both run the call at
once: a library call, a test or a worker process gets what it asked for before they
return. Leaving the
block waits for every queued call, so what the run computed is on disk before its summary
is written, even when the block is left by an interrupt. A helper ignores SIGINT: the
Ctrl-C meant for the run reaches the whole process group, and the helper finishes its
folder while the run stops.

``fn`` and ``args`` cross a process boundary: ``fn`` a module-level function, the
arguments picklable and small (a report's model, not the device's tensors).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Optional

from remap_ab.host import gpus, tuning
from remap_ab.processes import start

# Enough helpers to draw a grid's capped report folders while it judges; more only
# start processes that wait.
MOST_HELPERS = 8
HOST_THREADS = 4  # for in_thread's work

_current: Optional[Helpers] = None


def helper_count(device: str) -> int:
    """How many helpers a run judging in its own process on ``device`` gets: on a GPU
    the host's other cores (at most MOST_HELPERS); on the CPU none, as the interpreter
    keeps every core busy and the report folders are a small share of a failing run."""
    if device != "cuda" or not tuning.enabled("report_helpers"):
        return 0
    return max(0, min(MOST_HELPERS, gpus.host_cores() - 1))


def _helper_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Helpers:
    """Up to ``workers`` helper processes for ``submit`` while the block is open. After
    it: ``done`` calls finished, ``failures`` (one line each) of those that raised,
    ``waited`` seconds spent at the end waiting for the last ones."""

    def __init__(self, workers: int):
        self.workers = workers
        self.done = 0
        self.failures: list[str] = []
        self.waited = 0.0
        self._pool: Optional[ProcessPoolExecutor] = None
        self._threads: Optional[ThreadPoolExecutor] = None
        self._feeder: Optional[ThreadPoolExecutor] = None
        self._handed: list[Future] = []  # the feeder's: each gives the process pool's future
        self._outer: Optional[Helpers] = None

    def __enter__(self) -> Helpers:
        global _current
        self._outer, _current = _current, self
        return self

    def __exit__(self, *exc) -> None:
        global _current
        _current = self._outer
        start_wait = time.perf_counter()
        try:
            for handed in self._handed:
                error = handed.exception()
                if error is None:
                    error = handed.result().exception()
                if error is None:
                    self.done += 1
                else:
                    self.failures.append(" ".join(f"{type(error).__name__}: {error}".split())[:300])
        finally:
            for pool in (self._feeder, self._threads, self._pool):
                if pool is not None:
                    pool.shutdown(wait=True)
            self.waited = time.perf_counter() - start_wait

    def in_thread(self, fn: Callable, *args: Any) -> Future:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(HOST_THREADS, thread_name_prefix="remap-ab-host")
        return self._threads.submit(fn, *args)

    def submit(self, fn: Callable, *args: Any) -> None:
        if self._feeder is None:
            self._feeder = ThreadPoolExecutor(1, thread_name_prefix="remap-ab-helpers")
        self._handed.append(self._feeder.submit(self._hand_over, fn, args))

    def _hand_over(self, fn: Callable, args: tuple) -> Future:
        args = _resolved(args)
        if self._pool is None:
            self._pool = start.executor(self.workers, _helper_start)
        return self._pool.submit(fn, *args)


def _resolved(args: tuple) -> tuple:
    return tuple(a.result() if isinstance(a, Future) else a for a in args)


def in_thread(fn: Callable, *args: Any) -> Future:
    """``fn(*args)`` on a host thread of the open ``Helpers`` (or here and now without
    one), as a ``Future``."""
    helpers = _current
    if helpers is not None and helpers.workers >= 1:
        return helpers.in_thread(fn, *args)
    done: Future = Future()
    try:
        done.set_result(fn(*args))
    except Exception as exc:  # handed to whoever waits on it, as a thread's would be
        done.set_exception(exc)
    return done


def submit(fn: Callable, *args: Any) -> None:
    """``fn(*args)`` in the open ``Helpers``' processes, or here and now without one."""
    helpers = _current
    if helpers is None or helpers.workers < 1:
        fn(*_resolved(args))
        return
    helpers.submit(fn, *args)
