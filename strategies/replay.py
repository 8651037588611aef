"""What a failing property says: the case ID and the one command that replays it.

Under xdist a Hypothesis seed does not replay a worker's failure, but a case is its
configuration, so ``remap-ab run <options>`` rebuilds the exact tensors anywhere.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from remap_ab.subjects.remap.case.config import CaseConfig

REPORT_DIR_ENV = "REMAP_AB_REPORT_DIR"
DEFAULT_REPORT_DIR = os.path.join("reports", "failures")


def replay_command(config: CaseConfig, a: Any, b: Any, schedule: Optional[tuple[str, int]] = None) -> str:
    """The ``remap-ab run`` command line that reruns ``config`` through ``a`` and ``b``
    (names or loaded implementations: a revision's commit is pinned), under
    ``schedule`` = (policy, seed) when the failure needed one: the same line a report
    records (``remap_ab.subjects.remap.report.report.run_command``)."""
    from remap_ab.subjects.remap.report.report import run_command

    return run_command(config, a, b, schedule)


def _loaded(result) -> tuple[Any, Any]:
    """A and B as the registry loaded them: a revision's replay line pins its commit."""
    from remap_ab.subjects.remap.judge import registry
    return registry.get(result.a.name), registry.get(result.b.name)


def failure_message(result, headline: str, schedule: Optional[tuple[str, int]] = None, detail: str = "") -> str:
    """A failing property's message: what broke, the case, and how to replay it."""
    config = result.config
    lines = [
        f"{headline}",
        f"case {config.case_id}",
        f"replay: {replay_command(config, *_loaded(result), schedule)}",
    ]
    if detail:
        lines.append(detail)
    lines.append(result.verdict.describe())
    report = write_failure_report(result, schedule)
    if report:
        lines.append(f"report: {report}")
    return "\n".join(lines)


def write_failure_report(result, schedule: Optional[tuple[str, int]] = None) -> Optional[str]:
    """The hook where a failing case's report folder is written, once per failure.

    Only for the final, shrunk example: Hypothesis reruns it last with
    ``is_final`` set, and the many intermediate failures of shrinking write nothing.
    Uses ``remap_ab.subjects.remap.report.report.write_case_report(result, root)`` when that module exists
    (it is optional); returns the folder written, or None."""
    if not _is_final_example():
        return None
    try:
        from remap_ab.subjects.remap.report.report import write_case_report
    except ImportError:
        return None
    root = os.environ.get(REPORT_DIR_ENV, DEFAULT_REPORT_DIR)
    try:
        written = write_case_report(result, root, implementations=_loaded(result))
    except Exception as exc:  # a report is a convenience; the assertion is what counts
        return f"(not written: {type(exc).__name__}: {exc})"
    return str(written) if written is not None else root


def write_rejection_failure_report(case, verdict, a: str, b: str) -> Optional[str]:
    """``write_failure_report`` for a failing rejection call (rejections.py): its
    folder, whose replay makes this very call (its varied base case) again."""
    if not _is_final_example():
        return None
    from remap_ab.subjects.remap.judge import registry
    from remap_ab.subjects.remap.report.report import write_rejection_report

    root = os.environ.get(REPORT_DIR_ENV, DEFAULT_REPORT_DIR)
    try:
        return str(write_rejection_report(case, verdict, registry.get(a), registry.get(b), root))
    except Exception as exc:  # a report is a convenience; the assertion is what counts
        return f"(not written: {type(exc).__name__}: {exc})"


def _is_final_example() -> bool:
    try:
        from hypothesis.control import current_build_context

        return bool(current_build_context().is_final)
    except Exception:  # outside a Hypothesis test (a direct call): always final
        return True
