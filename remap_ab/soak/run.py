"""The soak's engine, for any subject: draws from the subject's stream, judged in
batches until a deadline, ``max_cases`` or Ctrl-C, in this process or in pool.py's
workers.

What is drawn, how a batch is judged and a failing case's replay line are the
subject's (``Subject.soak`` -> ``subject.SoakPlan``); this module knows no kernel.

Draws are seeded: a soak with seed ``s`` draws worker ``w``'s cases from
``subject.soak_random(s, w)``, so the same seed draws the same cases in the same order
on every run, whatever the machine's speed (how many of them fit before the deadline
varies; with ``max_cases`` exactly the first ones are judged). Several workers
(pool.py's processes, one per GPU) are fed from that one stream by this process.

A draw with an ``extra`` (the remap's: run under contention) is judged in batches of
its own. On a GPU, where the subject compiles ahead (``SoakPlan.compile_ahead``, keyed by
``Subject.variant``), draws are taken a window ahead of the device and each new variant
is compiled by processes on the host's other cores (precompile.py) while the device
judges the drawn cases whose variants are compiled (``run_ahead``). Where the time went
is kept per worker (``WorkerTimes``).

The deadline holds whatever B does: no case starts after it, and a case still in flight
``DEADLINE_GRACE_S`` after it is abandoned unjudged (``Tally.abandoned``, named in the
summary with its replay line). In this process a SIGALRM raises ``DeadlinePassed`` in
the call in flight (``_alarm``; the previous handler and timer restored after), which
stops B wherever it runs Python or sleeps; a call stuck in C code that never returns
(a GPU kernel that never ends) holds the main thread, so a watchdog thread then hands
the summary to ``on_stuck`` (the command line's: it prints it and leaves the process).
In pool.py's workers the worker in flight is killed (``Pool.abandon_at``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from remap_ab import runtime, subjects
from remap_ab.host.interrupts import Interrupts
from remap_ab.processes import precompile
from remap_ab.processes.pool import Job, Pool
from remap_ab.processes.precompile import Loads, _has_listener
from remap_ab.subject import BatchTimes, JudgeSettings, ProcessUnusable, SoakPlan, replay_line_of, soak_random


@dataclass
class CaseRecord:
    """What the soak keeps of one case (plain data)."""

    worker: int
    case_id: str
    labels: dict
    status: str  # a Status word
    seconds: float
    line: str = ""  # the verdict's summary line, for cases that do not pass
    check: str = ""  # the results row's check, for cases that do not pass
    report: str = ""  # the report folder, for cases that do not pass
    replay: str = ""  # the command that replays it
    facts: dict = field(default_factory=dict)  # the subject's (SoakPlan.facts), kept in soak.json beside the rest

    def to_dict(self) -> dict:
        out = asdict(self)
        return {**{k: v for k, v in out.items() if k != "facts"}, **self.facts}


@dataclass
class WorkerPlan:
    worker: int
    # How every batch is judged, here and in the pool's workers (whole): A, B, the device
    # (cuda or cpu), the folder of failing cases' reports, the report cap.
    settings: JudgeSettings
    seed: int
    deadline: float  # time.time() after which no case starts
    max_cases: Optional[int] = None  # per worker
    batch: int = 1  # draws judged together (SoakPlan.batch)
    compile_workers: int = 0  # GPU only: processes compiling the coming variants ahead (0: none)
    subject: str = subjects.DEFAULT

    @property
    def folder(self) -> str:
        return str(self.settings.folder)


@dataclass
class WorkerTimes:
    """Where a worker's time went: judging cases (``run``, less the Triton compiles and
    cache loads made inside it), compiling and loading in this process, waiting for
    the compile-ahead workers; and what those workers did."""

    run_s: float = 0.0
    compile_s: float = 0.0
    compiled: int = 0
    load_s: float = 0.0
    loaded: int = 0
    wait_s: float = 0.0
    ahead: str = ""  # precompile.Ahead.summary(), when there was a compile-ahead
    counted: bool = False  # Triton's compiles and loads were counted (on a GPU, with a compilation listener)
    interpreter: bool = False  # the cases ran in the Triton interpreter (which compiles nothing)

    def add(self, other: WorkerTimes) -> None:
        for name in ("run_s", "compile_s", "compiled", "load_s", "loaded", "wait_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.ahead = "; ".join(x for x in (self.ahead, other.ahead) if x)
        self.counted = self.counted or other.counted
        self.interpreter = self.interpreter or other.interpreter

    def line(self) -> str:
        if self.interpreter:
            return f"judging {self.run_s:.1f} s (the Triton interpreter: nothing compiled)"
        if not self.counted:
            return (f"judging {self.run_s:.1f} s, Triton's compiles and loads included (not counted: this Triton "
                    "has no compilation listener)")
        text = (f"judging {self.run_s:.1f} s; Triton in the worker: {self.compiled} kernels compiled in "
                f"{self.compile_s:.1f} s, {self.loaded} loaded from its cache in {self.load_s:.1f} s")
        if self.ahead:
            text += f"; waiting for the compile-ahead {self.wait_s:.1f} s ({self.ahead})"
        return text


# --------------------------------------------------------------------------- judging a batch


def batch_judge(name: str, subject_name: str) -> Callable:
    """``fn(configs, settings, times, extras) -> rows``: the soak plan's judge
    (``SoakPlan.judge``, "module:function"), or the subject's own judge ("")."""
    if name:
        module, _, attribute = name.partition(":")
        return getattr(importlib.import_module(module), attribute)
    subject = subjects.get(subject_name)
    return lambda configs, settings, times, extras: subject.judge(configs, settings, times)


def _loads(device: str) -> Loads:
    """Counts this process's Triton compiles and cache loads on a GPU (none on the CPU)."""
    return Loads() if device == "cuda" else Loads.none()


TRITON_KEYS = ("triton compile s", "triton compiled", "triton load s", "triton loaded")
JUDGING = "soak judging s"


def judge_batch(configs: list, job: Job, times: BatchTimes, extras: list) -> list[dict]:
    """A pool worker's judge (pool.Job.judge): each extra is ``(SoakPlan.judge, the
    draw's extra)``; the batch judged by that judge, and ``times.seconds`` set to the
    judging's wall seconds (JUDGING) and Triton's compiles and loads (TRITON_KEYS)."""
    name = extras[0][0] if extras else ""
    judge = batch_judge(name, job.subject)
    start = time.perf_counter()
    with _loads(job.settings.device) as loads:
        rows = judge(configs, job.settings, BatchTimes(), [extra for _, extra in extras])
    spent = time.perf_counter() - start - loads.compile_seconds - loads.load_seconds
    times.seconds = {JUDGING: spent, **dict(zip(TRITON_KEYS, (loads.compile_seconds, loads.compiled,
                                                              loads.load_seconds, loads.cached)))}
    return rows


def record(plan: WorkerPlan, soak: SoakPlan, drawn: Any, row: dict, seconds: float) -> CaseRecord:
    """The soak's record of a case from its results row."""
    status = str(row["status"])
    rec = CaseRecord(plan.worker, str(row["case_id"]), drawn.labels(), status, seconds,
                     facts=soak.facts(drawn) if soak.facts is not None else {})
    if status == "pass":
        return rec
    rec.line = f"{row['case_id']}: {status.upper()} — {row['first_mismatch']}"
    rec.check = str(row.get("check") or status)
    if row.get("report"):
        rec.report = str(Path(plan.folder) / row["report"])
    rec.replay = replay_line_of(subjects.get(plan.subject), drawn.config, row, plan.folder, plan.settings.a, plan.settings.b, plan.subject)
    return rec


# --------------------------------------------------------------------------- one worker


DEADLINE_GRACE_S = 5.0  # how long past the deadline a case in flight may run before it is abandoned
STUCK_AFTER_S = 5.0  # past the grace: a call the alarm could not stop (stuck in C) ends the process


class DeadlinePassed(BaseException):
    """The soak's deadline and its grace passed with a case in flight (raised by the
    alarm; a BaseException, so that no ``except Exception`` recording a case's error
    takes it for B's)."""


@dataclass
class InFlight:
    """The draws being judged now and since when (time.time()); empty between batches."""

    draws: list = field(default_factory=list)
    since: float = 0.0


@contextlib.contextmanager
def _alarm(at: float) -> Iterator[None]:
    """DeadlinePassed raised in this thread at ``time.time() == at`` (SIGALRM), for the
    block; the previous handler and timer are restored after. Nothing where a signal
    cannot be set (a thread other than the main one, a system without setitimer)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(_signum, _frame):
        raise DeadlinePassed()

    previous = signal.signal(signal.SIGALRM, fire)
    earlier = signal.setitimer(signal.ITIMER_REAL, max(at - time.time(), 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if earlier[0] > 0:
            signal.setitimer(signal.ITIMER_REAL, *earlier)


def run_worker(plan: WorkerPlan, soak: SoakPlan, emit: Callable[[CaseRecord], None], stopping: Callable[[], bool],
               times: Optional[WorkerTimes] = None, in_flight: Optional[InFlight] = None) -> int:
    """Draw and judge cases in this process until the deadline, ``max_cases`` or
    ``stopping()``; ``emit`` every case's record as it is judged. Where the time went
    is added to ``times``. Returns the number of cases.

    On a GPU with ``compile_workers``, draws are taken ahead of the device (a window
    of LOOKAHEAD), each new variant handed to the compile workers, and the device
    judges the drawn cases whose variants are compiled, same variants together; with
    ``max_cases`` exactly the first ``max_cases`` draws are judged, whatever the order."""
    times = times if times is not None else WorkerTimes()
    device = runtime.select(plan.settings.device)
    stream = soak.draws(soak_random(plan.seed, plan.worker))
    judge = _Batches(plan, soak, device, emit, times, in_flight if in_flight is not None else InFlight())
    if device == "cuda" and plan.compile_workers:
        ahead = precompile.Ahead(plan.settings.a, plan.settings.b, precompile.device_target(), plan.compile_workers)
        try:
            return run_ahead(plan, stream, judge, stopping, times, ahead)
        finally:
            times.ahead = ahead.summary()
            ahead.close()
    waiting: dict[bool, list] = {False: [], True: []}  # draws without and with an extra, not yet judged
    while True:
        held = len(waiting[False]) + len(waiting[True])
        if stopping() or time.time() >= plan.deadline or (plan.max_cases is not None and judge.done + held >= plan.max_cases):
            break
        d = next(stream)
        kind = _has_extra(d)
        waiting[kind].append(d)
        if len(waiting[kind]) >= plan.batch:
            judge.batch(waiting[kind], kind)
            waiting[kind] = []
    for kind, left in waiting.items():
        judge.batch(left, kind)
    return judge.done


def _has_extra(d: Any) -> bool:
    return bool(getattr(d, "extra", None))


LOOKAHEAD = 512  # draws taken ahead of the device while their variants compile


def run_ahead(plan: WorkerPlan, stream, judge, stopping: Callable[[], bool], times: WorkerTimes, ahead) -> int:
    """The compile-ahead schedule (``run_worker``): ``ahead`` takes each drawn case's
    variant (``submit``), says when it is compiled (``ready``) and waits (``wait_any``);
    ``judge`` judges draws in a ``batch`` (those with an extra in batches of their own)."""
    variant = subjects.get(plan.subject).variant
    window: list = []
    drawn = 0
    while not (stopping() or time.time() >= plan.deadline):
        room = LOOKAHEAD - len(window)
        if plan.max_cases is not None:
            room = min(room, plan.max_cases - drawn)
        for _ in range(max(0, room)):
            d = next(stream)
            ahead.submit(d.config)
            window.append(d)
            drawn += 1
        if not window:
            break
        ready = [d for d in window if ahead.ready(d.config)]
        if not ready and not ahead.started():
            # The compile workers are still starting (seconds of imports): judge here
            # meanwhile the draws of one variant, compiling it unless Triton's cache holds
            # it, then look again. (A batch of first draws holds dozens of variants: their
            # compiles here outlast the workers' start-up many times.)
            ready = _one_variant(window, plan.batch, variant)
        if not ready:
            t0 = time.perf_counter()
            ahead.wait_any(timeout=0.5)
            times.wait_s += time.perf_counter() - t0
            continue
        taken = {id(d) for d in ready}
        window = [d for d in window if id(d) not in taken]
        for kind, batch in _batches(ready, plan.batch, variant):
            if stopping() or time.time() >= plan.deadline:
                break
            judge.batch(batch, kind)
    return judge.done


def _variant_order(variant: Callable) -> Callable:
    """A sort key by ``variant`` (None, a subject that compiles nothing ahead, sorts last)."""
    return lambda d: (0, variant(d.config)) if variant(d.config) is not None else (1, ())


def _one_variant(window: list, size: int, variant: Callable) -> list:
    """At most ``size`` draws of ``window``'s most drawn variant (the first drawn on a tie)."""
    keys = [variant(d.config) for d in window]
    most = Counter(keys).most_common(1)[0][0] if keys else None
    return [d for d, k in zip(window, keys) if k == most][:size]


def _batches(ready: list, size: int, variant: Callable) -> list[tuple[bool, list]]:
    """``ready`` draws cut into ``(with an extra, batch)``s of at most ``size``: those
    with an extra first and in batches of their own, each kind sorted by variant (a
    batch's launches of one variant follow one another)."""
    out = []
    for kind in (True, False):
        same = sorted((d for d in ready if _has_extra(d) == kind), key=_variant_order(variant))
        out += [(kind, same[i : i + size]) for i in range(0, len(same), size)]
    return out


class _Batches:
    """A worker's batches of draws: judged (the plan's judge), their records emitted,
    the times kept."""

    def __init__(self, plan: WorkerPlan, soak: SoakPlan, device: str, emit, times: WorkerTimes, in_flight: InFlight):
        self.plan, self.soak, self.device, self.emit, self.times = plan, soak, device, emit, times
        self.in_flight = in_flight
        self.judge = batch_judge(soak.judge, plan.subject)
        self.settings = plan.settings
        self.done = 0

    def batch(self, draws: list, extra: bool = False) -> None:
        """Judge ``draws`` (``extra``: whether they carry one; the judge reads each's)."""
        if not draws:
            return
        loads = _loads(self.device)
        start = time.perf_counter()
        self.in_flight.draws, self.in_flight.since = list(draws), time.time()
        with loads:
            rows = self.judge([d.config for d in draws], self.settings, BatchTimes(),
                              [getattr(d, "extra", None) for d in draws])
        self.in_flight.draws = []
        spent = time.perf_counter() - start
        self.times.run_s += spent - loads.compile_seconds - loads.load_seconds
        self.times.compile_s += loads.compile_seconds
        self.times.compiled += loads.compiled
        self.times.load_s += loads.load_seconds
        self.times.loaded += loads.cached
        self.times.counted = self.times.counted or loads.active
        self.times.interpreter = self.device != "cuda"
        for d, row in zip(draws, rows):
            self.emit(record(self.plan, self.soak, d, row, spent / len(draws)))
            self.done += 1


# --------------------------------------------------------------------------- the tally


@dataclass
class Tally:
    """Every record of a soak, and what the summary says about them."""

    records: list = field(default_factory=list)
    not_passing: list = field(default_factory=list)  # the records that did not pass, kept as they come
    abandoned: list = field(default_factory=list)  # cases in flight at the deadline and its grace: dicts, unjudged
    started: dict = field(default_factory=dict)  # worker -> time.time() it was ready
    gpus: dict = field(default_factory=dict)  # worker -> its GPU ("" on the CPU)
    times: dict = field(default_factory=dict)  # worker -> WorkerTimes, once it is done

    def add(self, rec: CaseRecord) -> None:
        self.records.append(rec)
        if rec.status != "pass":
            self.not_passing.append(rec)

    def abandon(self, plan: WorkerPlan, soak: SoakPlan, draws: list, seconds: float, worker: int) -> None:
        """The draws in flight when the deadline's grace ran out: named, never judged."""
        for d in draws:
            self.abandoned.append({"worker": worker, "case_id": str(d.case_id), "labels": d.labels(),
                                   "seconds_in_flight": round(seconds, 1),
                                   "replay": replay_line_of(subjects.get(plan.subject), d.config, {}, plan.folder,
                                                            plan.settings.a, plan.settings.b, plan.subject)})

    @property
    def failures(self) -> list:
        return self.not_passing

    @property
    def report_folders(self) -> int:
        return sum(1 for r in self.not_passing if r.report)

    def per_worker(self, now: float) -> dict:
        """worker -> (cases, cases per second since it was ready)."""
        out = {}
        for w, t0 in sorted(self.started.items()):
            n = sum(1 for r in self.records if r.worker == w)
            out[w] = (n, n / max(now - t0, 1e-9))
        return out

    def rate_line(self, now: float) -> str:
        parts = []
        for w, (n, rate) in self.per_worker(now).items():
            where = f"GPU {self.gpus[w]}" if self.gpus.get(w) else f"worker {w} (CPU)"
            parts.append(f"{where}: {n} cases, {rate:.2f} cases/s")
        return "; ".join(parts)

    def distribution(self) -> dict:
        """label name -> Counter of label values, over every case judged."""
        dist: dict = {}
        for r in self.records:
            for k, v in r.labels.items():
                dist.setdefault(k, Counter())[v] += 1
        return dist

    def to_dict(self, now: float, subject_keys: Optional[dict] = None) -> dict:
        return {
            "cases": len(self.records),
            **(subject_keys or {}),
            "statuses": dict(Counter(r.status for r in self.records)),
            "workers": {str(w): {"gpu": self.gpus.get(w, ""), "cases": n, "cases_per_s": round(rate, 3)}
                        for w, (n, rate) in self.per_worker(now).items()},
            "distribution": {k: dict(sorted(c.items())) for k, c in self.distribution().items()},
            "failures_by_dimension": self.failures_by_dimension(),
            "failures_by_check": self.failures_by_check(),
            "report_folders": self.report_folders,
            "times": {str(w): asdict(t) for w, t in sorted(self.times.items())},
            "failures": [r.to_dict() for r in self.failures],
            "abandoned": list(self.abandoned),
        }

    def failures_by_check(self) -> dict:
        """check -> cases not passing it (the results row's ``check``)."""
        return dict(Counter(r.check or r.status for r in self.not_passing).most_common())

    def failures_by_dimension(self) -> dict:
        """label name -> {value: [cases not passing, cases]}, as the sweep's summary has
        it for its grid's dimensions (here the labels the soak draws under)."""
        out: dict = {}
        for r in self.records:
            for k, v in r.labels.items():
                cell = out.setdefault(k, {}).setdefault(v, [0, 0])
                cell[0] += r.status != "pass"
                cell[1] += 1
        return {k: dict(sorted(v.items())) for k, v in out.items()}

    def total_times(self) -> WorkerTimes:
        total = WorkerTimes()
        for t in self.times.values():
            total.add(t)
        return total


def failure_lines(by_dimension: dict) -> list[str]:
    """The dimensions' values where cases did not pass: "failed/judged" each, as the
    sweep's summary shows (values without a failure are left out)."""
    lines = []
    for name, cells in by_dimension.items():
        bad = [f"{v} {f}/{n}" for v, (f, n) in sorted(cells.items(), key=lambda kv: (-kv[1][0], kv[0])) if f]
        if bad:
            lines.append(f"  {name:>11}: {', '.join(bad)}")
    return lines


def distribution_lines(dist: dict) -> list[str]:
    lines = []
    for name, counter in dist.items():
        items = ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"  {name:>11}: {items}")
    return lines


# --------------------------------------------------------------------------- the session

PROGRESS_EVERY_S = 10.0


def run_inline(plan: WorkerPlan, soak: SoakPlan, tally: Tally, interrupted: Interrupts,
               progress: Callable[[], None], on_stuck: Optional[Callable[[], None]] = None) -> None:
    """One worker in this process (the CPU default, or a single GPU). ``on_stuck``: what
    the watchdog calls, from its thread, when a call in flight outlives the alarm by
    STUCK_AFTER_S (None: no watchdog)."""
    tally.started[plan.worker] = time.time()
    tally.gpus[plan.worker] = os.environ.get("CUDA_VISIBLE_DEVICES", "0") if plan.settings.device == "cuda" else ""

    def emit(rec: CaseRecord) -> None:
        tally.add(rec)
        progress()

    times = tally.times.setdefault(plan.worker, WorkerTimes())
    in_flight = InFlight()
    at = plan.deadline + DEADLINE_GRACE_S
    done = threading.Event()
    if on_stuck is not None:
        def watch() -> None:
            if not done.wait(max(at + STUCK_AFTER_S - time.time(), 0.0)) and in_flight.draws:
                tally.abandon(plan, soak, in_flight.draws, time.time() - in_flight.since, plan.worker)
                on_stuck()

        threading.Thread(target=watch, name="remap-ab-soak-watchdog", daemon=True).start()
    try:
        with _alarm(at):
            run_worker(plan, soak, emit, lambda: interrupted.asked, times=times, in_flight=in_flight)
    except DeadlinePassed:
        tally.abandon(plan, soak, in_flight.draws, time.time() - in_flight.since, plan.worker)
    except KeyboardInterrupt:
        pass  # the second Ctrl-C: the case in flight is abandoned, the summary follows
    except ProcessUnusable as exc:
        # One process, one CUDA context: nothing more can run in it.
        tally.add(CaseRecord(plan.worker, "-", {}, "crash", 0.0, line=f"soak stopped: {exc}"))
        progress()
    finally:
        done.set()


@dataclass(frozen=True)
class _Held:
    """A draw as a pool task carries it: its case, and the plan's judge beside its extra."""

    case_id: str
    config: Any
    extra: tuple


def run_pool(plan: WorkerPlan, soak: SoakPlan, envs: list, tally: Tally, interrupted: Interrupts,
             progress: Callable[[], None], case_timeout: float) -> None:
    """Several workers on pool.py: this process draws (``plan``'s stream) and hands the
    cases out in batches (those with an extra in batches of their own), compiling ahead
    here when ``plan.compile_workers``; each worker judges and records its batch; a
    worker that dies is replaced and the cases it held become crash records (pool.py)."""
    start = time.time()
    for w in range(len(envs)):
        tally.started[w] = start
    subject = subjects.get(plan.subject)
    stream = soak.draws(soak_random(plan.seed, plan.worker))
    ahead = None
    if plan.settings.device == "cuda" and plan.compile_workers:
        ahead = precompile.Ahead(plan.settings.a, plan.settings.b, precompile.device_target(), plan.compile_workers)

    total = WorkerTimes(counted=plan.settings.device == "cuda" and _has_listener(), interpreter=plan.settings.device != "cuda")
    held: dict = {}  # case id -> the draw, handed out and not yet recorded
    window: list = []
    drawn = [0]
    settings = plan.settings

    def refill():
        if interrupted.asked or time.time() >= plan.deadline:
            return None
        room = LOOKAHEAD - len(window)
        if plan.max_cases is not None:
            room = min(room, plan.max_cases - drawn[0])
        for _ in range(max(0, room)):
            d = next(stream)
            if ahead is not None:
                ahead.submit(d.config)
            window.append(d)
            drawn[0] += 1
        if not window:
            return None
        ready = [d for d in window if ahead is None or ahead.ready(d.config)]
        if not ready:
            t0 = time.perf_counter()
            assert ahead is not None
            ahead.wait_any(timeout=0.25)
            total.wait_s += time.perf_counter() - t0
            return []
        taken = {id(d) for d in ready}
        window[:] = [d for d in window if id(d) not in taken]
        for d in ready:
            held[d.case_id] = d
        return [[_Held(d.case_id, d.config, (soak.judge, getattr(d, "extra", None))) for d in batch]
                for _, batch in _batches(ready, plan.batch, subject.variant)]

    def on_rows(rows, wid, gpu, secs):
        tally.gpus[wid] = gpu
        total.run_s += secs.get(JUDGING, 0.0)
        total.compile_s += secs.get(TRITON_KEYS[0], 0.0)
        total.compiled += int(secs.get(TRITON_KEYS[1], 0))
        total.load_s += secs.get(TRITON_KEYS[2], 0.0)
        total.loaded += int(secs.get(TRITON_KEYS[3], 0))
        for row in rows:
            d = held.pop(str(row["case_id"]))
            tally.add(record(dataclasses.replace(plan, worker=wid), soak, d, row, 0.0))
        progress()

    def on_lost(point, message, status, wid, gpu):
        d = held.pop(point.case_id)
        row = subject.lost_row(d.config, settings, message, status)
        tally.add(record(dataclasses.replace(plan, worker=wid), soak, d, row, 0.0))
        progress()

    def on_abandoned(points, wid, seconds):
        draws = [held.pop(p.case_id) for p in points if p.case_id in held]
        tally.abandon(dataclasses.replace(plan, worker=wid), soak, draws, seconds, wid)

    pool = Pool(Job(plan.settings, plan.subject,
                    judge="remap_ab.soak.run:judge_batch"),
                envs, case_timeout, on_rows=on_rows, on_lost=on_lost,
                abandon_at=plan.deadline + DEADLINE_GRACE_S, on_abandoned=on_abandoned)
    try:
        pool.run(deque(), refill)
    except KeyboardInterrupt:
        pass  # the second Ctrl-C: the cases in flight are abandoned, the summary follows
    finally:
        if ahead is not None:
            total.ahead = ahead.summary()
            ahead.close()
        tally.times[0] = total

