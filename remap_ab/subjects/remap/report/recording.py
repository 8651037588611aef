"""What one judged case leaves in a run folder: its results row, and a report folder
when it did not pass and is among the first of its failure class (report_cap.py). The
batch runner (batch.py) only judges; this is where the sweep decides what to write. It
runs wherever the case ran (a worker process, or the sweep's own process with ``-j 0``),
so the tensors a report needs never cross a process boundary.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from remap_ab import report_cap
from remap_ab.status import Check, Status
from remap_ab.subject import JudgeSettings, judge_split
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.judge.compare import lost_verdict
from remap_ab.subjects.remap.judge.rejections import RejectionCase, is_task, judged, run_line
from remap_ab.subjects.remap.judge.runner import reference
from remap_ab.subjects.remap.report.failure_class import slot_key
from remap_ab.subjects.remap.report.report import write_case_report, write_crash_report, write_rejection_report


def outcome_row(o, report: str = "") -> dict:
    """A results-table row (without the grid labels the sweep adds) of a CaseOutcome."""
    v = o.verdict
    first = v.first
    return {
        "case_id": o.config.case_id,
        "status": Status(str(v.status)),
        "check": str(first.check) if first else "",
        "first_mismatch": v.first_line(),
        "mismatch_lanes": v.mismatch_lanes,
        "mismatch_rows": v.mismatch_rows,
        "order_differs": bool(v.order_differs),
        "order_differs_rows": v.order_differs_rows,
        "a_ms": "" if o.a_ms is None else round(o.a_ms, 4),
        "b_ms": "" if o.b_ms is None else round(o.b_ms, 4),
        "inputs_sha256": o.inputs_sha256,
        "report": report,
        "max_row_valid": o.max_row_valid,
        "backend": o.config.backend,
        "pattern": o.config.pattern,
        "backend_view": v.backend_view,
        "hazard_rows": v.hazard_rows,
    }


def record_outcomes(outcomes: list, folder: Optional[Path]) -> list[dict]:
    """One row per outcome; every case that did not pass gets a report under ``folder``."""

    rows = []
    for o in outcomes:
        report = ""
        if not o.verdict.passed and o.result is not None and folder is not None:
            report = write_case_report(o.result, folder, implementations=_implementations(o.result),
                                       inputs_generated=True).name  # run_batch generates every case's inputs
        rows.append(outcome_row(o, report))
    return rows


def judge_and_record(configs: list, settings: JudgeSettings, times=None, context=None) -> list[dict]:
    """Judge a batch of cases (CaseConfigs, and the sweep's rejection calls) with
    ``settings`` and record them: the rows for the results table. ``context``: as
    ``batch.run_batch``'s. ``settings.reports``: how many failing cases of each failure
    class get a report folder (report_cap.py: a count or ``all``; None: every one)."""
    a, b, device, folder, memcheck = settings.a, settings.b, settings.device, settings.folder, settings.memcheck

    calls = [c for c in configs if isinstance(c, RejectionCase)]
    cases = [c for c in configs if not isinstance(c, RejectionCase)]
    rows = []
    if cases:
        outcomes = run_batch(cases, a, b, device, times, memcheck=memcheck, call_checks=settings.call_checks,
                             context=context, keep=_keeper(folder, settings.reports))
        start = time.perf_counter()
        rows = record_outcomes(outcomes, Path(folder) if folder is not None else None)
        if times is not None:  # the report folders' time shows in the write phase
            times.seconds["write"] += time.perf_counter() - start
    return rows + [rejection_row(c, a, b, device, memcheck, folder) for c in calls]


class Judge:
    """Judges batches of cases as the sweep records them (``judge_and_record``): the
    one judge of the soak's workers and of the pytest grid.

    A batch that raises is judged again case by case, so that one bad case does not
    hide the others; a case that raises alone becomes ``on_crash(config, exc)``'s row,
    or raises where there is no ``on_crash``. ``raises``: exceptions that are no case's
    doing, raised as they come; ``before_split(exc, configs)`` may raise instead of the
    split (the soak's lost CUDA context). ``on_rows(rows)`` gets each judged batch's
    rows as they come (``batches`` counts them), also those of a split whose later case
    raises."""

    def __init__(self, settings: JudgeSettings, *, raises: tuple = (), before_split=None, on_crash=None, on_rows=None):
        self.settings = settings
        self.raises, self.before_split, self.on_crash, self.on_rows = raises, before_split, on_crash, on_rows
        self.batches = 0

    def judge(self, configs: list, context=None) -> list[tuple[dict, float]]:
        """``(row, seconds)`` for each of ``configs``, in order: a batch's seconds shared
        by its cases. ``context``: as ``batch.run_batch``'s. The split is ``subject.judge_split``'s."""
        if not configs:
            return []
        seconds: dict[int, float] = {}
        started = [0.0]

        def judged(batch: list) -> list:
            started[0] = time.perf_counter()
            rows = judge_and_record(batch, self.settings, context=context)
            self.batches += 1
            if self.on_rows is not None:
                self.on_rows(rows)
            each = (time.perf_counter() - started[0]) / len(batch)
            seconds.update((id(row), each) for row in rows)
            return rows

        def crashed(config, exc: Exception) -> dict:
            assert self.on_crash is not None
            row = self.on_crash(config, exc)
            seconds[id(row)] = time.perf_counter() - started[0]
            return row

        rows = judge_split(judged, configs, raises=self.raises, before_split=self.before_split,
                           on_crash=crashed if self.on_crash is not None else None)
        return [(row, seconds[id(row)]) for row in rows]


def _keeper(folder, reports):
    """``batch.run_batch``'s ``keep``: a failing case keeps what its report needs only
    when it will get one (a folder to write in, a free slot of its failure class)."""

    if folder is None:
        return lambda config, verdict: False
    slots = report_cap.slots(folder, reports)
    if slots is None:
        return None
    return lambda config, verdict: slots.claim_key(slot_key(config, _first_check(verdict)), config.case_id)


def _first_check(verdict) -> str:
    return str(verdict.first.check) if verdict.first else str(verdict.status)


def task_case(d: dict):
    """A pool task's case from its dict: a CaseConfig, or a rejection call."""

    return RejectionCase.from_dict(d) if is_task(d) else CaseConfig.from_dict(d)


def rejection_row(case, a: str, b: str, device: str, memcheck: bool = False, folder=None) -> dict:
    """The row of one rejection call (rejections.py), and its report folder under
    ``folder`` when it does not pass; ``rejected_by`` says which sides raised."""

    impl_a, impl_b = registry.get(a), registry.get(b)
    v, first, second = judged(case, impl_a, impl_b, device, memcheck)
    report = ""
    if not v.passed and folder is not None:
        report = write_rejection_report(case, v, impl_a, impl_b, folder, device).name
    return {
        "case_id": case.case_id, "status": v.status, "check": str(v.first.check) if v.first else "",
        "first_mismatch": v.first.line() if v.first else "", "mismatch_lanes": 0, "mismatch_rows": 0,
        "order_differs": False, "order_differs_rows": 0, "a_ms": "", "b_ms": "", "inputs_sha256": "",
        "report": report, "max_row_valid": "", "rejection": case.id,
        "rejected_by": ",".join(n for n, o in (("a", first), ("b", second)) if o.rejected),
    }


def lost_case_row(config, a: str, b: str, message: str, folder, device: str, status: Status, reports=None) -> dict:
    """The row (and report) of a case that produced no outcome: its worker died
    (``Status.CRASH``) or ran past --case-timeout (``Status.TIMEOUT``). ``reports``: as
    ``judge_and_record``'s (a crash or timeout is a failure class of its own)."""

    status = Status(status)

    if isinstance(config, RejectionCase):  # a rejection call that B accepted and crashed on, say
        try:
            report = _write_lost_call_report(config, a, b, message, folder, device, status).name
        except Exception:  # the row matters more than its report
            report = ""
        return _lost_row(config, status, f"{message}; replay: {run_line(config, a, b, device)}", report,
                         max_row_valid="", rejection=config.id)
    slots = report_cap.slots(folder, reports)
    report = ""
    if slots is None or slots.claim_key(slot_key(config, Check(status.value)), config.case_id):
        try:
            report = _write_lost_report(config, a, b, message, folder, device, status).name
        except Exception:  # the row matters more than its report
            report = ""
    return _lost_row(config, status, message, report, max_row_valid=reference_max_row_valid(config),
                     backend=config.backend, pattern=config.pattern, backend_view="", hazard_rows=0)


def _lost_row(config, status: Status, message: str, report: str, **extra) -> dict:
    """A results row of a case or call with no outcome: nothing compared, nothing timed."""
    return {
        "case_id": config.case_id, "status": status, "check": Check(status.value),
        "first_mismatch": f"[{status.value}] {message}",
        "mismatch_lanes": 0, "mismatch_rows": 0, "order_differs": False, "order_differs_rows": 0,
        "a_ms": "", "b_ms": "", "inputs_sha256": "", "report": report, **extra,
    }


def _write_lost_report(config, a, b, message, folder, device, status: Status) -> Path:
    # The registry knows where each implementation was imported from (a custom module's
    # folder goes into the replay hint); the report is handed that, never looks it up.
    return write_crash_report(config, registry.get(a), registry.get(b), message, folder, device, status=status)


def _write_lost_call_report(case, a, b, message, folder, device, status: Status) -> Path:
    verdict = lost_verdict(case.case_id, status, f"{a}/{b}", message)
    return write_rejection_report(case, verdict, registry.get(a), registry.get(b), folder, device)


def _implementations(result) -> tuple:
    return registry.get(result.a.name), registry.get(result.b.name)


def reference_max_row_valid(config) -> int | str:
    """The oracle's largest per-row valid count, from inputs regenerated on the CPU
    (they are a function of the configuration); '' if that fails."""
    try:
        counts = reference(config, generate_inputs(config, device="cpu")).counts
        return int(counts.max()) if counts.numel() else 0
    except Exception:
        return ""
