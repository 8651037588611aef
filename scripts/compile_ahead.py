"""Compile-ahead alone (issue 41, part 3): every variant of a grid compiled by the
compile workers for a GPU target into an empty Triton cache, nothing judged beside
them; its one line, the workers' summed seconds and their CPU time. Runs on a machine
without a GPU too (the workers cross-compile for the target).

    python scripts/compile_ahead.py [GRID] [WORKERS] [--variants N] [--target 90]

GRID: pr, callers or models (default models); WORKERS: default as a run would take
(the host's cores less one). Sets TRITON_CACHE_DIR to a new empty folder.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", nargs="?", default="models")
    parser.add_argument("workers", nargs="?", type=int)
    parser.add_argument("--variants", type=int, help="only the first N variants, in the grid's order")
    parser.add_argument("--target", type=int, default=90, help="the CUDA architecture compiled for (90: H200)")
    args = parser.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")

    from remap_ab import subjects
    from remap_ab.host import tuning
    from remap_ab.processes import precompile
    from remap_ab.subjects.remap.grid import grid

    tuning.tune_this_process()  # workers from the fork server, as the command line starts them
    variant = subjects.get("remap").variant  # what Ahead compiles once, as a sweep's schedule keys it
    first: dict = {}
    for point in grid.load(args.grid).points():
        first.setdefault(variant(point.config), point.config)
    configs = list(first.values())[: args.variants]
    workers = args.workers or precompile.default_workers(1)
    began = time.perf_counter()
    ahead = precompile.Ahead("old", "new", precompile.Target("cuda", args.target, 32), workers)
    for config in configs:
        ahead.submit(config)
    while ahead.pending:
        ahead.wait_any(1.0)
        ahead.collect()
    wall = time.perf_counter() - began
    cpu = sum(_cpu_seconds(pid) for pid in ahead.pids)
    ahead.close()
    print(ahead.line())
    print(f"{len(configs)} variants of --grid {args.grid} on {workers} workers: {wall:.1f} s from the workers' start; "
          f"{ahead.worker_seconds:.1f} s of worker time; {cpu:.1f} s of CPU in the workers (all their threads, "
          f"their start included)")


def _cpu_seconds(pid: int) -> float:
    """A live process's user and system time, all threads (/proc; 0 where unreadable)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
