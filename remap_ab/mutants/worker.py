"""One mutant end to end, in its own process (an out-of-bounds access or a sticky CUDA
error in a mutant must not take the whole run down).

    python -m remap_ab.mutants.worker ID ROOT OUT --part MODULE --device cpu|cuda --checks race,sweep,properties [--full]

Internal: ``session.run_mutant`` starts it with ROOT (holding the generated mutant
package) on its path and MODULE the subject's mutants part (its ``get``,
``find_witness``, ``run_check``, ``suite_tests``). It chooses the backend, searches the
witness, runs the planned checks (the property suite last, through ``pytest.main``) and
rewrites OUT as JSON after each phase, so a crash still leaves the phases done.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from remap_ab import runtime
from remap_ab.host import tuning
from remap_ab.mutants import properties
from remap_ab.mutants.results import not_run
from remap_ab.status import Outcome

_SKIPPED_AFTER_KILL = "not run: killed by an earlier check already (fast mode; --full runs every check)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remap_ab.mutants.worker")
    p.add_argument("mutant_id")
    p.add_argument("root", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--part", required=True, help="the subject's mutants package (module name)")
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--checks", default="", help="comma-separated: race, call, memcheck, rejects, speed, sweep, properties")
    p.add_argument("--full", action="store_true")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    sys.path.insert(0, str(args.root))

    tuning.tune_this_process()
    runtime.select(args.device)

    part = importlib.import_module(args.part)
    m = part.get(args.mutant_id)
    planned = [c for c in args.checks.split(",") if c]
    result: dict = {"phase": "witness", "device": args.device}

    def save(phase: str) -> None:
        result["phase"] = phase
        args.out.write_text(json.dumps(result, default=str))

    save("witness")
    t0 = time.perf_counter()
    declared_only = m.observable in ("memcheck", "call", "speed") or bool(m.needs_gpu and args.device == "cpu")
    w, tried = part.find_witness(m, args.device, declared_only=declared_only)
    result.update(witness=asdict(w) if w else None, witness_tried=tried, witness_seconds=time.perf_counter() - t0)
    # A racy mutant on a GPU: once the race check has killed it, the suite's checks
    # (which can only kill it by a lucky race, at minutes per survivor under the gpu
    # profile) are left out in fast mode, and say so.
    stop_after_kill = bool(m.needs_gpu) and not args.full

    def killed_already() -> bool:
        return stop_after_kill and any(
            isinstance(v, dict) and v.get("status") == Outcome.KILLED.value for v in result.values())

    for name in ("race", "call", "memcheck", "rejects", "speed", "sweep"):
        if name not in planned:
            continue
        if killed_already():
            result[name] = asdict(not_run(name, _SKIPPED_AFTER_KILL))
            continue
        save(name)
        result[name] = asdict(part.run_check(name, m, args.device, full=args.full))
    if "properties" in planned and killed_already():
        result["properties"] = asdict(not_run("properties", _SKIPPED_AFTER_KILL))
    elif "properties" in planned:
        save("properties")
        import pytest

        probe = Path(args.root) / f"{m.id}.probe.jsonl"
        probe.unlink(missing_ok=True)
        os.environ.update(REMAP_AB_PROFILE=properties.PROFILE_FOR_DEVICE[args.device], REMAP_AB_A=m.sides[0],
                          REMAP_AB_B=m.sides[1], REMAP_AB_MUTANT_PROBE=str(probe))
        if not args.full:
            os.environ["REMAP_AB_MUTANT_NO_SHRINK"] = "1"
        t1 = time.perf_counter()
        sys.stdout.flush()
        rc = int(pytest.main(properties.pytest_args(part.suite_tests(m, args.full), args.root, args.full)))
        result.update(props_rc=rc, props_seconds=time.perf_counter() - t1)
    save("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
