"""The backend views of A vs B on the callers grid under permuted program schedules.

A sweep runs each case once in the interpreter's row-major program order, where the old
kernel's racy compaction order equals column order. This runs the callers grid's cases
(optionally filtered by batch) under CPU program schedules that reorder the tiles of a
row, and counts per backend: cases, cases whose compacted order differs between A and B
(allowed by the wrapper contract), cases whose *backend view* differs, failures, and
caller hazards (cases, rows).

    PYTHONPATH=$PWD python3 scripts/callers_views.py --batch decode-8 --schedule tiles_reversed:0 --schedule random:1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", default="old")
    p.add_argument("--b", default="new")
    p.add_argument("--batch", action="append", default=[], help="keep these batch labels (default: all)")
    p.add_argument("--schedule", action="append", default=[], metavar="POLICY:SEED",
                   help="program schedules to run each case under (default: tiles_reversed:0)")
    p.add_argument("--json", default=None, help="write the table here")
    args = p.parse_args(argv)

    from remap_ab import runtime

    runtime.select("cpu")
    from remap_ab.interpreter.schedule import interpreter_schedule
    from remap_ab.subjects.remap.grid import grid
    from remap_ab.subjects.remap.judge.runner import run_case

    points = grid.load("callers").points()
    if args.batch:
        points = [pt for pt in points if pt.label("batch") in args.batch]
    schedules = [(s.split(":")[0], int(s.split(":")[1])) for s in (args.schedule or ["tiles_reversed:0"])]
    table: dict = defaultdict(lambda: defaultdict(int))
    first_differs: dict = {}
    t0 = time.perf_counter()
    for policy, seed in schedules:
        for pt in points:
            c = pt.config
            r = run_case(c, args.a, args.b, schedule=lambda p=policy, s=seed: interpreter_schedule(p, s))
            v = r.verdict
            row = table[f"{c.caller.split(',')[0]} {c.pattern}"]
            row["cases"] += 1
            row["failed"] += int(not v.passed)
            row["order_differs"] += int(v.order_differs)
            row["order_differs_rows"] += v.order_differs_rows
            row["view_differs"] += int(v.backend_view == "differs")
            row["hazard_cases"] += int(v.hazard_rows > 0)
            row["hazard_rows"] += v.hazard_rows
            if not v.passed and pt.label("call") not in first_differs:
                first_differs[pt.label("call")] = v.first_line()
    seconds = time.perf_counter() - t0
    print(f"{len(points)} cases x {len(schedules)} schedules ({', '.join(f'{a}:{b}' for a, b in schedules)}) in {seconds:.1f} s")
    print(f"{'backend, pattern':<22} {'cases':>6} {'failed':>6} {'order differs (allowed)':>24} {'view differs':>12} "
          f"{'hazard cases':>12} {'hazard rows':>11}")
    for name, row in sorted(table.items()):
        print(f"{name:<22} {row['cases']:>6} {row['failed']:>6} {row['order_differs']:>10} cases {row['order_differs_rows']:>6} rows"
              f" {row['view_differs']:>12} {row['hazard_cases']:>12} {row['hazard_rows']:>11}")
    for call, line in first_differs.items():
        print(f"  first failure of {call}: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps({"schedules": schedules, "seconds": seconds, "cases": len(points),
                                               "table": table, "failures": first_differs}, indent=2) + "\n")
    return 1 if any(row["failed"] for row in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
