"""Worker processes for the sweep: start them, feed them batches, survive their deaths.

Cases run in worker *processes* (spawned, never threads: the Triton interpreter is not
thread-safe), one per GPU by default, each pinned to its GPU before CUDA starts
(gpus.py). A worker judges its batch and records it itself (recording.py: rows, and a
report folder for the first failing cases of each failure class), so no tensor crosses a
process boundary.

A worker that dies (SIGSEGV, a sticky CUDA error) or runs past the case timeout takes
no result with it: its batch is re-run one case at a time, each with the full timeout;
a case that kills a worker on its own gets the verdict ``crash``, one that runs past the
timeout on its own ``timeout`` (its worker is killed and replaced). A batch as a whole
gets one case's timeout: on a GPU a batch of 64 takes well under a second, and a hang
is found without waiting 64 timeouts.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

from remap_ab import runtime, subjects
from remap_ab.errors import InternalError, exception_line
from remap_ab.host import gpus, interrupts, tuning
from remap_ab.processes import start
from remap_ab.processes.precompile import Loads
from remap_ab.status import Status
from remap_ab.subject import BatchTimes, JudgeSettings

STARTUP_RETRIES = 3


def gpu_label(device: str) -> str:
    """The results table's ``gpu`` column for this process: its CUDA_VISIBLE_DEVICES."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "") if device == "cuda" else ""


@dataclass(frozen=True)
class Job:
    """What every worker runs: judge a batch with the settings (A and B on the device,
    recorded in the run folder), received whole."""

    settings: JudgeSettings
    subject: str = subjects.DEFAULT  # whose cases the batches hold (subjects.get)
    # torch's intra-op threads per worker; 0 leaves torch's default (one per core).
    # On the CPU, workers × threads beyond the cores thrash: two workers on 2 cores
    # each running 2 threads made the full grid's input generation and oracle slower.
    threads: int = 0
    # "module:function" that judges and records a batch in the worker instead of the
    # subject's judge: ``fn(configs, job, times, extras) -> rows``, ``extras`` being each
    # point's ``extra`` attribute (the soak's: run under contention).
    judge: str = ""


# The sweep's judge on a GPU: Triton kernels compiled at the batch's launches (not
# loaded from Triton's cache), beside the phase seconds (precompile.Schedule.judged).
COMPILED_AT_LAUNCH = "triton compiled"


def _judge(job: Job):
    """The worker's batch judge: ``job.judge`` imported, else the sweep's."""
    if not job.judge:
        subject = subjects.get(job.subject)

        def sweeps(configs, times, extras):
            loads = Loads() if job.settings.device == "cuda" else Loads.none()
            with loads:
                rows = subject.judge(configs, job.settings, times)
            if loads.active:
                times.seconds[COMPILED_AT_LAUNCH] = loads.compiled
            return rows

        return sweeps
    import importlib

    module, _, name = job.judge.partition(":")
    fn = getattr(importlib.import_module(module), name)
    return lambda configs, times, extras: fn(configs, job, times, extras)


def _worker_main(wid: int, job: Job, task_q, result_q, environ: dict) -> None:
    """A worker process: ``environ`` is its parent's environment with its own
    CUDA_VISIBLE_DEVICES (start.py)."""
    start.adopt(environ)
    # The parent decides when to stop (Ctrl-C and a SIGTERM to the process group reach
    # the workers too): it records what finished and stops them itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, gpus.STOP_SIGNALS)  # blocked since start_process; ignored now

    tuning.tune_this_process()
    runtime.select(job.settings.device)
    judge = _judge(job)
    subject = subjects.get(job.subject)  # whose cases the tasks carry, as dicts
    if job.threads:
        import torch

        torch.set_num_threads(job.threads)
    result_q.put(("ready", wid, gpu_label(job.settings.device)))
    parent = mp.parent_process()
    while True:
        try:
            task = task_q.get(timeout=1.0)
        except queue.Empty:
            # The sweep was killed (SIGKILL leaves no goodbye): do not linger.
            if parent is not None and not parent.is_alive():
                os._exit(0)
            continue
        if task is None:
            return
        batch_id, items, extras = task
        times = BatchTimes()
        try:
            configs = [subject.case_from_dict(d) for d in items]
            rows = judge(configs, times, extras)
        except BaseException as exc:  # the context may be unusable (sticky CUDA error)
            result_q.put(("failed", wid, batch_id, exception_line(exc)[:400]))
            time.sleep(0.2)
            os._exit(3)
        result_q.put(("done", wid, batch_id, rows, times.seconds))


@dataclass
class _Worker:
    wid: int
    env: dict
    proc: Any = None  # a spawned multiprocessing.Process, once started
    task_q: Any = None
    batch: Optional[int] = None
    started: float = 0.0  # when its batch was handed over (monotonic)
    ready: bool = False
    restarts: int = 0
    gpu: str = ""  # what the worker reported when ready
    last_error: Optional[str] = None  # its last "failed" message, for the crash row


def describe_exit(code) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"


class Pool:
    """``run(batches)``: every batch judged by some worker. Callbacks, in this process:
    ``on_rows(rows, worker, gpu, phase_seconds)`` for a judged batch, and
    ``on_lost(point, message, status, worker, gpu)`` for a case that crashed or timed out."""

    def __init__(self, job: Job, envs: list[dict], case_timeout: float,
                 on_rows: Callable, on_lost: Callable, on_ready: Optional[Callable] = None,
                 abandon_at: Optional[float] = None, on_abandoned: Optional[Callable] = None):
        self.job = job
        self.subject = subjects.get(job.subject)
        self.envs = envs
        self.case_timeout = case_timeout
        self.on_rows, self.on_lost, self.on_ready = on_rows, on_lost, on_ready
        # A deadline (time.time()) past which the batches in flight are abandoned, their
        # workers killed: ``on_abandoned(points, worker, seconds in flight)`` for each.
        self.abandon_at, self.on_abandoned = abandon_at, on_abandoned
        self.ctx = start.context()

    def _start(self, w: _Worker, result_q) -> None:
        if w.task_q is not None:  # a replaced worker's queue
            _close(w.task_q)
        w.task_q = self.ctx.Queue()
        w.proc = gpus.start_process(self.ctx, w.env, target=_worker_main,
                                    args=(w.wid, self.job, w.task_q, result_q, start.environment(w.env)),
                                    daemon=True, name=f"remap-ab-worker-{w.wid}")
        w.batch = None
        w.ready = False

    def run(self, batches: deque, refill: Optional[Callable[[], Optional[list]]] = None) -> None:
        """Judge ``batches``, and with ``refill`` those it hands out whenever none is
        pending and a worker is idle: a list of batches (empty: none yet), or None
        when there will be no more."""
        result_q = self.ctx.Queue()
        workers = [_Worker(i, env) for i, env in enumerate(self.envs)]
        pending = deque(batches)
        inflight: dict = {}  # batch id -> list of points
        next_id = 0
        checked = 0.0
        try:
            for w in workers:
                self._start(w, result_q)
            interrupts.moment("pool")  # the workers starting (a test stops the sweep here)
            while pending or inflight or refill is not None:
                idle = sum(w.ready and w.batch is None for w in workers)
                # Enough batches for every idle worker, while refill has them.
                while refill is not None and len(pending) < idle:
                    more = refill()
                    if more is None:
                        refill = None
                    elif not more:
                        break
                    else:
                        pending.extend(more)
                for w in workers:
                    if w.ready and w.batch is None and pending:
                        batch = pending.popleft()
                        inflight[next_id] = batch
                        w.batch, w.started = next_id, time.monotonic()
                        w.task_q.put((next_id, [self.subject.case_dict(p.config) for p in batch],
                                      [getattr(p, "extra", None) for p in batch]))
                        next_id += 1
                try:
                    msg = result_q.get(timeout=0.25)
                except queue.Empty:
                    msg = None
                if msg is not None:
                    self._receive(msg, workers, inflight)
                if self.abandon_at is not None and time.time() >= self.abandon_at:
                    self._abandon(workers, inflight)
                    return
                # Look for workers that died or ran past the timeout (also while others
                # keep answering, or a hang beside a busy worker would go unseen).
                if time.monotonic() - checked < 0.25:
                    continue
                checked = time.monotonic()
                self._drain(result_q, workers, inflight)  # a dying worker's last words first
                for w in workers:
                    lost = self._lost(w)
                    if lost is None:
                        continue
                    message, status = lost
                    bid = w.batch
                    if bid is None and not w.ready:
                        w.restarts += 1
                        if w.restarts > STARTUP_RETRIES:
                            raise InternalError(f"worker {w.wid} keeps dying before its first case ({message})")
                    if bid is not None:
                        batch = inflight.pop(bid)
                        if len(batch) > 1:
                            pending.extendleft(reversed([[p] for p in batch]))
                        else:
                            self.on_lost(batch[0], message, status, w.wid, w.gpu)
                    self._start(w, result_q)
        finally:
            self._stop(workers)
            _close(result_q)

    def _abandon(self, workers, inflight) -> None:
        """Past ``abandon_at``: each batch in flight handed to ``on_abandoned``, its worker killed."""
        for w in workers:
            if w.batch is None or w.batch not in inflight:
                continue
            w.proc.kill()
            w.proc.join(timeout=10)
            points = inflight.pop(w.batch)
            if self.on_abandoned is not None:
                self.on_abandoned(points, w.wid, time.monotonic() - w.started)
            w.batch = None

    def _drain(self, result_q, workers, inflight) -> None:
        while True:
            try:
                msg = result_q.get_nowait()
            except queue.Empty:
                return
            self._receive(msg, workers, inflight)

    def _receive(self, msg, workers, inflight) -> None:
        kind, wid = msg[0], msg[1]
        w = workers[wid]
        if kind == "ready":
            w.ready = True
            w.gpu = msg[2]
            if self.on_ready is not None:
                self.on_ready(all(x.ready for x in workers))
        elif kind == "done":
            _, _, bid, rows, secs = msg
            if bid in inflight:  # else: a late answer from a batch already given up on
                inflight.pop(bid)
                w.batch = None
                self.on_rows(rows, wid, w.gpu, secs)
        elif kind == "failed":
            w.last_error = msg[3]

    def _lost(self, w: _Worker) -> Optional[tuple[str, Status]]:
        """(message, status) if the worker is gone: dead, or killed here for running
        past the timeout; None while it is alive and in time."""
        if w.proc.exitcode is None:
            if w.batch is None or time.monotonic() - w.started <= self.case_timeout:
                return None
            w.proc.kill()  # a hang ignores polite signals; its state is worth nothing
            w.proc.join(timeout=10)
            w.last_error = None
            return f"no verdict within --case-timeout {self.case_timeout:g} s; its worker was killed", Status.TIMEOUT
        message = w.last_error or describe_exit(w.proc.exitcode)
        w.last_error = None
        return message, Status.CRASH

    @staticmethod
    def _stop(workers) -> None:
        for w in workers:
            if w.proc is not None and w.proc.exitcode is None:
                try:
                    w.task_q.put(None)
                except Exception:
                    pass
        # Workers hold no state worth a slow interpreter teardown: give them a
        # moment to leave on their own, then stop the ones still there.
        deadline = time.time() + 1.0
        for w in workers:
            if w.proc is not None:
                w.proc.join(timeout=max(0.05, deadline - time.time()))
        for w in workers:
            if w.proc is not None and w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join(timeout=2)
            if w.task_q is not None:
                _close(w.task_q)


def _close(q) -> None:
    """Let a queue go now (its pipe and feeder thread), not at interpreter exit; what
    it still holds is for a worker that is gone, so nothing waits to deliver it."""
    try:
        q.cancel_join_thread()
        q.close()
    except Exception:
        pass


def map_tasks(fn: Callable, tasks: list, workers: int) -> Iterator[tuple[Any, Any]]:
    """``(task, fn(task))`` for every task, in the order they finish, from ``workers``
    spawned processes (one worker too: a task may fix its process's Triton backend,
    which this one has already chosen). For self-contained jobs that hold no case state
    and need no GPU (cross-compiling a kernel for another target): a plain process pool.
    The sweep's ``Pool`` above re-runs a dead worker's cases one by one and records
    verdicts; here a task that raises raises in the caller, and a worker that dies is an
    InternalError."""
    if not tasks:
        return
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    with start.executor(min(workers, len(tasks))) as ex:
        futures = {ex.submit(fn, t): t for t in tasks}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        except BrokenProcessPool as exc:
            raise InternalError(f"a worker process died while running {fn.__name__} ({exc})") from None
        finally:
            for f in futures:
                f.cancel()
