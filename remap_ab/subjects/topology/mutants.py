"""The fused kernel's seeded mutants (mutants.toml): each is fused.py with its
edits, built as a module of its own whose entry point the checks call like B's.

``kill`` is one mutant's row of ``remap-ab mutants --subject topology``: its witness
case judged by the subject's judge with the mutant as B (what `remap-ab sweep --subject
topology --b MUTANT.py --filter case=ID` runs), after the same case passed with the real
kernel as B; a rejection mutant gets its rejection call instead. A ``needs_gpu`` mutant
is not run on the CPU (verdict "needs a GPU", never a kill); on a GPU a witness that the
judge passes is repeated ``GPU_REPEATS`` times against A, as a race may show in few runs.

A mutant with a ``schedule`` (``relaxed_stores``: remap_ab/interpreter/barriers.py, a
program's stores between barriers landed last-issued first, as racing threads may) is
killed by its witness run under that schedule on the CPU interpreter, after the real
kernel gave A's output under the same schedule (check "schedule"): in this process on
the CPU, in a CPU child process (``python -m remap_ab.subjects.topology.mutants``) where
this one runs CUDA, whose Triton cannot interpret.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Optional

from remap_ab import subjects
from remap_ab.errors import exception_line
from remap_ab.status import Outcome, Status
from remap_ab.subject import JudgeSettings
from remap_ab.subjects.topology import calls, rejections
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import generate

MUTANTS_FILE = Path(__file__).with_name("mutants.toml")
TARGET = Path(__file__).resolve().parents[3] / "kernels_topology" / "fused.py"
CAUGHT_BY = ("output", "rejection")
SCHEDULES = ("relaxed_stores",)  # program schedules a mutant's witness may run under (the CPU interpreter's)
GPU_REPEATS = 50  # a race may show in few runs: a needs_gpu witness the judge passes runs this often


@dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    caught_by: str
    edits: tuple[tuple[str, str], ...]
    witness_case: Optional[TopologyCase]  # caught_by == "output"
    witness_rejection: Optional[str]  # caught_by == "rejection"
    needs_gpu: Optional[str] = None
    schedule: Optional[str] = None  # SCHEDULES: the witness runs under it (see the module docstring)
    schedule_why: Optional[str] = None  # why only that schedule shows the bug

    @property
    def module_name(self) -> str:
        return f"topology_mutant_{self.id}"


@cache
def mutants() -> tuple[Mutant, ...]:
    data = tomllib.loads(MUTANTS_FILE.read_text())
    out = []
    for entry in data["mutant"]:
        if entry["caught_by"] not in CAUGHT_BY:
            raise ValueError(f"mutant {entry['id']}: caught_by must be one of {CAUGHT_BY}, got {entry['caught_by']!r}")
        witness = dict(entry["witness"])
        rejection = witness.pop("rejection", None)
        if entry.get("schedule") is not None and entry["schedule"] not in SCHEDULES:
            raise ValueError(f"mutant {entry['id']}: schedule must be one of {SCHEDULES}, got {entry['schedule']!r}")
        out.append(
            Mutant(
                id=entry["id"],
                description=entry["description"],
                caught_by=entry["caught_by"],
                edits=tuple((e["old"], e["new"]) for e in entry["edit"]),
                witness_case=TopologyCase(**witness) if rejection is None else None,
                witness_rejection=rejection,
                needs_gpu=entry.get("needs_gpu"),
                schedule=entry.get("schedule"),
                schedule_why=entry.get("schedule_why"),
            )
        )
    return tuple(out)


def mutated_source(mutant: Mutant, source: Optional[str] = None) -> str:
    """fused.py with the mutant's edits; each edit's ``old`` must occur exactly once."""
    text = TARGET.read_text() if source is None else source
    for old, new in mutant.edits:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"mutant {mutant.id}: the edit's old text occurs {found} times in {TARGET.name}, not once: {old.strip()!r}")
        text = text.replace(old, new)
    return text


def write(mutant: Mutant, folder: Path) -> Path:
    """The mutant's file in ``folder`` (Triton reads a kernel's source from its file)."""
    path = Path(folder) / f"{mutant.module_name}.py"
    path.write_text(mutated_source(mutant))
    return path


def materialize(mutant: Mutant, folder: Path) -> ModuleType:
    """Write the mutant into ``folder`` and import it under its own name."""
    path = write(mutant, folder)
    spec = importlib.util.spec_from_file_location(mutant.module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mutant.module_name] = module
    spec.loader.exec_module(module)
    return module


def select(ids: Sequence[str] = ()) -> tuple[Mutant, ...]:
    """The mutants named (all when none, in catalogue order); ValueError naming an unknown id."""
    every = mutants()
    known = {m.id for m in every}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"no topology mutant {unknown[0]!r}; the catalogue ({MUTANTS_FILE.name}) has "
                         f"{', '.join(sorted(known))}")
    return tuple(m for m in every if not ids or m.id in ids)


@dataclass
class Kill:
    """One mutant's row of the kill matrix."""

    id: str
    description: str
    caught_by: str
    witness: str  # the witness case's key, or the rejection's id
    verdict: Outcome
    check: str  # what decided it: "judge", "repeats" (a needs_gpu witness rerun on a GPU), "schedule" or "rejection"
    detail: str  # the judge's verdict line, what was not run and why, or what broke
    seconds: float = 0.0
    needs_gpu: Optional[str] = None
    file: str = ""  # the mutant's source file (gone after the run unless kept)


def _judge(case: TopologyCase, b: Optional[str], device: str) -> dict:
    """The subject's row for ``case`` with ``b`` as B (None: the real kernel), the subject's A as A."""
    subject = subjects.get("topology")
    settings = JudgeSettings(a=subject.default_a, b=b or subject.default_b, device=device, folder=None)
    return subject.judge([case], settings, None)[0]


def _verdict_line(row: dict) -> str:
    return f"{row['status']} {row['check']}: {row['first_mismatch']}".strip()


def _properties(row: dict) -> set[str]:
    return set(str(row.get("properties_failed") or "").split())


def _control_problem(row: dict) -> Optional[str]:
    """What makes the real kernel's row unfit as a control: a side differing from the
    oracle, or an error. A finding on a property alone is the property's (shared by A
    and B; uncovered_run_pr does not hold), so it stays, and a mutant must add to it."""
    if row["mismatches"] or row["status"] not in (Status.PASS.value, Status.FAIL.value) or row["check"] == "a-vs-b":
        return _verdict_line(row)
    return None


def _blames_b(judged: dict, control: dict) -> Optional[str]:
    """Why the judge fails the mutant as B where it passed the real kernel (None: it does
    not): B differs from the oracle or from A, B raised, or a property the real kernel's
    row holds fails."""
    if any(token.startswith("b:") for token in str(judged["mismatches"]).split()) or judged["check"] == "a-vs-b":
        return _verdict_line(judged)
    if judged["status"] not in (Status.PASS.value, Status.FAIL.value):
        return _verdict_line(judged)  # B raised (A is the real one, and passed the control)
    new = sorted(_properties(judged) - _properties(control))
    if new:
        return f"{_verdict_line(judged)} (properties failing only with the mutant: {', '.join(new)})"
    return None


def _repeated(mutant_module: ModuleType, case: TopologyCase, device: str, repeats: int) -> Optional[str]:
    """The first of ``repeats`` runs of the mutant whose result differs from A's on the
    witness (A equals the oracle there: the control judged it), else None."""
    inputs = generate(case, device)
    want = calls.call("a", inputs, case)
    for run in range(repeats):
        mismatch = calls.first_mismatch("merged", calls.call_module(mutant_module, inputs, case), want)
        if mismatch is not None:
            return f"run {run + 1} of {repeats} differs from A: {mismatch.describe('mutant', 'A')}"
    return None


def kill(mutant: Mutant, device: str, folder: Path, *, repeats: int = GPU_REPEATS,
         controls: Optional[dict] = None) -> Kill:
    """Judge ``mutant`` on its witness on ``device`` (its file written into ``folder``).
    ``controls``: the real kernel's rows by case, shared between mutants of one run."""
    start = time.perf_counter()
    witness = mutant.witness_case.key() if mutant.witness_case is not None else str(mutant.witness_rejection)
    row = Kill(mutant.id, mutant.description, mutant.caught_by, witness, Outcome.NOT_RUN,
               "rejection" if mutant.caught_by == "rejection" else "judge", "", needs_gpu=mutant.needs_gpu)
    try:
        if mutant.needs_gpu and device != "cuda":
            row.verdict, row.detail = Outcome.NEEDS_GPU, f"not run on {device}: {mutant.needs_gpu}"
            return row
        path = write(mutant, folder)
        row.file = str(path)
        _decide(mutant, row, str(path), device, repeats, {} if controls is None else controls)
    except Exception as exc:  # whatever breaks while judging one mutant is its row, not the run's end
        row.verdict, row.detail = Outcome.BROKEN, f"remap-ab raised {exception_line(exc)}"
    finally:
        row.seconds = time.perf_counter() - start
    return row


def _decide(mutant: Mutant, row: Kill, path: str, device: str, repeats: int, controls: dict) -> None:
    if mutant.caught_by == "rejection":
        rejection = {r.id: r for r in rejections.rejections()}[str(mutant.witness_rejection)]
        real = rejections.check(calls.module("b"), rejection, device)
        if real is not None:
            row.verdict, row.detail = Outcome.BROKEN, f"the real kernel fails its rejection call: {real}"
            return
        problem = rejections.check(calls.resolve(path, "b").module, rejection, device)
        row.verdict, row.detail = (Outcome.KILLED, problem) if problem else (
            Outcome.SURVIVED, f"{rejection.id}: rejected as declared")
        return
    case = mutant.witness_case
    assert case is not None  # caught_by "output" carries its witness case (mutants())
    key = (case, device)
    if key not in controls:
        controls[key] = _judge(case, None, device)
    control = controls[key]
    unfit = _control_problem(control)
    if unfit:
        row.verdict, row.detail = Outcome.BROKEN, f"the real kernel fails its witness case: {unfit}"
        return
    judged = _judge(case, path, device)
    blamed = _blames_b(judged, control)
    if blamed:
        row.verdict, row.detail = Outcome.KILLED, blamed
        return
    if mutant.schedule:
        row.check = "schedule"
        verdict, detail = (_scheduled(mutant.schedule, path, case) if device == "cpu"
                           else _scheduled_in_a_cpu_child(mutant.schedule, path, case))
        row.verdict, row.detail = Outcome(verdict), detail
        return
    if mutant.needs_gpu:
        row.check = "repeats"
        differs = _repeated(calls.resolve(path, "b").module, case, device, repeats)
        row.verdict, row.detail = (Outcome.KILLED, differs) if differs else (
            Outcome.NO_WITNESS, f"the judge passes it and {repeats} more runs of its witness equal A's "
                                f"(possibly equivalent on this GPU: {mutant.needs_gpu})")
        return
    row.verdict, row.detail = Outcome.SURVIVED, "the judge passes it on its witness case"


def _scheduled(schedule: str, path: str, case: TopologyCase) -> tuple[str, str]:
    """(verdict, detail) of the mutant at ``path`` on ``case`` under ``schedule``, on the
    CPU interpreter: BROKEN if the real kernel differs from A there, KILLED if the
    mutant does, else SURVIVED."""
    from remap_ab.interpreter.barriers import relaxed_stores  # the interpreter's, only for a scheduled witness

    assert schedule == "relaxed_stores"
    inputs = generate(case, "cpu")
    want = calls.call("a", inputs, case)
    with relaxed_stores():
        real = calls.call_module(calls.module("b"), inputs, case)
        mutated = calls.call_module(calls.resolve(path, "b").module, inputs, case)
    where = "under relaxed stores (each program's stores between barriers landed last-issued first)"
    unfit = calls.first_mismatch("merged", real, want)
    if unfit is not None:
        return Outcome.BROKEN.value, f"the real kernel differs from A {where}: {unfit.describe('real', 'A')}"
    differs = calls.first_mismatch("merged", mutated, want)
    if differs is None:
        return Outcome.SURVIVED.value, f"the judge passes it, and {where} it still equals A"
    return Outcome.KILLED.value, (f"{where} it differs from A, where the real kernel equals A: "
                                  f"{differs.describe('mutant', 'A')}")


def _scheduled_in_a_cpu_child(schedule: str, path: str, case: TopologyCase) -> tuple[str, str]:
    """``_scheduled`` in a child process on the CPU interpreter (this one runs CUDA)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join([str(TARGET.parents[1])] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        proc = subprocess.run([sys.executable, "-m", __name__, schedule, path, case.to_json()], env=env,
                              capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return Outcome.BROKEN.value, f"the CPU child process gave no verdict ({exception_line(exc)})"
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        return str(found["verdict"]), f"in a CPU child process: {found['detail']}"
    except (json.JSONDecodeError, IndexError, KeyError):
        said = (proc.stderr.strip().splitlines() or ["nothing on stderr"])[-1][:300]
        return Outcome.BROKEN.value, f"the CPU child process gave no verdict (exit {proc.returncode}: {said})"


def kill_all(selected: Sequence[Mutant], device: str, folder: Path, *, repeats: int = GPU_REPEATS,
             progress: Optional[Callable[[Kill], None]] = None) -> list[Kill]:
    """``kill`` for each mutant in order, the real kernel's control run once per witness case."""
    controls: dict = {}
    out = []
    for m in selected:
        out.append(kill(m, device, folder, repeats=repeats, controls=controls))
        if progress is not None:
            progress(out[-1])
    return out


if __name__ == "__main__":  # a scheduled witness in a CPU child (_scheduled_in_a_cpu_child)
    from remap_ab import runtime
    from remap_ab.host import tuning

    tuning.tune_this_process()  # a process remap-ab started: the CPU command line's interpreter
    runtime.select("cpu")
    verdict, detail = _scheduled(sys.argv[1], sys.argv[2], TopologyCase.from_json(sys.argv[3]))
    print(json.dumps({"verdict": verdict, "detail": detail}))
