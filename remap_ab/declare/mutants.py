"""Mutants as data, and the one kill loop of a declared subject.

A ``Mutant`` is a planted B (a callable, as the subject's implementations) with the check
that must kill it (a results row's ``check``: ``b-vs-oracle``, ``b-vs-a``, ``shape``,
``inputs_written``, ``aliased``, ``layout``, ``error``). ``kill_all`` judges the subject's
grid (as a CPU or GPU sweep selects it) with the mutant as B and the subject's A, in
this process, stopping at the first case whose verdict names the declared check:

    killed     the declared check failed on a case (its witness)
    survived   every case passed: the suite cannot see this bug
    broken     another check caught it first (the catalogue names the wrong check), or
               the real B does not pass the witness (no control)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from remap_ab.status import Outcome, Status


@dataclass(frozen=True)
class Mutant:
    id: str
    b: Callable
    killed_by: str  # the check whose failure kills it
    description: str = ""


@dataclass
class Kill:
    """One mutant's line of the kill matrix."""

    id: str
    caught_by: str  # the declared check
    verdict: Outcome
    witness: str = ""  # the case ID that killed it
    check: str = ""  # the check that failed there
    detail: str = ""
    seconds: float = 0.0


def select(subject: Any, ids: Sequence[str] = ()) -> list[Mutant]:
    """The subject's mutants, or those of ``ids`` (ValueError naming an unknown one)."""
    known = {m.id: m for m in subject.mutants}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"--only {unknown[0]}: {subject.name} has no such mutant; it has {', '.join(known) or 'none'}")
    return [known[i] for i in ids] if ids else list(subject.mutants)


def kill(subject: Any, m: Mutant, points: list, device: str) -> Kill:
    start = time.perf_counter()
    a = subject.resolve(subject.default_a)
    out = Kill(m.id, m.killed_by, Outcome.SURVIVED, detail=f"{len(points)} cases passed with the mutant as B")
    for p in points:
        judged = subject.judge_case(p.config, a, m.b, device)
        status, check, line = judged.verdict()
        if status == Status.PASS:
            continue
        out.witness, out.check, out.detail = p.case_id, check, line
        if check != m.killed_by:
            out.verdict = Outcome.BROKEN
            out.detail = f"caught by {check}, not by the declared {m.killed_by}: {line}"
            break
        control = subject.row(p.config, subject.judge_case(p.config, a, subject.resolve(subject.default_b), device))
        if control["status"] != Status.PASS:
            out.verdict = Outcome.BROKEN
            out.detail = f"the real B ({subject.default_b}) does not pass the witness either: {control['first_mismatch']}"
        else:
            out.verdict = Outcome.KILLED
        break
    out.seconds = time.perf_counter() - start
    return out


def kill_all(subject: Any, selected: Sequence[Mutant], device: str,
             progress: Optional[Callable[[Kill], None]] = None) -> list[Kill]:
    """Each mutant's ``Kill``, in order, over the grid a sweep on ``device`` runs."""
    points = subject.grid.select([], None, device)[0]
    out = []
    for m in selected:
        k = kill(subject, m, points, device)
        out.append(k)
        if progress is not None:
            progress(k)
    return out


FAILING = (Outcome.SURVIVED, Outcome.BROKEN)
