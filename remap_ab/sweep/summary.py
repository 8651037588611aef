"""A run folder summarised: verdict counts, failures by check, timings, disk, the failing
cases — and, above all, whether the run is complete. A run with cases not run (cut
short, or a half-written last row) is never PASS: it says how many cases are missing and
the command that resumes it. What only the subject knows (its dimensions, its run-level
checks, what its cases cover) comes from the subject run.json names
(``Subject.summarise`` and ``Subject.summary_lines``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, subjects
from remap_ab.report_cap import describe
from remap_ab.sources import Source
from remap_ab.status import Status, plural
from remap_ab.sweep.run_folder import RunLock, read_results, read_run_json, resume_command


def summarise(folder: Path, grid: Any = None, *, lock_held_here: bool = False) -> dict:
    """Verdict counts, failures per check, timings: from the run folder. ``grid``: the
    subject's grid when the caller holds it loaded. ``lock_held_here``: the caller is the
    sweep that holds the run's lock (and has finished running it), so no other process is
    running it."""
    folder = Path(folder)
    meta = read_run_json(folder)
    subject = subjects.get(meta.get("subject", subjects.DEFAULT))
    df = read_results(folder, selected=meta.get("case_ids"))  # every row checked (run_folder.row_problems)
    partial = int(df.attrs.get("partial_bytes", 0))
    dupes = int(df["case_id"].duplicated().sum())
    statuses = [s.value for s in Status]
    counts = {s: int((df["status"] == s).sum()) for s in statuses}
    other = int((~df["status"].isin(statuses)).sum())
    failed = df[df["status"] != Status.PASS.value]
    in_grid_order = failed.assign(_i=_numbers(failed.get("index", ""))).sort_values("_i")
    first = [
        {"case_id": r["case_id"], "status": r["status"], "first_mismatch": r.get("first_mismatch", ""),
         "report": r.get("report", "")}
        for r in in_grid_order.to_dict("records")
    ]
    own = subject.summarise(df, meta, grid)
    report_folders = int((df["report"].astype(str) != "").sum()) if "report" in df.columns else 0
    unique = int(df["case_id"].nunique())
    selected = int(meta["selected"])
    missing = max(0, selected - unique)
    complete = missing == 0
    run_failure = own.pop("run_failure", "")
    passed = complete and counts[Status.PASS.value] == len(df) and len(df) > 0 and dupes == 0 and not run_failure
    return {
        "run": meta.get("run", folder.name),
        "subject": subject.name,
        "folder": str(folder),
        "a": meta.get("a"),
        "b": meta.get("b"),
        "implementations": meta.get("implementations") or {},
        "device": meta.get("device"),
        "selected": selected,
        "grid_total": meta.get("grid_total"),
        "cases": int(len(df)),
        "duplicates": dupes,
        "missing": missing,
        "partial_row_ignored": partial > 0,
        "complete": complete,
        "resume": "" if complete else resume_command(folder, meta),
        "python_path": meta.get("python_path") or [],  # what every line printed for the run carries
        "running": "" if lock_held_here else (RunLock.holder(folder) or ""),
        "counts": counts,
        "unknown_status": other,
        "cap_note": meta.get("cap_note", ""),
        "filters": meta.get("filters", []),
        "memcheck": bool(meta.get("memcheck", False)),
        "failures_by_check": failures_by_check(first, in_grid_order),
        "failures_by_dimension": {},
        "failures": first,
        "failing_cases": int(len(failed)),
        "report_folders": report_folders,
        # A run from before report folders were capped wrote one for every failing case.
        "reports": meta.get("reports", "all"),
        "grid_file": meta.get("grid_file"),
        "phase_seconds": meta.get("phase_seconds", {}),
        "wall_seconds": meta.get("wall_seconds", 0.0),
        "disk": disk_use(folder),
        "last_session": meta.get("last_session", {}),
        **own,
        "run_failure": run_failure,
        "passed": passed,
    }


def _numbers(column):
    import pandas as pd

    return pd.to_numeric(column, errors="coerce")


def failures_by_check(first: list, rows) -> dict:
    """The failing cases grouped by the check that failed first in each (the results
    table's ``check`` column; a crash or timeout by its status): per check, how many,
    the first in grid order, and the report of the first that has one ("" if none)."""
    checks = rows["check"].astype(str).tolist() if "check" in rows.columns else [""] * len(first)
    groups: dict = {}
    for f, check in zip(first, checks):
        word = check if check and check != "nan" else str(f["status"])
        g = groups.setdefault(word, {"cases": 0, "first": f["case_id"], "report_case": "", "report": ""})
        g["cases"] += 1
        report = str(f.get("report") or "")
        if report and report != "nan" and not g["report"]:
            g["report_case"], g["report"] = f["case_id"], report
    return groups


def loaded_line(loaded: dict) -> str:
    """What a file or revision implementation loaded (sources.Source.to_dict), in one line."""

    return Source(**loaded).line()


def result_line(s: dict) -> str:
    if not s["complete"]:
        return (f"INCOMPLETE — {s['missing']} of {s['selected']} selected cases not run"
                + (f" (a sweep is running it: {s['running']})" if s.get("running") else "")
                + f"; resume with: {s['resume']}")
    if s.get("run_failure"):
        return f"FAIL — {s['run_failure']}" + (
            "" if s["counts"].get(Status.PASS.value) == s["cases"] else "; and not every case passed")
    if not s["passed"]:
        return "FAIL — not every case passed"
    on = f" on {s['coverage']}" if s.get("coverage") else ""
    return f"PASS — every case passed: {s['cases']}/{s['selected']}{on}"


def _subject_lines(s: dict):
    return subjects.get(s.get("subject", subjects.DEFAULT)).summary_lines(s)


def format_summary(s: dict, show: int = 10) -> str:
    c = s["counts"]
    own = _subject_lines(s)
    lines = [
        f"run {s['run']}: {s['a']} vs {s['b']} (oracle checked) on {s['device']} — {s['folder']}",
        f"  cases: {s['cases']} run of {s['selected']} selected ({s['grid_total']} in the grid"
        + own.cases_note
        + ")"
        + (f"; filters: {' '.join(s['filters'])}" if s["filters"] else "")
        + (f"; {s['missing']} not run yet" if s["missing"] else "")
        + ("; a half-written last row was ignored" if s.get("partial_row_ignored") else ""),
    ]
    if s.get("interrupted"):
        lines.append(f"  stopped: interrupted by {s['interrupted']}; the cases in flight were dropped "
                     "(a resume runs them)")
    for role, loaded in (s.get("implementations") or {}).items():
        if loaded:
            lines.append(f"  {role.upper()} loaded: {loaded_line(loaded)}")
    if s.get("cap_note"):
        lines.append(f"  capped: {s['cap_note']}")
    lines += own.setup
    if s.get("memcheck"):
        lines.append("  memcheck: every case run had its loads and stores checked")
    lines.append("  verdicts: " + ", ".join(f"{k} {v}" for k, v in c.items()) + own.verdicts_note)
    if s.get("unknown_status"):
        lines.append(f"  WARNING: {s['unknown_status']} rows hold no known verdict")
    if s["duplicates"]:
        lines.append(f"  WARNING: {s['duplicates']} case IDs appear more than once in results.csv")
    if s.get("failures_by_check"):
        lines.append("  failures by check (each case under its first failing check): cases; the first; its report")
        width = max(len(c) for c in s["failures_by_check"])
        for check, g in s["failures_by_check"].items():
            if g["report"]:
                where = str(Path(s["folder"]) / g["report"] / own.report_file)
                rep = where if g["report_case"] == g["first"] else f"no report; the first reported is {g['report_case']}: {where}"
            else:
                rep = "no report written"
            lines.append(f"    {check:<{width}}  {g['cases']}; {g['first']}; {rep}")
    if s["failures"] and s.get("failures_by_dimension"):
        lines.append("  failures by dimension (failed/total):")
        for axis, vals in s["failures_by_dimension"].items():
            lines.append(f"    {axis:>11}: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in vals.items()))
    if s.get("failing_cases"):
        lines.append(reports_line(s, own.other_report))
    lines += own.findings
    sess = s.get("last_session", {})
    if not sess.get("cases"):  # e.g. a resume that found nothing left: show the totals
        sess = {"cases": s["cases"], "wall_seconds": s.get("wall_seconds", 0.0), "phase_seconds": s.get("phase_seconds", {}),
                "phases_split": not (s.get("memcheck") and s.get("device") != "cuda")}
    ph = sess.get("phase_seconds") or {}
    if not sess.get("cases") and sess.get("wall_seconds"):
        lines.append(f"  time: wall {sess['wall_seconds']:.2f} s; no case finished")
    elif ph:
        wall = sess.get("wall_seconds", s.get("wall_seconds", 0.0))
        n = sess.get("cases", s["cases"])
        rate = f" ({n / wall:.1f} cases/s)" if wall else ""
        lines.append(
            f"  time: wall {wall:.2f} s for {n} cases{rate}, {sess.get('workers', '?')} worker(s), batch {sess.get('batch', '?')}; "
            + (f"worker start-up (process start, imports, device init) {sess['startup_seconds']:.2f} s; "
               if sess.get("startup_seconds") else "")
            + phases_text(ph, sess.get("phases_split", True))
        )
    if sess.get("compile_ahead"):  # a GPU run's Triton variants, compiled on the host's cores (precompile.py)
        lines.append(f"  {sess['compile_ahead']}")
    if s.get("disk"):
        lines.append(disk_line(s["disk"]))
    helpers = sess.get("report_helpers")
    if helpers:  # a GPU run's report folders, drawn and written beside its judging (processes/background.py)
        lines.append(f"  report folders: {helpers['folders']} drawn and written by up to {helpers['workers']} helper "
                     f"processes while the run judged on; {helpers['waited_seconds']:.2f} s waited for the last ones")
        if helpers["failures"]:
            lines.append(f"  report folders NOT written: {len(helpers['failures'])} (their rows name them); first: "
                         f"{helpers['failures'][0]}")
    if s["failures"]:
        lines.append(f"  failing cases ({len(s['failures'])}; first {min(show, len(s['failures']))}):")
        for f in s["failures"][:show]:
            rep = f"  report: {Path(s['folder']) / f['report'] / own.report_file}" if f["report"] else ""
            lines.append(f"    {f['case_id']} {str(f['status']).upper()} {f['first_mismatch']}{rep}")
    lines.append("  result: " + result_line(s))
    return "\n".join(lines)


def disk_use(folder: Path) -> dict:
    """Bytes under the run folder: in all, and in its report folders (a case's folder
    holds a verdict.json)."""
    import os

    total = reports = 0
    for root, _, files in os.walk(folder):
        size = sum(os.path.getsize(os.path.join(root, f)) for f in files)
        total += size
        if Path(root) != Path(folder) and Path(root).relative_to(folder).parts[0][:1] != ".":
            reports += size
    return {"bytes": total, "report_bytes": reports}


def disk_line(disk: dict) -> str:
    return (f"  disk: {_megabytes(disk['bytes'])} under the run folder, "
            f"{_megabytes(disk['report_bytes'])} of it in report folders")


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n} bytes"


def reports_line(s: dict, other_report: Optional[str] = None) -> str:
    """How many report folders the run wrote, for which cases, and how to get any
    other case's report (``other_report``: the subject's other way, if it has one)."""

    written, failing = s.get("report_folders", 0), s["failing_cases"]
    text = (f"  report folders: {written} written for {plural(failing, 'failing case')}, "
            f"{describe(s.get('reports', 'all'), subject=subjects.get(s.get('subject', subjects.DEFAULT)))}")
    if written >= failing:
        return text
    if other_report is None:
        other_report = _subject_lines(s).other_report
    return text + f"; any other case's report: {other_report_command(s, other_report)}"


def other_report_command(s: dict, other_report: str = "") -> str:
    """The commands that give the report of a failing case that has no folder: a new
    run of it with its folder, and the subject's other way (a replay) where it has one."""
    subject = s.get("subject", subjects.DEFAULT)
    more = [("--subject", subject)] if subject != subjects.DEFAULT else []
    grid = [("--grid", str(s["grid_file"]))] if s.get("grid_file") else []
    root = [("--root", os.path.abspath(Path(s["folder"]).parent))] if s.get("folder") else []
    again = command_line.line("sweep", a=str(s["a"]), b=str(s["b"]), repo=command_line.repo_of(s.get("implementations")),
                              case="--filter case=ID[,ID...]",
                              device=str(s["device"]), options=[*more, *grid, *root, ("--reports", "all")],
                              path_entries=s.get("python_path") or ())
    text = f"`{again}` (a new run)"
    if other_report:
        text += f", or {other_report}"
    return text


def phases_text(phases: dict, split: bool = True) -> str:
    """The phase times summed over workers; a run whose cases were timed whole (CPU
    --memcheck runs each case on its own) says its phases were not split, never 0.00 s."""
    if not split:
        total = sum(phases.values())
        return (f"phases not split (--memcheck on the CPU times each case whole): "
                f"{total:.2f} s of case time summed over workers")
    return "phases summed over workers: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
