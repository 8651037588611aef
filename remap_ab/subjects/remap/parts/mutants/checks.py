"""The remap's kill checks that run in the worker process itself: the sweep subset,
the race check, the call checks, the memory check, the rejection calls and the speed
gate. (The property suite runs through pytest: ``remap_ab/mutants/properties.py``.)

Each returns a ``remap_ab.mutants.results.CheckResult``; ``run(name, ...)`` is the one
the worker (``remap_ab/mutants/worker.py``) calls.
"""

from __future__ import annotations

import functools
import time

from remap_ab.errors import RemapABError
from remap_ab.mutants.results import CheckResult, not_run
from remap_ab.speed import DEFAULT_FAIL_SLOWER, judge_speed
from remap_ab.status import Check, Outcome
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import nondet, registry, runner
from remap_ab.subjects.remap.judge.nondet import SideStreamLoad, characterise
from remap_ab.subjects.remap.judge.rejections import judged, load
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.parts.bench.pr_table import bench_cell
from remap_ab.subjects.remap.parts.mutants.catalogue import Mutant
from remap_ab.subjects.remap.parts.mutants.subset import RACE_RUNS, race_cases, sweep_subset

# The failures of the call checks (call.py): what the production contract adds to the values.
CALL_CHECKS = (Check.INPUTS_WRITTEN, Check.ALIASED, Check.LAYOUT, Check.SYNC, Check.STREAM, Check.GRAPH)


def run_sweep(m: Mutant, device: str, full: bool = False) -> CheckResult:
    """The sweep subset with the mutant on its side, in this process (the mutant's
    package must be importable). Stops at the first failing case unless ``full``."""

    a, b = m.sides
    start = time.perf_counter()
    res = CheckResult("sweep", Outcome.SURVIVED)
    cases = sweep_subset()
    for i, case in enumerate(cases, 1):
        v = run_case(case.config, a, b, device=device).verdict
        if v.passed:
            continue
        mine = [f for f in v.failures if f.impl == m.package]
        line = (mine or v.failures)[0].line()
        if not mine:
            line = "(the unmutated side failed: a harness bug) " + line
        res.kill(case.case_id, f"{case.label}: {line}", i)
        if not full:
            break
    return res.done(start, len(cases))


@functools.lru_cache(maxsize=1)
def side_stream_load():
    """The contending side stream (``nondet.SideStreamLoad``), made once per process:
    it holds three large matrices on the GPU."""

    return SideStreamLoad()


def _race_plans(device: str):
    """(condition, runs) pairs: the adversarial program orders on the CPU; a quiet
    device and a contending side stream on a GPU."""

    n = RACE_RUNS[device]
    if device == "cpu":
        return [("schedules", nondet.cpu_schedule_runs(n))]
    return [("quiet", nondet.gpu_runs("quiet", n)), ("contended", nondet.gpu_runs("contended", n, side_stream_load()))]


def run_race(m: Mutant, device: str, full: bool = False) -> CheckResult:
    """The race check: the witness case and a few multi-tile cases, each run
    ``RACE_RUNS`` times per condition (GPU: quiet and under a contending side stream;
    CPU: permuted program orders). Kills on any run whose output breaks the contract
    (judged against the oracle), on counts that vary between runs, and on an output
    that varies where the implementation promises column order (``nondet.judge``)."""

    start = time.perf_counter()
    res = CheckResult("race", Outcome.SURVIVED)
    mutant, original = registry.get(m.package), registry.get(m.original)
    configs = race_cases(m, device)
    plans = _race_plans(device)
    tried = 0
    for config in configs:
        inputs = generate_inputs(config, device=device)
        for condition, runs in plans:
            tried += 1
            status, why = characterise(mutant, config, inputs, runs, condition).judge()
            if status != "FAIL":
                continue
            # The real kernel under the same runs must pass, or the check is broken.
            o_status, o_why = characterise(original, config, inputs, runs, condition).judge()
            if o_status == "FAIL":
                res.status = Outcome.BROKEN
                res.detail = f"the real {m.original} kernel fails the race check too on {config.case_id} ({condition}): {o_why}"
                res.seconds = time.perf_counter() - start
                return res
            res.kill(config.case_id, f"{condition} x{len(runs)}: {why}", tried,
                     entry=f"{config.case_id}:{condition}", how=condition)
            if not full:
                return res.done(start, tried)
    return res.done(start, tried)


def run_call(m: Mutant, device: str) -> CheckResult:
    """The witness case through ``run_case`` with the production checks on: a failure
    of a call check (inputs written, aliasing; on CUDA sync, stream, graph) on the
    mutant's side is a kill; on the real kernel's side the check is broken."""

    start = time.perf_counter()
    config = m.witness_config()
    a, b = m.sides
    verdict = runner.run_case(config, a, b, device=device, production=device == "cuda").verdict
    found = [f for f in verdict.failures if f.check in CALL_CHECKS]
    return _witness_judged(m, "call", config, found, [f for f in found if f.impl == m.package], start)


def run_memcheck(m: Mutant, device: str) -> CheckResult:
    """The witness case through ``run_case(..., memcheck=True)``: a ``memcheck``
    failure of the mutant's side is a kill."""

    start = time.perf_counter()
    config = m.witness_config()
    a, b = m.sides
    try:
        verdict = runner.run_case(config, a, b, device=device, memcheck=True).verdict
    except RemapABError as exc:  # e.g. the sanitizer cannot run on this machine
        return not_run("memcheck", f"not run: memcheck unavailable ({exc})")
    found = [f for f in verdict.failures if f.check == Check.MEMCHECK]
    # Attributed by elimination: a finding that does not name the real kernel on the
    # other side is the mutant's (however memcheck labels the implementation).
    real_side = a if b == m.package else b
    return _witness_judged(m, "memcheck", config, found, [f for f in found if f.impl != real_side], start)


def _witness_judged(m: Mutant, check: str, config, found: list, mine: list, start: float) -> CheckResult:
    """A check of the witness case: killed by the mutant's own failure (``mine``);
    broken when only the real kernel fails it (``found`` without ``mine``)."""
    res = CheckResult(check, Outcome.SURVIVED, seconds=time.perf_counter() - start, examples_total=1)
    if found and not mine:
        res.status = Outcome.BROKEN
        res.detail = f"the real {m.original} kernel fails the {check} check on {config.case_id}: {found[0].line()}"
    elif mine:
        res.kill(config.case_id, mine[0].line(), 1)
    return res


# The speed check: the witness cell timed inside CUDA graphs as bench times it, with
# enough repeats for the gate's interval; the margin is the bench's default.
SPEED_CALLS, SPEED_REPEATS = 100, 20


def run_speed(m: Mutant, device: str) -> CheckResult:
    """The witness case as a bench cell, the real kernel as A and the mutant as B,
    under the speed gate (remap_ab/speed.py): B slower than A beyond noise is a kill.
    Speed is not judged on the CPU: there the check is not run, and says so."""
    if device != "cuda":
        return not_run("speed", "not run: speed is not judged on the CPU (the Triton interpreter's times say "
                                "nothing about a GPU's)")

    start = time.perf_counter()
    config = m.witness_config()
    res = CheckResult("speed", Outcome.SURVIVED, examples_total=1)
    cell = bench_cell(config, registry.get(m.original), registry.get(m.package), calls=SPEED_CALLS,
                      repeats=SPEED_REPEATS)
    if cell.status != "timed":
        res.status, res.detail = Outcome.BROKEN, f"the witness cell {config.case_id} was not timed: {cell.why}"
    else:
        j = judge_speed(cell.times["a"].samples, cell.times["b"].samples, fail_slower=DEFAULT_FAIL_SLOWER)
        res.detail = j.line(m.original, m.package)
        if j.slower:
            res.kill(config.case_id, res.detail, 1)
    res.seconds = time.perf_counter() - start
    return res


def run_rejects(m: Mutant, device: str, full: bool = False) -> CheckResult:
    """The sweep's rejection calls (rejections.toml) with the real kernel as A and the
    mutant as B, whichever kernel it was made from (A's rejections are the ones
    judged): a ``rejects`` failure of the mutant is a kill. Stops at the first unless
    ``full``."""

    start = time.perf_counter()
    res = CheckResult("rejects", Outcome.SURVIVED)
    real, mutant = registry.get(m.original), registry.get(m.package)
    calls = load()
    for i, case in enumerate(calls, 1):
        verdict = judged(case, real, mutant, device)[0]
        mine = [f for f in verdict.failures if f.impl == m.package]
        if not mine:
            continue
        res.kill(case.id, mine[0].line(), i)
        if not full:
            break
    return res.done(start, len(calls))


def run(name: str, m: Mutant, device: str, full: bool = False) -> CheckResult:
    """Check ``name`` (one of ``CHECKS`` but "properties") on mutant ``m``."""
    if name == "race":
        return run_race(m, device, full=full)
    if name == "memcheck":
        return run_memcheck(m, device)
    if name == "call":
        return run_call(m, device)
    if name == "rejects":
        return run_rejects(m, device, full=full)
    if name == "speed":
        return run_speed(m, device)
    return run_sweep(m, device, full=full)
