"""Mutants as data, and the one kill loop of a declared subject.

A ``Mutant`` is a planted B (a callable, as the subject's implementations) with the check
that must kill it (a results row's ``check``: ``b-vs-oracle``, ``b-vs-a``, ``shape``,
``inputs_written``, ``aliased``, ``layout``, ``error``). ``kill_all`` judges the subject's
grid (as a CPU or GPU sweep selects it) with the mutant as B and the subject's A, in
this process, and judges B's side only (B's error, B's call findings, B's mismatches
against the oracle, or against A without one): A's own findings are no evidence about B.
It stops at the first case where B's side fails (the witness):

    killed     B's side failed the declared check there, and the real B's side passes there
    survived   B's side passed every case: the suite cannot see this bug
    broken     B's side failed another check first (the catalogue names the wrong check),
               or the real B's side fails the witness too (no control)

``from_edits`` declares mutants as edits of a kernel's source file, from a TOML catalogue.
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
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


def from_edits(catalogue: Path, source: Path, b_of: Callable[[ModuleType], Callable]) -> tuple[Mutant, ...]:
    """The mutants of ``catalogue``, a TOML file of ``[[mutant]]`` tables (``id``,
    ``killed_by``, ``description``, and ``[[mutant.edit]]`` tables: ``old``, text found
    exactly once in ``source``, and ``new``, the text put in its place). A mutant's B is
    ``b_of(module)``, ``module`` the edited source imported from a file of its own (Triton
    reads a kernel's source from its file), built on its first call. ValueError, here,
    naming an edit whose ``old`` is not exactly once in ``source``."""
    text = Path(source).read_text()
    entries = tomllib.loads(Path(catalogue).read_text())["mutant"]
    for entry in entries:
        for edit in entry["edit"]:
            if text.count(edit["old"]) != 1:
                raise ValueError(f"{catalogue}: mutant {entry['id']}: {edit['old']!r} occurs {text.count(edit['old'])} "
                                 f"times in {Path(source).name}, not once")

    def b(entry: dict) -> Callable:
        @cache
        def built() -> Callable:
            edited = text
            for edit in entry["edit"]:
                edited = edited.replace(edit["old"], edit["new"])
            folder = tempfile.mkdtemp(prefix="remap-ab-mutant-")
            atexit.register(shutil.rmtree, folder, True)
            path = Path(folder) / f"{Path(source).stem}_mutant_{entry['id']}.py"
            path.write_text(edited)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return b_of(module)
        return lambda **inputs: built()(**inputs)

    return tuple(Mutant(e["id"], b(e), e["killed_by"], e.get("description", "")) for e in entries)


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
    out = Kill(m.id, m.killed_by, Outcome.SURVIVED, detail=f"B's side passed all {len(points)} cases with the mutant as B")
    unjudged = 0  # cases where A raised and B did not: nothing of B's compared
    for p in points:
        judged = subject.judge_case(p.config, a, m.b, device)
        status, check, line = judged.verdict("b")
        if status == Status.PASS:
            unjudged += bool(judged.error)
            continue
        out.witness, out.check, out.detail = p.case_id, check, line
        if check != m.killed_by:
            out.verdict = Outcome.BROKEN
            out.detail = f"caught by {check}, not by the declared {m.killed_by}: {line}"
            break
        real = subject.judge_case(p.config, a, subject.resolve(subject.default_b), device).verdict("b")
        if real[0] != Status.PASS:
            out.verdict = Outcome.BROKEN
            out.detail = f"the real B ({subject.default_b}) fails the witness too, [{real[1]}] {real[2]}"
        else:
            out.verdict = Outcome.KILLED
        break
    if out.verdict == Outcome.SURVIVED and unjudged:
        out.detail = (f"B's side passed {len(points) - unjudged} of {len(points)} cases with the mutant as B; "
                      f"{unjudged} unjudged (A raised: nothing of B's compared)")
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
