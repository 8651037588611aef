"""What every property test does around its own assertion: run the case through the
two implementations under test, record its equivalence classes, and fail with the
case ID and the replay command.

The implementations are the pytest options ``--remap-a/--remap-b`` (env
``REMAP_AB_A/B``), never hard-coded: the mutant catalogue runs this suite with a
mutant on either side.
"""

from __future__ import annotations

from typing import Optional

from remap_ab import runtime
from remap_ab.interpreter.schedule import interpreter_schedule
from remap_ab.strategies import failure_message, record_classes
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.runner import CaseResult, run_case

Schedule = Optional[tuple[str, int]]


def on_interpreter() -> bool:
    """Kernels run in the Triton interpreter here (no CUDA device)."""
    return runtime.current() == "cpu"


def run(config: CaseConfig, impl_names: tuple[str, str], schedule: Schedule = None, record: bool = True) -> CaseResult:
    """The case through A and B (under ``schedule`` = (policy, seed) if given) and the
    oracle; its classes become Hypothesis events."""
    a, b = impl_names
    factory = None
    if schedule is not None:
        policy, seed = schedule
        factory = lambda: interpreter_schedule(policy, seed)  # noqa: E731
    result = run_case(config, a, b, schedule=factory)
    if record:
        record_classes(config, result)
    return result


def fail(result: CaseResult, headline: str, schedule: Schedule = None, detail: str = "") -> None:
    raise AssertionError(failure_message(result, headline, schedule, detail))


def assert_verdict_passes(result: CaseResult, schedule: Schedule = None) -> None:
    """SPEC §7 through the comparator: A and B each equal to the oracle where they
    must be, and admissible where the order may differ."""
    if not result.verdict.passed:
        first = result.verdict.first
        fail(result, f"{result.verdict.status.upper()}: {first.line() if first else 'no detail'}", schedule)
