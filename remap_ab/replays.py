"""A replay run several times, and what its runs say together: any subject's replay
(``remap-ab replay --repeat N``) judges its case N times and hands the count here.

A case whose saved verdict failed is replayed ``DEFAULT_AFTER_FAILURE`` times unless
``--repeat`` says otherwise (once otherwise). Replaying the same code on the same
inputs, runs that disagree among themselves, or a saved failure that no run repeats,
are a nondeterministic failure: exit 1, never a pass read as "fixed". Where the code
replayed is not the code the verdict was saved for (another implementation named, a
file changed since), a run that passes is a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

DEFAULT_AFTER_FAILURE = 5  # runs of a replay whose saved verdict failed
REPEAT_HELP = (f"judge the case N times and count the runs that fail (default {DEFAULT_AFTER_FAILURE} when the "
               "saved verdict failed, else 1); a failure that not every run repeats is a nondeterministic failure, "
               "exit 1")


def runs_for(asked: Optional[int], saved_failed: Optional[bool]) -> int:
    """How many times to run: ``--repeat`` when given, else DEFAULT_AFTER_FAILURE after
    a saved failure, else 1."""
    if asked is not None:
        return asked
    return DEFAULT_AFTER_FAILURE if saved_failed else 1


@dataclass(frozen=True)
class Replays:
    """The runs of one replay: how many, how many did not pass, the saved verdict
    (None: none saved; True: it did not pass) and whether the code replayed is the code
    it was saved for."""

    runs: int
    failed: int
    saved_failed: Optional[bool]
    same_code: bool

    @property
    def nondeterministic(self) -> bool:
        if 0 < self.failed < self.runs:
            return True
        return bool(self.same_code and self.saved_failed and self.failed == 0)

    @property
    def status(self) -> int:
        """The exit status: 1 when a run failed or the failure is nondeterministic, else 0."""
        return 1 if self.failed or self.nondeterministic else 0

    def line(self) -> str:
        """One line: the count, and for a nondeterministic failure what it means."""
        count = f"{self.failed} of {self.runs} replay{'s' if self.runs != 1 else ''} failed"
        if not self.nondeterministic:
            return f"replays: {self.failed} of {self.runs} failed"
        saved = (", and the saved run failed on the same code and inputs" if self.same_code and self.saved_failed
                 else "")
        return (f"NONDETERMINISTIC FAILURE: {count}{saved}; the outcome varies from run to run "
                "(a race, or state kept between calls), which no single passing run shows fixed")
