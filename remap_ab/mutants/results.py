"""What one kill check on one mutant found: a ``CheckResult`` whose status is an
``Outcome``: killed, survived, not run (with the reason in ``detail``), or broken when
the unmutated side fails too (a harness or kernel problem, never a kill). A subject's
checks (``remap_ab/subjects/NAME/mutants/``) each return one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from remap_ab.status import Outcome


@dataclass
class CheckResult:
    """One check on one mutant."""

    check: str
    status: Outcome
    seconds: float = 0.0
    killer: str = ""  # test node id or case id that failed first
    detail: str = ""  # first failure line, or why the check did not run
    examples: Optional[int] = None  # properties: valid examples of the killing test up to the kill; else: cases
    examples_total: Optional[int] = None  # examples (cases) run in the whole check up to the kill
    killers: list = field(default_factory=list)  # every failing test / case (all of them with --full)
    how: str = ""  # properties: "generated" or "regression @example"; else: the run that showed it

    @property
    def killed(self) -> bool:
        return self.status == Outcome.KILLED

    def kill(self, killer: str, detail: str, tried: int, entry: str = "", how: str = "") -> None:
        """One more failing case (``entry`` in ``killers``, default ``killer``); the
        first sets the status, ``killer``, ``detail``, ``how`` and the cases ``tried``."""
        self.killers.append(entry or killer)
        if self.status != Outcome.KILLED:
            self.status, self.killer, self.detail, self.how = Outcome.KILLED, killer, detail, how
            self.examples = self.examples_total = tried

    def done(self, start: float, total: int) -> CheckResult:
        """This result, timed from ``start``; a check without a kill ran ``total`` cases."""
        self.seconds = time.perf_counter() - start
        if self.status != Outcome.KILLED:
            self.examples_total = total
        return self


def not_run(check: str, why: str) -> CheckResult:
    return CheckResult(check, Outcome.NOT_RUN, detail=why)
