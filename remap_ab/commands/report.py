"""Summarise a finished (or interrupted) sweep run: verdict counts, failures grouped
by dimension, timings, and the failing cases with their first mismatch and report.

RUN is a run folder, a run name under --root, or "latest" (the default).
Exit status: 0 every selected case ran and passed; 1 not (a failing case, or cases not
run yet: the summary says how many and prints the command that resumes the run);
2 a missing or corrupt run.
"""

from __future__ import annotations

import json

from remap_ab import options, subjects
from remap_ab.errors import ReportError
from remap_ab.sweep.run_folder import find_run
from remap_ab.sweep.summary import format_summary, summarise


def add_arguments(p):
    p.add_argument("run", nargs="?", default="latest", metavar="RUN", help="run folder or name (default: latest)")
    options.add_root(p, "runs")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--show", type=options.non_negative_int, default=20, metavar="N",
                   help="list at most N failing cases (default 20)")


def main(args) -> int:
    from pathlib import Path


    # Read only: a read-only --root is fine here; a file is not (find_run says so).
    folder = find_run(args.root, args.run)
    s = summarise(folder)
    opened = subjects.get(s["subject"]).summary_lines(s).report_file  # what a person opens in a report folder
    missing = [f["case_id"] for f in s["failures"] if f["report"] and not (Path(folder) / f["report"] / opened).is_file()]
    if missing:
        raise ReportError(f"run {folder}: the report of failing case {missing[0]} is missing ({len(missing)} missing)")
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        print(format_summary(s, show=args.show))
    return 0 if s["passed"] else 1
