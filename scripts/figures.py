"""Regenerate the figures of README.md and docs/performance.md on this machine.

    python scripts/figures.py                 # every job this device runs, once each
    python scripts/figures.py --only sweep,callers --repeat 3
    python scripts/figures.py --list          # the jobs, their commands, where each runs

Each job is one remap-ab command run as a user runs it (a fresh process, end to end);
where the command writes a run folder, its summary.json gives the in-process time and
the case count too. The table printed at the end (Markdown, with the machine it ran on)
is what docs/performance.md quotes. Jobs declare the devices they make sense on: the
in-process sweep and the speed gate need a GPU; the CPU sizes its workers to 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A B that fails every convert case (it writes its result into token_indices as well):
# the failing-run figures, the same module the tests measure with.
FAILING_MODULE = "writes_inputs"
FAILING_FOLDER = ROOT / "tests" / "impls"


@dataclass(frozen=True)
class Job:
    name: str
    what: str
    argv: tuple[str, ...]  # after `python -m remap_ab`
    cpu: tuple[str, ...] | None = ()  # extra arguments on the CPU; None: not run there
    gpu: tuple[str, ...] | None = ()  # likewise on a GPU
    run_folder: bool = True  # writes <root>/<run>/summary.json
    extra_env: dict = field(default_factory=dict)
    module: str = "remap_ab"  # what `python -m` runs


JOBS = (
    Job("sweep", "the main job: the 1728-case grid and the rejection calls", ("sweep",), cpu=("-j", "2")),
    Job("sweep-in-process", "the same, every case in one process", ("sweep", "-j", "0"), cpu=None),
    Job("sweep-quick", "`--max-tokens 3`: the quick look", ("sweep", "--max-tokens", "3"), cpu=("-j", "2")),
    Job("sweep-quick-failing", "the quick look with a B that fails every convert case",
        ("sweep", "--max-tokens", "3", "--b", FAILING_MODULE), cpu=("-j", "2"), gpu=("-j", "0")),
    Job("sweep-quick-passing-j0", "the quick look, passing, in one process (beside the failing one)",
        ("sweep", "--max-tokens", "3"), cpu=None, gpu=("-j", "0")),
    Job("callers", "the attention backends' calls (`--grid callers`)", ("sweep", "--grid", "callers"), cpu=("-j", "2")),
    Job("models", "the models' widths (`--grid models`)", ("sweep", "--grid", "models"), cpu=("-j", "2")),
    Job("soak", "one minute of fresh draws, passing", ("soak", "--minutes", "1", "--seed", "1"), run_folder=False),
    Job("soak-failing", "one minute of fresh draws, a B failing every convert case",
        ("soak", "--minutes", "1", "--seed", "1", "--b", FAILING_MODULE), run_folder=False),
    # The job each tweak speeds is the whole sweep: on the CPU a --max-tokens 3 one
    # understates heap (docs/performance.md).
    Job("tweaks", "each process tweak off alone against all on (kept only if it saves >= 10 %)",
        (), cpu=("--device", "cpu"), gpu=("--device", "cuda"), run_folder=False,
        module="remap_ab.subjects.remap.parts.bench.tweaks"),
)


def machine() -> str:
    import torch
    import triton

    where = f"{os.cpu_count()} CPU cores"
    if torch.cuda.is_available():
        where = f"{torch.cuda.get_device_name(0)}, {where}"
    return f"{where}; Python {platform.python_version()}, torch {torch.__version__}, Triton {triton.__version__}"


def _spread(xs: list) -> str:
    """The median, and the range where there are several runs."""
    if not xs:
        return "-"
    return f"{statistics.median(xs):.1f}" + (f" ({min(xs):.1f}-{max(xs):.1f})" if len(xs) > 1 else "")


def run_job(job: Job, device: str, workdir: Path, env: dict) -> dict:
    extra = job.gpu if device == "cuda" else job.cpu
    assert extra is not None
    run = f"{job.name}-{time.monotonic_ns()}"
    argv = [*job.argv, *extra, "--root", str(workdir)]
    if job.run_folder:
        argv += ["--run", run, "--no-progress"]
    cmd = [sys.executable, "-m", job.module, *argv]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**env, **job.extra_env}, capture_output=True, text=True)
    wall = time.perf_counter() - started
    row = {"job": job.name, "exit": proc.returncode, "wall_s": round(wall, 2),
           "command": ("remap-ab " if job.module == "remap_ab" else f"python -m {job.module} ")
           + shlex.join([*job.argv, *extra])}
    summary = workdir / run / "summary.json"
    if job.run_folder and summary.exists():
        s = json.loads(summary.read_text())
        row["cases"] = s.get("cases")
        row["in_process_s"] = round(s.get("wall_seconds", 0.0), 2)
    elif not job.run_folder:
        row["tail"] = proc.stdout.strip().splitlines()[-16:]
    if proc.returncode not in (0, 1):
        row["stderr"] = proc.stderr.strip().splitlines()[-3:]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated job names (default: every job this device runs)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each job (the table gives each run)")
    parser.add_argument("--list", action="store_true", help="list the jobs and exit")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    jobs = [j for j in JOBS if (j.gpu if device == "cuda" else j.cpu) is not None]
    if args.list:
        for j in JOBS:
            where = ", ".join(d for d, x in (("cpu", j.cpu), ("gpu", j.gpu)) if x is not None)
            runs = "remap-ab" if j.module == "remap_ab" else f"python -m {j.module}"
            print(f"{j.name:24} [{where}] {runs} {shlex.join(j.argv)}  - {j.what}")
        return 0
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {j.name for j in JOBS})
        if unknown:
            print(f"figures.py: no job named {', '.join(unknown)}; --list shows them", file=sys.stderr)
            return 2
        jobs = [j for j in jobs if j.name in wanted]
    workdir = Path(tempfile.mkdtemp(prefix="remap-ab-figures-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAILING_FOLDER), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    rows = []
    print(f"# figures on {machine()}", flush=True)
    try:
        for job in jobs:
            for _ in range(args.repeat):
                row = run_job(job, device, workdir, env)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n| job | command | exit | cases | wall end to end (s) | in-process (s) |\n|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["job"] for r in rows):
        mine = [r for r in rows if r["job"] == name]
        walls = [r["wall_s"] for r in mine]
        inproc = [r["in_process_s"] for r in mine if "in_process_s" in r]
        print(f"| {name} | `{mine[0]['command']}` | {','.join(str(r['exit']) for r in mine)} | {mine[0].get('cases', '-')} "
              f"| {_spread(walls)} | {_spread(inproc)} |")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
