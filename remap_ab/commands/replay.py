"""Re-run one case exactly: from a report folder's saved inputs (PATH), or by case ID
(the newest report of that case under --root, else the grid's configuration with
freshly generated inputs), and print the verdict beside the saved one.

Exit status: 0 the case passes now, 1 it fails, 2 bad input (missing or corrupt report).
"""

from __future__ import annotations

import re
from pathlib import Path


def add_arguments(p):
    p.add_argument("target", metavar="PATH-OR-CASE-ID", help="a report folder (or a file in it), or a 12-hex-digit case ID")
    p.add_argument("--a", default=None, help="implementation A (default: the report's)")
    p.add_argument("--b", default=None, help="implementation B (default: the report's)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default: cuda when present")
    p.add_argument("--root", default="reports", help="where to look for a case ID's report (default reports)")


def main(args) -> int:
    from remap_ab import backend
    from remap_ab import grid as gridmod
    from remap_ab.errors import ReportError
    from remap_ab.report import find_report, load_report
    from remap_ab.runner import run_case

    target = args.target
    report = None
    config = None
    if Path(target).exists():
        report = load_report(target)
    elif re.fullmatch(r"[0-9a-f]{12}", target):
        found = find_report(target, args.root)
        if found is not None:
            report = load_report(found)
        else:
            by_id = {p.case_id: p for p in gridmod.load().points()}
            if target not in by_id:
                raise ReportError(f"no report of case {target} under {args.root}/ and it is not a case of the grid")
            config = by_id[target].config
    else:
        raise ReportError(f"{target} is neither a report folder nor a case ID (12 hex digits)")

    a = args.a or (report.meta["a"]["name"] if report else "old")
    b = args.b or (report.meta["b"]["name"] if report else "new")
    device = backend.select(args.device)
    if report is not None:
        config = report.config
        source = f"saved inputs of {report.folder}"
        schedule = None
        if report.meta.get("schedule"):
            policy, seed = report.meta["schedule"]
            if device != "cpu":
                raise ReportError(f"report {report.folder} was produced under program schedule {policy}:{seed}; replay it with --device cpu")
            from remap_ab.schedule import interpreter_schedule

            schedule = lambda: interpreter_schedule(policy, int(seed))  # noqa: E731
            source += f", program schedule {policy}:{seed}"
        result = run_case(config, a, b, device=device, inputs=report.inputs, schedule=schedule)
    else:
        source = "the grid's configuration (inputs generated afresh)"
        result = run_case(config, a, b, device=device)
    v = result.verdict
    print(f"replay of case {config.case_id}: {a} vs {b} (oracle checked) on {device}, from {source}")
    print(f"  config: {config.cli_args() or '(defaults)'}")
    print(v.describe())
    if report is not None:
        saved = report.verdict
        same = _key(saved) == _key(v)
        if saved.status == "crash":
            print(f"  saved verdict: CRASH ({saved.first.message if saved.first else ''}); this replay did not crash")
        else:
            print(f"  saved verdict: {saved.status.upper()}" + (f" — {saved.first.line()}" if saved.first else ""))
            print("  reproduced: " + ("yes, same verdict and first mismatch" if same else "NO — the verdict differs from the saved one"))
    return 0 if v.passed else 1


def _key(v):
    f = v.first
    return (v.status, None if f is None else (f.check, f.impl, f.row, f.col, tuple(sorted(f.values.items())), f.lanes, f.rows))
