"""The sweep: every selected case of a subject's grid through A, B and the oracle, one
row per case in the run folder. What a case is, which run and how each is judged are the
subject's (``--subject``, default the remap: subject.py, subjects/); this file only
orchestrates, one way:

  subject.select     which points run (the grid, filters, caps, the subject's own calls),
                     and A and B imported once
  run_folder.py      run.json, the results table, the lock, the checks before resuming
  pool.py            worker processes: supervision, crashes, --case-timeout
  subject.judge      a batch judged and recorded where it ran (its rows; a report folder
                     for the first failing cases of each failure class: report_cap.py)
  progress.py        the progress line on stderr
  summary.py         the verdict of the run (``remap-ab report`` reads only this side)

``-j 0`` runs the cases in this process instead of workers (no isolation, so no crash
verdicts and no --case-timeout; the fastest start-up).

On a GPU, in-process or pooled, once the first variant judged shows a cold Triton
cache, every other variant the cases left need (``subject.variant``) is compiled ahead on
the host's other cores before it is judged (precompile.py: ``Schedule``, ``Ahead``), so
judging overlaps compiling and a cold cache costs the compile time spread over the cores,
not one after another; the summary says how many variants on how many cores. A warm
cache starts no compile process, nor does the CPU (the interpreter compiles nothing).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Optional

from remap_ab import command_line, runtime, subjects
from remap_ab.errors import ConfigError, UsageError, exception_line
from remap_ab.host import gpus
from remap_ab.host.interrupts import Interrupted, Interrupts, moment
from remap_ab.options import checked_output_dir
from remap_ab.processes import background, precompile
from remap_ab.processes.pool import COMPILED_AT_LAUNCH, Job, Pool, gpu_label
from remap_ab.report_cap import DEFAULT_REPORTS
from remap_ab.status import Status
from remap_ab.subject import BatchTimes, judge_split
from remap_ab.sweep.progress import Progress
from remap_ab.sweep.run_folder import (
    RUN_FORMAT,
    ResultsWriter,
    RunLock,
    check_resumable,
    checked_run_name,
    drop_rows,
    find_run,
    new_run_name,
    read_run_json,
    result_columns,
    resume_command,
    selection_fingerprint,
    write_run_json,
    write_whole,
)
from remap_ab.sweep.settings import SweepOptions
from remap_ab.sweep.summary import summarise

GPU_BATCH = 64
# A 1024-token case at K=2048 on the CPU is 16384 interpreter programs (30-60 s on one
# core); the default leaves room for a slow, shared machine.
DEFAULT_CASE_TIMEOUT = 900.0


class Sweep:
    """``prepare`` (every check before anything is written), then ``run``. ``opts`` is what
    was asked until ``prepare`` replaces it with the settings resolved (a resume's read
    back from run.json; A, B, the device, workers, batch and timeout decided)."""

    def __init__(self, opts: SweepOptions):
        self.opts = opts
        self.phases = {"gen": 0.0, "kernels": 0.0, "compare": 0.0, "write": 0.0}
        self.startup: Optional[float] = None  # seconds until every worker had imported and started
        self.compile_ahead = ""  # precompile.Ahead.line(), where variants were compiled ahead
        self.report_helpers: Optional[dict] = None  # what the report helpers did (processes/background.py)
        self.lock: Optional[RunLock] = None
        self.repaired: list = []  # --resume --repair: the rows dropped (run_folder.RowProblem)

    # -- setup: every check before anything is written
    def prepare(self) -> None:
        o = self.opts  # what was asked; self.opts becomes the settings resolved, a new object
        checked_output_dir(o.root, "--root")
        if o.run is not None:
            checked_run_name(o.run, o.root)
        meta: Optional[dict] = None
        if o.resume:
            self.folder = find_run(o.root, o.run)
            meta = read_run_json(self.folder)
            o = o.resumed(meta)
        if o.reports is None:
            o = o.replaced(reports=DEFAULT_REPORTS)
        self.subject = subjects.get(o.subject)
        if o.memcheck and not self.subject.memcheck:
            raise UsageError(f"--memcheck: {self.subject.name} has no memory check (the sanitizer takes the remap's "
                             "cases only); drop it")
        # Fixes the backend (TRITON_INTERPRET) before any kernel is imported.
        self.device = runtime.select(o.device)
        if self.device == "cuda":
            precompile.default_workers()  # $REMAP_AB_COMPILE_WORKERS checked before anything is written
        # What runs; A and B imported once before any worker starts (one clear error, once).
        # Workers, run.json and reports use the canonical names (a revision pinned).
        sel = self.subject.select(o.grid_file, list(o.filters), o.max_size, o.a or self.subject.default_a,
                                  o.b or self.subject.default_b, self.device, meta)
        self.selected = sel
        self.points = sel.points
        self.note = sel.note
        self.columns = result_columns(sel.axes, self.subject.columns)
        self.selection = selection_fingerprint(self.points)

        self.gpu_list = gpus.visible_gpus(os.environ, gpus.count_gpus()) if self.device == "cuda" else []
        workers = o.workers
        if workers is None:
            workers = max(1, len(self.gpu_list)) if self.device == "cuda" else gpus.host_cores()
        if workers < 0:
            raise UsageError(f"-j {workers}: use 0 (in this process) or a positive number of worker processes")
        if workers == 0 and o.case_timeout is not None:
            raise UsageError("--case-timeout needs worker processes (a case in this process cannot be stopped); drop -j 0")
        # On the CPU, --memcheck runs case by case anyway (and far slower): one case
        # per batch keeps each under its own --case-timeout. On a GPU a batch is
        # one sanitizer child per implementation, so batching is what makes it cheap.
        batch = o.batch if o.batch is not None else GPU_BATCH if self.device == "cuda" else 1
        if batch < 1:
            raise UsageError(f"--batch {batch} must be at least 1")
        # The settings resolved: what runs, where, and how it is shared out.
        self.opts = o.replaced(subject=self.subject.name, a=sel.a, b=sel.b, device=self.device,
                               workers=min(workers, len(self.points)) if workers else 0, batch=batch,
                               case_timeout=DEFAULT_CASE_TIMEOUT if o.case_timeout is None else o.case_timeout)
        o = self.opts

        if o.resume:
            self.lock = RunLock(self.folder).acquire()
            try:
                assert meta is not None
                done, damaged = check_resumable(self.folder, meta, self.columns, [p.case_id for p in self.points],
                                                self.selection, sel.grid_version, repair=o.repair)
                if damaged:  # --repair: the rows that fail validation go, and their cases run again
                    drop_rows(self.folder, {p.row for p in damaged})
            except BaseException:
                self.lock.release()
                raise
            self.repaired = damaged
        else:
            name = o.run or new_run_name(sel.a, sel.b, self.device)
            self.folder = Path(o.root) / name
            if self.folder.exists() and any(self.folder.iterdir()):
                raise ConfigError(f"run folder {self.folder} already exists; give another --run, or continue it with: "
                                  f"{resume_command(self.folder)}")
            made = not self.folder.exists()
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                self.lock = RunLock(self.folder).acquire()
                write_run_json(self.folder, self._new_meta(name))
            except BaseException:  # e.g. Ctrl-C: a folder without run.json holds nothing to resume
                if self.lock is not None:
                    self.lock.release()
                if made:
                    for leftover in self.folder.iterdir():
                        leftover.unlink()
                    self.folder.rmdir()
                raise
            done = set()
        self.settings = o.judge_settings(str(self.folder))  # what every batch is judged with, workers' too
        self.todo = [p for p in self.points if p.case_id not in done]
        self.already = len(self.points) - len(self.todo)
        self.by_id = {p.case_id: p for p in self.points}

    # The settings resolved by prepare, as plain values.
    @property
    def workers(self) -> int:
        assert self.opts.workers is not None
        return self.opts.workers

    @property
    def batch(self) -> int:
        assert self.opts.batch is not None
        return self.opts.batch

    @property
    def case_timeout(self) -> float:
        assert self.opts.case_timeout is not None
        return self.opts.case_timeout

    def _new_meta(self, name: str) -> dict:
        o = self.opts
        sel = self.selected
        settings = o.stored()  # what a resume reads back (SweepOptions.resumed)
        return {
            "format": RUN_FORMAT,
            "run": name,
            **settings,
            "implementations": sel.meta.get("implementations"),  # what a file or revision name loaded
            "grid_version": sel.grid_version,
            "grid_total": sel.grid_total,
            "selected": len(self.points),
            # the subject's run-level facts
            **{k: v for k, v in sel.meta.items() if k != "implementations" and k not in settings},
            "selection": self.selection,
            "case_ids": [p.case_id for p in self.points],  # what a row may name (run_folder.row_problems)
            "cap_note": self.note,
            "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            # What found A, B and the subject: every line the run prints carries it (command_line.py).
            "python_path": command_line.run_entries([n for n in (o.a, o.b, self.subject.name) if n]),
            "phase_seconds": {},
            "wall_seconds": 0.0,
        }

    # -- recording (this process only: one writer of the results table)
    def record(self, rows: list, worker: int, gpu: str) -> None:
        full = []
        for r in rows:
            p = self.by_id[r["case_id"]]
            full.append({"index": p.index, "case_id": p.case_id, **dict(p.labels), **r, "worker": worker, "gpu": gpu})
        with self.interrupts.held():  # a signal never cuts a row in half
            self.table.write(full)
            self.recorded += len(full)
            self.last_result_at = time.perf_counter()
            self.progress.update([r["status"] for r in rows], [self.subject.cost(self.by_id[r["case_id"]].config) for r in rows])
        moment("row")

    def _judged(self, configs: list, times: BatchTimes) -> list:
        return self.subject.judge(configs, self.settings, times)

    def _crash_row(self, config, exc: Exception) -> dict:
        return self.subject.lost_row(config, self.settings, exception_line(exc)[:400], Status.CRASH)

    def record_lost(self, point, message: str, status: Status, worker: int, gpu: str) -> None:
        self.record([self.subject.lost_row(point.config, self.settings, message, status)], worker, gpu)

    # -- running
    def run(self) -> dict:
        """Run what is left and return the summary. SIGINT or SIGTERM (in the main
        thread) stops the run: the cases in flight are dropped, the workers stopped,
        and the summary of what ran comes back with ``interrupted`` set to the signal's
        name (``interrupted_status``: 130 or 143); a ``--resume`` runs the rest."""
        import json
        import threading

        guard = Interrupts() if threading.current_thread() is threading.main_thread() else contextlib.nullcontext()
        try:
            with guard:
                self.interrupts = guard if isinstance(guard, Interrupts) else Interrupts()
                self.table = ResultsWriter(self.folder, self.columns)
                self.progress = Progress(len(self.todo), self.opts.progress, costs=[self.subject.cost(p.config) for p in self.todo])
                self.wall0 = time.perf_counter()
                self.recorded = 0
                stopped: Optional[Interrupted] = None
                helpers: Optional[background.Helpers] = None
                try:
                    if self.todo:
                        if self.workers == 0:
                            with background.Helpers(background.helper_count(self.device)) as helpers:
                                self._run_inline()
                        else:
                            self._run_workers()
                except Interrupted as exc:
                    stopped = exc
                finally:
                    self.table.close()
                    self.progress.close()
                    if helpers is not None and (helpers.done or helpers.failures):
                        # the wait for the last folders is the write phase's
                        self.phases["write"] = self.phases.get("write", 0.0) + helpers.waited
                        self.report_helpers = {"workers": helpers.workers, "folders": helpers.done,
                                               "waited_seconds": helpers.waited, "failures": helpers.failures}
                moment("summary")
                self._save_timings()
                summary = summarise(self.folder, self.selected.grid, lock_held_here=True)
                summary["interrupted"] = stopped.name if stopped else ""
                summary["interrupted_status"] = stopped.exit_status if stopped else 0
                write_whole(self.folder / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
                return summary
        finally:
            if self.lock is not None:
                self.lock.release()

    def _save_timings(self) -> None:
        # Wall time up to the last result (worker shutdown excluded; it loses nothing).
        wall = getattr(self, "last_result_at", time.perf_counter()) - self.wall0
        meta = read_run_json(self.folder)
        acc = meta.get("phase_seconds") or {}
        for k, v in self.phases.items():
            acc[k] = acc.get(k, 0.0) + v
        meta["phase_seconds"] = acc
        meta["wall_seconds"] = meta.get("wall_seconds", 0.0) + wall
        meta["last_session"] = {
            "cases": self.recorded, "wall_seconds": wall, "phase_seconds": self.phases,
            "workers": self.workers, "batch": self.batch, "gpus": self.gpu_list,
            "startup_seconds": self.startup, "case_timeout": self.case_timeout,
            "compile_ahead": self.compile_ahead,
            "report_helpers": self.report_helpers,
            # CPU --memcheck runs each case whole (batch.py): one time, no phases.
            "phases_split": not (self.opts.memcheck and self.device != "cuda"),
        }
        write_run_json(self.folder, meta)

    def _batches(self) -> deque:
        pts = self.todo
        size = self.batch
        return deque(pts[i : i + size] for i in range(0, len(pts), size))

    def _add_phases(self, secs: dict) -> None:
        for k, v in secs.items():
            self.phases[k] = self.phases.get(k, 0.0) + v

    def _schedule(self, device_processes: int) -> Optional[precompile.Schedule]:
        """On a GPU with more than one variant to compile, the order of the cases left
        and the compile workers that start when the cache is cold (precompile.py); None:
        the device process compiles at launch, as on the CPU."""
        if self.device != "cuda":
            return None
        variants = {self.subject.variant(p.config) for p in self.todo} - {None}
        workers = min(precompile.default_workers(device_processes), len(variants))
        if workers < 1 or len(variants) < 2:
            return None
        a, b = self.settings.a, self.settings.b
        return precompile.Schedule(self.todo, lambda: precompile.Ahead(a, b, precompile.device_target(), workers))

    def _compiled_line(self, schedule: Optional[precompile.Schedule], device_processes: int) -> None:
        if schedule is not None and schedule.ahead is not None:
            self.compile_ahead = schedule.ahead.line(device_processes)
        elif schedule is not None and schedule.start_error:
            self.compile_ahead = f"{schedule.start_error}; each variant compiled at its launch"

    def _run_inline(self) -> None:
        schedule = self._schedule(1)
        pending = self._batches() if schedule is None else deque()
        try:
            while True:
                if pending:
                    batch = pending.popleft()
                elif schedule is None:
                    break
                else:
                    batch = schedule.next(self.batch)
                    if batch is None:
                        break
                    if not batch:
                        assert schedule.ahead is not None  # only compile workers hold variants back
                        schedule.ahead.wait_any(timeout=0.5)
                        continue
                times = BatchTimes()
                loads = precompile.Loads(active=schedule is not None)
                with loads:
                    # A batch that raised, judged case by case; a case that raises alone, its crash row.
                    rows = judge_split(functools.partial(self._judged, times=times), [p.config for p in batch],
                                       on_crash=self._crash_row)
                if schedule is not None:
                    schedule.judged((p.case_id for p in batch), loads.compiled if loads.active else None)
                self._add_phases(times.seconds)
                self.record(rows, 0, gpu_label(self.device))
        finally:
            if schedule is not None:
                self._compiled_line(schedule, 1)
                schedule.close()

    def _threads_per_worker(self) -> int:
        """On the CPU, the cores shared out among the workers (at least one each)."""
        if self.device != "cpu":
            return 0
        return max(1, (os.cpu_count() or 1) // max(1, self.workers))

    def _run_workers(self) -> None:
        schedule = self._schedule(self.workers)

        def on_rows(rows, wid, gpu, secs):
            compiled = secs.pop(COMPILED_AT_LAUNCH, None)
            if schedule is not None:
                schedule.judged((r["case_id"] for r in rows), None if compiled is None else int(compiled))
            self._add_phases(secs)
            self.record(rows, wid, gpu)

        def refill() -> Optional[list]:
            assert schedule is not None
            batch = schedule.next(self.batch)
            if batch is None:
                return None
            if not batch:
                assert schedule.ahead is not None
                schedule.ahead.wait_any(timeout=0.1)
            return [batch] if batch else []

        def on_ready(everyone: bool):
            if self.startup is None and everyone:
                self.startup = time.perf_counter() - self.wall0

        pool = Pool(
            Job(self.settings, self.subject.name, threads=self._threads_per_worker()),
            gpus.worker_environments(self.workers, self.device, self.gpu_list),
            self.case_timeout, on_rows=on_rows, on_lost=self.record_lost, on_ready=on_ready,
        )
        if schedule is None:
            pool.run(self._batches())
            return
        try:
            pool.run(deque(), refill)
        finally:
            self._compiled_line(schedule, self.workers)
            schedule.close()
