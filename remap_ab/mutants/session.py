"""A mutant run: which checks each mutant gets, one worker process per mutant, ``jobs``
at a time, and each mutant's verdict. The mutants and their checks are a subject's
part (``part``: its ``mutants`` package, e.g. ``remap_ab/subjects/remap/parts/mutants/``);
a mutant here is any value with the fields ``Mutant`` names below.

What runs, by default (``--full`` runs every check on every mutant):
- every mutant: the witness search, then the suite's checks, the sweep subset and the
  property suite;
- a mutant labelled ``needs_gpu``: on a GPU, the race check, then (only if it did not
  kill; the worker decides) the suite's checks; on the CPU only the race check (the
  permuted program orders are the CPU's only way to show a race; the suite's checks
  are "not run" and say why);
- a mutant with ``observable = "memcheck"``: the memory check of its witness case
  (it changes no output, so the output checks are "not run");
- a mutant with ``observable = "rejection"``: the rejection calls (rejections.toml),
  real kernel as A, mutant as B (it changes no valid case's output);
- a mutant with ``observable = "speed"``: the speed gate on its witness cell (GPU only;
  on the CPU "not run", and the mutant "needs a GPU");
- ``memcheck=True``: the memory check on every mutant too.
A check that was not run is ``not run`` with its reason: never a kill, never a survival.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from remap_ab.errors import MutantError
from remap_ab.host import gpus
from remap_ab.mutants.properties import summarize_probe
from remap_ab.mutants.results import CheckResult, not_run
from remap_ab.status import Outcome

# The kill matrix's checks, in its columns' order of results.
CHECKS = ("sweep", "properties", "race", "memcheck", "call", "rejects", "speed")


# A subject's mutant, as the session reads it: ``id``, ``target``, ``area``,
# ``description``, ``equivalent`` and ``needs_gpu`` (None or why), ``observable``.
Mutant = Any

# A mutant's verdict: these fail the run (exit 1); every other one does not.
FAILING = (Outcome.SURVIVED, Outcome.NO_WITNESS, Outcome.BROKEN)


@dataclass(frozen=True)
class MutantSettings:
    """How a kill loop runs, made once from the command line (commands/mutants.py) and
    handed whole to each mutant's plan and run."""

    device: str  # cpu or cuda
    jobs: int = 1  # mutants at a time, each in its own process
    full: bool = False  # every check to the end (else each stops at its first kill)
    props: bool = True
    sweep: bool = True
    race: bool = False
    memcheck: bool = False
    timeout: float = 600.0  # seconds for one mutant's worker
    keep: Optional[Path] = None  # where the mutant packages are generated and kept (None: a temporary folder)


@dataclass(frozen=True)
class Plan:
    """Which checks run on a mutant, and why each other one does not."""

    run: tuple
    skipped: dict  # check -> why it is not run


def plan(m: Mutant, settings: MutantSettings) -> Plan:
    device, full, race, memcheck = settings.device, settings.full, settings.race, settings.memcheck
    if m.equivalent:
        return Plan((), {c: "declared equivalent: nothing to kill" for c in CHECKS})
    wanted = {"sweep": settings.sweep, "properties": settings.props, "race": race or full, "memcheck": memcheck or full,
              "call": full or m.observable == "call", "rejects": full or m.observable == "rejection",
              "speed": full or m.observable == "speed"}
    skipped: dict = {}
    if m.needs_gpu:
        wanted["race"] = True
        if device == "cpu" and not full:
            for c in ("sweep", "properties"):
                if wanted[c]:
                    skipped[c] = "needs a GPU: a sequential run cannot show this bug (--full runs it anyway)"
                    wanted[c] = False
    if m.observable == "memcheck":
        wanted["memcheck"] = True
        if not full:
            for c in ("sweep", "properties", "race"):
                if wanted[c]:
                    skipped[c] = "outputs unchanged by design: only a memory check sees this bug"
                    wanted[c] = False
    if m.observable == "call" and not full:
        for c in ("sweep", "properties", "race"):
            if wanted[c]:
                skipped[c] = "outputs unchanged by design: only the call checks see this bug"
                wanted[c] = False
    if m.observable == "speed" and not full:
        for c in ("sweep", "properties", "race"):
            if wanted[c]:
                skipped[c] = "outputs unchanged by design: only the speed gate on a GPU sees this bug"
                wanted[c] = False
    if m.observable == "rejection" and not full:
        for c in ("sweep", "properties", "race"):
            if wanted[c]:
                skipped[c] = "valid cases unchanged by design: only a call SPEC §6 rejects shows this bug"
                wanted[c] = False
    for c, on in wanted.items():
        if not on and c not in skipped:
            flag = {"sweep": "--no-sweep", "properties": "--no-props"}.get(c)
            skipped[c] = f"skipped ({flag})" if flag else (
                f"not requested (--{c} or --full runs it)" if c not in ("rejects", "call", "speed")
                else "not requested (--full runs it)")
    order = ("race", "call", "memcheck", "rejects", "speed", "sweep", "properties")
    return Plan(tuple(c for c in order if wanted[c]), skipped)


@dataclass
class MutantResult:
    id: str
    target: str
    area: str
    description: str
    equivalent: Optional[str]
    needs_gpu: Optional[str]
    observable: str
    device: str
    witness: Optional[dict]
    witness_tried: int
    checks: dict  # check name -> CheckResult as dict (every check, "not run" ones included)
    seconds: float
    error: Optional[str] = None
    notes: list = field(default_factory=list)

    def status_of(self, check: str) -> Optional[Outcome]:
        c = self.checks.get(check)
        return Outcome(c["status"]) if c else None

    @property
    def killed_by(self) -> list[str]:
        return [name for name in self.checks if self.status_of(name) == Outcome.KILLED]

    @property
    def verdict(self) -> Outcome:
        if self.error:
            return Outcome.BROKEN
        if self.equivalent:
            # A declared-equivalent mutant that changes an output is a catalogue bug.
            return Outcome.EQUIVALENT if self.witness is None else Outcome.BROKEN
        if self.observable in ("memcheck", "call", "speed") and self.witness is not None:
            return Outcome.BROKEN  # declared to change no output, but it does
        statuses = [self.status_of(c) for c in self.checks]
        killed = bool(self.killed_by)
        if not killed and (Outcome.BROKEN in statuses or Outcome.TIMEOUT in statuses):
            return Outcome.BROKEN  # a kill stands even if a later check ran out of time
        if self.observable in ("output", "rejection") and self.witness is None:
            # A race may not show on the one witness run; the race check's kill, with
            # the real kernel passing the same runs, shows the mutant is observable.
            if killed and self.needs_gpu and self.status_of("race") == Outcome.KILLED:
                return Outcome.KILLED
            if not killed and self.needs_gpu and self.device == "cpu":
                return Outcome.NEEDS_GPU
            return Outcome.NO_WITNESS
        if killed:
            return Outcome.KILLED
        if self.needs_gpu and self.device == "cpu":
            return Outcome.NEEDS_GPU
        if all(s == Outcome.NOT_RUN for s in statuses):
            return Outcome.NOT_RUN
        return Outcome.SURVIVED


def _child_env(root: Path, part: ModuleType, slot_env: dict) -> dict:
    import os

    env = dict(os.environ)
    paths = [str(root)] + [str(p) for p in part.import_roots()]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # -j mutants share the cores: one thread each.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, "1")
    env.update(slot_env)
    return env


def run_mutant(m: Mutant, root: Path, the_plan: Plan, part: ModuleType, settings: MutantSettings,
               slot_env: Optional[dict] = None) -> MutantResult:
    """Generate the mutant (``part.materialize``) and run its worker process; collect the results."""
    device, full, timeout = settings.device, settings.full, settings.timeout
    start = time.perf_counter()
    res = MutantResult(m.id, m.target, m.area, m.description, m.equivalent, m.needs_gpu, m.observable, device,
                       None, 0, {}, 0.0)
    for check, why in the_plan.skipped.items():
        res.checks[check] = asdict(not_run(check, why))
    try:
        part.materialize(m, root)
    except MutantError as exc:
        res.error = str(exc)
        return res
    out = Path(root) / f"{m.id}.worker.json"
    probe = Path(root) / f"{m.id}.probe.jsonl"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "remap_ab.mutants.worker", m.id, str(root), str(out), "--part", part.__name__,
           "--device", device,
           "--checks", ",".join(the_plan.run)] + (["--full"] if full else [])
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=_child_env(root, part, slot_env or {}), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    elapsed = time.perf_counter() - t0
    data: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"phase": "start"}
    res.witness, res.witness_tried = data.get("witness"), data.get("witness_tried", 0)
    for check in CHECKS:  # "properties" is here only when the worker left it out
        if check in data:
            res.checks[check] = data[check]
    phase = data["phase"]
    tail = " ".join(output.strip().splitlines()[-3:])[:300]
    if phase == "done":
        if "props_rc" in data:
            c = summarize_probe(probe, data["props_rc"], output)
            c.seconds = data["props_seconds"]
            res.checks["properties"] = asdict(c)
    elif phase == "properties" and (rc is None or rc < 0):
        if rc is None:
            c = CheckResult("properties", Outcome.TIMEOUT, detail=f"no verdict within the {timeout:.0f} s budget")
        else:
            c = summarize_probe(probe, rc, output)  # a crash inside the suite: a kill
        done = sum(v.get("seconds", 0.0) for k, v in data.items() if k in ("race", "call", "memcheck", "rejects", "speed", "sweep"))
        c.seconds = elapsed - data.get("witness_seconds", 0.0) - done
        res.checks["properties"] = asdict(c)
    else:
        why = "timeout" if rc is None else (f"signal {-rc}" if rc < 0 else f"exit {rc}")
        res.error = f"worker stopped in its {phase} phase ({why}, {elapsed:.0f} s): {tail}"
    for check in the_plan.run:  # a planned check the worker never reached
        res.checks.setdefault(check, asdict(not_run(check, "not reached: the worker stopped before it")))
    res.checks = {c: res.checks[c] for c in CHECKS if c in res.checks}
    if m.needs_gpu and device == "cpu" and res.killed_by:
        res.notes.append(f"labelled needs_gpu, yet killed on the CPU by {', '.join(res.killed_by)}: "
                         "the label may be stale")
    res.seconds = time.perf_counter() - start
    return res


def _slot_envs(jobs: int, device: str) -> list[dict]:
    """Per worker slot, the environment that pins it: one GPU each (round robin) on
    CUDA, no GPU and the interpreter on the CPU."""
    import os


    visible = gpus.visible_gpus(os.environ, gpus.count_gpus()) if device == "cuda" else []
    return gpus.worker_environments(jobs, device, visible)


def run_all(mutants: list, part: ModuleType, settings: MutantSettings, progress=None) -> list[MutantResult]:
    """Every mutant of ``part``, ``settings.jobs`` at a time (each in its own process); results in catalogue order."""
    jobs, keep = settings.jobs, settings.keep
    from concurrent.futures import ThreadPoolExecutor

    # Fail fast, before any process starts, if an edit no longer applies.
    for m in mutants:
        part.mutated_source(m)
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="remap-ab-mutants-"))
    root.mkdir(parents=True, exist_ok=True)
    slots: queue.Queue = queue.Queue()
    for env in _slot_envs(max(1, jobs), settings.device):
        slots.put(env)
    try:
        def one(m):
            env = slots.get()
            try:
                r = run_mutant(m, root, plan(m, settings), part, settings, slot_env=env)
            finally:
                slots.put(env)
            if progress:
                progress(r)
            return r

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, mutants))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
