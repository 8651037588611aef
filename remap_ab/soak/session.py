"""One ``remap-ab soak``, for any subject: the header and its repeat line, the workers
(in this process or pool.py's), the progress and failure lines as they come, Ctrl-C,
the printed summary and soak.json. What is drawn is the subject's (``SoakPlan``)."""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, subjects
from remap_ab.host import gpus, tuning
from remap_ab.host.interrupts import Interrupts
from remap_ab.report_cap import describe
from remap_ab.soak import run as engine
from remap_ab.subject import JudgeSettings, SoakPlan, SoakSettings, Subject

SHOWN = 20  # failing cases listed as they come and in the summary (soak.json lists every one)


@dataclass
class Soak:
    """What one soak was asked, beside the subject's settings."""

    subject: str
    settings: SoakSettings
    minutes: float
    seed: int
    root: Path
    max_cases: Optional[int] = None  # per worker
    reports: Any = None  # report_cap.Cap
    case_timeout: float = 900.0


def plan_of(subject: Subject, settings: SoakSettings) -> SoakPlan:
    """The subject's soak (its base's: a UsageError, one line, for a subject without one)."""
    return subject.soak(settings)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(job: Soak) -> int:
    """The soak, start to summary; its exit status (0 every case passed, 1 a case did
    not pass or none finished, 130 stopped by Ctrl-C with no failure)."""
    subject = subjects.get(job.subject)
    s = job.settings
    soak = plan_of(subject, s)  # bad options and implementations refused before anything is written
    folder = job.root / "soak" / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)

    print(f"soak {s.a} vs {s.b} for {job.minutes:g} min, seed {job.seed}: {soak.describe}", flush=True)
    repeat = [("--minutes", f"{job.minutes:g}"), ("--seed", str(job.seed))]
    repeat += [("--subject", job.subject)] if job.subject != subjects.DEFAULT else []
    root = [("--root", os.path.abspath(job.root))]  # its folders land beside this soak's, from any working folder
    print("  repeat with: " + command_line.line("soak", a=s.a, b=s.b, device=s.device, options=repeat + soak.repeat + root,
                                                path_entries=command_line.run_entries([s.a, s.b, job.subject])),
          flush=True)

    start = time.time()
    plan = engine.WorkerPlan(worker=0, settings=JudgeSettings(s.a, s.b, s.device, str(folder), reports=job.reports),
                             seed=job.seed, deadline=start + job.minutes * 60.0, max_cases=job.max_cases,
                             batch=soak.batch, compile_workers=soak.compile_ahead, subject=job.subject)
    tally = engine.Tally()
    # The first Ctrl-C lets the cases in flight finish; a second abandons them.
    interrupted = Interrupts(
        first_asks=lambda _: _say("soak: Ctrl-C: stopping after the cases in flight (Ctrl-C again to abandon them)"),
        signals=(signal.SIGINT,))
    last = [time.time()]
    reported = [0]

    def progress() -> None:
        for rec in tally.failures[reported[0]:SHOWN]:
            _say(f"soak: FAIL {rec.line}")
            if rec.report:
                _say(f"      report {rec.report}")
            _say(f"      replay: {rec.replay}")
            if reported[0] == SHOWN - 1:
                _say(f"soak: the failures after the first {SHOWN} are counted in the progress lines and listed in "
                     f"{folder / 'soak.json'}")
            reported[0] += 1
        now = time.time()
        if now - last[0] >= engine.PROGRESS_EVERY_S:
            last[0] = now
            _say(f"soak {_clock(now - start)}/{_clock(job.minutes * 60)}: {len(tally.records)} cases, "
                 f"{len(tally.failures)} not passing; {tally.rate_line(now)}")

    def stuck() -> None:
        # The watchdog's thread: the main one is inside a call that never returns to Python.
        _say(f"soak: a call in flight did not return {engine.DEADLINE_GRACE_S + engine.STUCK_AFTER_S:g} s past the "
             "deadline (stuck outside Python); printing the summary and leaving the process")
        status = _summary(job, soak, tally, interrupted, start, folder)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    with interrupted:
        if s.workers == 1:
            # Only a process of remap-ab's own may be left from a thread (a guest's is not ours to end).
            engine.run_inline(plan, soak, tally, interrupted, progress, on_stuck=stuck if tuning.owned() else None)
        else:
            # One draw stream for the pool, the same cases as --max-cases per worker.
            total = None if job.max_cases is None else job.max_cases * s.workers
            engine.run_pool(replace(plan, max_cases=total), soak, gpus.worker_environments(s.workers, s.device, s.gpus),
                            tally, interrupted, progress, job.case_timeout)
    progress()
    return _summary(job, soak, tally, interrupted, start, folder)


def _summary(job: Soak, soak: SoakPlan, tally: engine.Tally, interrupted: Interrupts, start: float,
             folder: Path) -> int:
    now = time.time()
    elapsed = now - start
    why = ("stopped by Ctrl-C" if interrupted.asked
           else "deadline reached" if now >= start + job.minutes * 60 else "--max-cases reached")
    failures = tally.failures
    print()
    print(f"soak summary ({why} after {_clock(elapsed)} of {_clock(job.minutes * 60)}; seed {job.seed}):")
    print(f"  {len(tally.records)} cases judged, {len(failures)} not passing"
          + ("" if not failures else " (by check: " + ", ".join(f"{c} {n}" for c, n in tally.failures_by_check().items())
                                     + ")"))
    for case in tally.abandoned:
        late = max(now - (start + job.minutes * 60), 0.0)
        print(f"  ABANDONED {case['case_id']}: in flight at the deadline, stopped {late:.1f} s past it after "
              f"{case['seconds_in_flight']:.1f} s in the judge, not judged "
              f"({', '.join(f'{k} {v}' for k, v in case['labels'].items())})")
        print(f"       run it alone: {case['replay']}")
    print(f"  throughput: {tally.rate_line(now) or 'no worker started'}")
    if tally.times:
        print(f"  time: {tally.total_times().line()}")
    print("  configurations drawn:")
    for line in engine.distribution_lines(tally.distribution()):
        print("  " + line)
    lines, keys = soak.summary([r.facts for r in tally.records]) if soak.summary is not None else ([], {})
    for line in lines:
        print("  " + line)
    if failures:
        print("  failures by dimension (not passing/judged):")
        for line in engine.failure_lines(tally.failures_by_dimension()):
            print("  " + line)
        print(f"  report folders: {tally.report_folders} written for {len(failures)} cases not passing, "
              f"{describe(job.reports, subject=subjects.get(job.subject))}"
              + ("" if tally.report_folders >= len(failures) else
                 "; any other case's report: its replay line below (or in soak.json) with --report DIR"))
    for rec in failures[:SHOWN]:
        print(f"  FAIL {rec.line}")
        if rec.report:
            print(f"       report {rec.report}")
        print(f"       replay: {rec.replay}")
    if len(failures) > SHOWN:
        print(f"  ... and {len(failures) - SHOWN} more, each with its replay line in {folder / 'soak.json'}")
    s = job.settings
    (folder / "soak.json").write_text(json.dumps({
        "subject": job.subject, "a": s.a, "b": s.b, "seed": job.seed, "minutes": job.minutes, "stopped": why,
        "seconds": round(elapsed, 3), **tally.to_dict(now, keys)}, indent=2) + "\n")
    print(f"  wrote {folder / 'soak.json'}")
    if failures:
        print(f"soak: FAIL — {len(failures)} of {len(tally.records)} cases did not pass")
        return 1
    left = (f"; {len(tally.abandoned)} more, in flight at the deadline, abandoned unjudged (ABANDONED above)"
            if tally.abandoned else "")
    if not tally.records:
        print(f"soak: no case finished; nothing was checked{left}")
        return 1
    if interrupted.asked:
        print(f"soak: interrupted — the {len(tally.records)} cases judged all passed{left}")
        return 130
    if left:  # a case that outlived the deadline's grace is no pass: it may be B that stalls
        print(f"soak: INCOMPLETE — {len(tally.records)} cases judged, all passed{left}")
        return 1
    print(f"soak: PASS — all {len(tally.records)} cases passed")
    return 0
