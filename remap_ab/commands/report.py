"""Summarise a finished (or interrupted) sweep run: verdict counts, failures grouped
by dimension, timings, and the failing cases with their first mismatch and report.

RUN is a run folder, a run name under --root, or "latest" (the default).
Exit status: 0 every case passed, 1 not, 2 missing or corrupt run.
"""

from __future__ import annotations

import json


def add_arguments(p):
    p.add_argument("run", nargs="?", default="latest", metavar="RUN", help="run folder or name (default: latest)")
    p.add_argument("--root", default="reports", help="folder holding the runs (default reports)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--show", type=int, default=20, metavar="N", help="list at most N failing cases (default 20)")


def main(args) -> int:
    from pathlib import Path

    from remap_ab.errors import ReportError
    from remap_ab.sweep import find_run, format_summary, summarise

    folder = find_run(args.root, args.run)
    s = summarise(folder)
    missing = [f["case_id"] for f in s["failures"] if f["report"] and not (Path(folder) / f["report"] / "verdict.json").is_file()]
    if missing:
        raise ReportError(f"run {folder}: the report of failing case {missing[0]} is missing ({len(missing)} missing)")
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        print(format_summary(s, show=args.show))
    return 0 if s["passed"] else 1
