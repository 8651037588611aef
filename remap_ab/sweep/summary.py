"""A run folder summarised: verdict counts, failures by every dimension value, timings,
the failing cases — and, above all, whether the run is complete. A run with cases not
run (cut short, or a half-written last row) is never PASS: it says how many cases are
missing and the command that resumes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from remap_ab.compare import plural
from remap_ab.report_cap import describe
from remap_ab.sources import Source
from remap_ab.speed import speed_lines, speed_rows
from remap_ab.status import Status
from remap_ab.subjects.remap import api_compat, features
from remap_ab.subjects.remap import grid as gridmod
from remap_ab.subjects.remap.config import BACKEND_NAMES
from remap_ab.sweep.run_folder import RunLock, read_results, read_run_json, resume_command

# The derived dimension "valid lanes": each case's largest per-row valid count (the
# oracle's), bucketed so that e.g. "fails only when a row has > 100 valid lanes" reads
# off the summary. (lower bound, upper bound or None, label)
VALID_LANE_BUCKETS = ((0, 0, "0"), (1, 16, "1-16"), (17, 100, "17-100"), (101, 512, "101-512"), (513, None, ">512"))
VALID_LANES = "valid lanes"


def valid_lanes_bucket(text: str) -> str:
    try:
        n = int(text)
    except (TypeError, ValueError):
        return "?"
    for low, high, label in VALID_LANE_BUCKETS:
        if n >= low and (high is None or n <= high):
            return label
    return "?"


def summarise(folder: Path, g: Optional[gridmod.Grid] = None, *, lock_held_here: bool = False) -> dict:
    """Verdict counts, failures per dimension value, timings: from the run folder.
    ``lock_held_here``: the caller is the sweep that holds the run's lock (and has
    finished running it), so no other process is running it."""
    import pandas as pd

    folder = Path(folder)
    meta = read_run_json(folder)
    g = g or gridmod.load(meta.get("grid_file"))
    df = read_results(folder)
    partial = int(df.attrs.get("partial_bytes", 0))
    dupes = int(df["case_id"].duplicated().sum())
    statuses = [s.value for s in Status]
    counts = {s: int((df["status"] == s).sum()) for s in statuses}
    other = int((~df["status"].isin(statuses)).sum())
    rejections = _rejections(df)
    every_row = df
    if "rejection" in df.columns:  # the grid's dimensions are the grid points' alone
        df = df[df["rejection"] == ""]
    failed = df[df["status"] != Status.PASS.value]
    ran = set(df["case_id"].astype(str))
    covered = gridmod.coverage(g, [p.config for p in g.points() if p.case_id in ran])
    by_dim = {}
    axes = [(a.name, a.labels()) for a in g.axes]
    if "max_row_valid" in df.columns:
        df = df.assign(**{VALID_LANES: df["max_row_valid"].map(valid_lanes_bucket)})
        failed = df[df["status"] != Status.PASS.value]
        axes.append((VALID_LANES, [b[2] for b in VALID_LANE_BUCKETS]))
    for name, labels in axes:
        if name not in df.columns:
            continue
        total = df.groupby(df[name].astype(str)).size()
        bad = failed.groupby(failed[name].astype(str)).size()
        seen = [str(k) for k in total.index if str(k) not in labels]  # e.g. "-" of rotations
        by_dim[name] = {k: [int(bad.get(k, 0)), int(total.get(k, 0))] for k in [*labels, *seen]}
    by_backend = backend_table(df)
    speed = speed_rows(df.to_dict("records"), {p.case_id: p.config for p in g.points()}) \
        if meta.get("device") == "cuda" else []
    order_differs = int(df["order_differs"].astype(str).str.lower().eq("true").sum()) if "order_differs" in df else 0
    # Per optional parameter × wrapper, the failing grid cases that passed it (features.py).
    failed_ids, ran_ids = set(failed["case_id"].astype(str)), set(df["case_id"].astype(str))
    feature_failures = features.failure_lines([p.config for p in g.points() if p.case_id in failed_ids],
                                              [p.config for p in g.points() if p.case_id in ran_ids]) \
        if failed_ids else []
    failed_calls = rejections.pop("failed")
    failing_cases = int(len(failed))  # grid cases (rejection calls get no report folder)
    failed = pd.concat([failed, failed_calls]) if len(failed_calls) else failed
    df = every_row
    report_folders = int((df["report"].astype(str) != "").sum()) if "report" in df.columns else 0
    in_grid_order = failed.assign(_i=pd.to_numeric(failed.get("index", ""), errors="coerce")).sort_values("_i")
    first = [
        {"case_id": r["case_id"], "status": r["status"], "first_mismatch": r.get("first_mismatch", ""),
         "report": r.get("report", "")}
        for r in in_grid_order.to_dict("records")
    ]
    by_check = failures_by_check(first, in_grid_order)
    unique = int(df["case_id"].nunique())
    selected = int(meta["selected"])
    missing = max(0, selected - unique)
    complete = missing == 0
    api = meta.get("api", [])
    passed = (complete and counts[Status.PASS.value] == len(df) and len(df) > 0 and dupes == 0
              and not api_compat.fails(api))
    return {
        "run": meta.get("run", folder.name),
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
        "resume": "" if complete else resume_command(folder),
        "running": "" if lock_held_here else (RunLock.holder(folder) or ""),
        "counts": counts,
        "unknown_status": other,
        "order_differs": order_differs,
        "cap_note": meta.get("cap_note", ""),
        "filters": meta.get("filters", []),
        "memcheck": bool(meta.get("memcheck", False)),
        "rejections": rejections,
        "api": api,
        "features": meta.get("features", []) + feature_failures,
        "coverage": covered,  # what the cases run cover of the call envelope, and the grids not run
        "api_compatible": not api_compat.fails(api),
        "failures_by_check": by_check,
        "failures_by_dimension": by_dim,
        "by_backend": by_backend,
        "speed": speed,
        "failures": first,
        "failing_cases": failing_cases,
        "report_folders": report_folders,
        # A run from before report folders were capped wrote one for every failing case.
        "reports": meta.get("reports", "all"),
        "grid_file": meta.get("grid_file"),
        "phase_seconds": meta.get("phase_seconds", {}),
        "wall_seconds": meta.get("wall_seconds", 0.0),
        "disk": disk_use(folder),
        "last_session": meta.get("last_session", {}),
        "passed": passed,
    }


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
def _rejections(df) -> dict:
    """The rejection calls' rows (rejections.toml) in numbers: how many ran, how many
    A rejected (only those are judged), how many failed, and which A accepted."""
    import pandas as pd

    if "rejection" not in df.columns:
        return {"calls": 0, "a_rejects": 0, "failed_calls": 0, "accepted_by_a": [], "failed": pd.DataFrame()}
    rows = df[df["rejection"] != ""]
    by = rows["rejected_by"].astype(str) if "rejected_by" in rows else pd.Series([""] * len(rows), index=rows.index)
    a_rejects = by.str.split(",").map(lambda sides: "a" in sides)
    failed = rows[rows["status"] != Status.PASS.value]
    return {
        "calls": int(len(rows)),
        "a_rejects": int(a_rejects.sum()),
        "failed_calls": int(len(failed)),
        "accepted_by_a": sorted(rows.loc[~a_rejects & (rows["status"] == Status.PASS.value), "rejection"].tolist()),
        "failed": failed,
    }


def rejections_line(s: dict) -> str:
    r = s.get("rejections") or {}
    if not r.get("calls"):
        return ""
    a, b = s.get("a"), s.get("b")
    judged = r["a_rejects"]
    text = (f"  rejections: {r['calls']} calls breaking a SPEC §6 precondition; {a} rejects {judged}, "
            + (f"{b} rejects all {judged} with {a}'s exception type" if not r["failed_calls"]
               else f"{b} fails {r['failed_calls']} (see the failing cases)"))
    if r["accepted_by_a"]:
        text += f"; {a} accepts {len(r['accepted_by_a'])} (not judged: {', '.join(r['accepted_by_a'])})"
    return text


def backend_table(df) -> dict:
    """Per attention backend named by the cases (issue 24): its patterns, cases,
    failures, cases whose backend view differs between A and B, views not checked,
    and caller hazards (cases and rows). Empty when no case names a backend."""
    if "backend" not in df.columns:
        return {}
    named = df[df["backend"].astype(str).isin([b for b in BACKEND_NAMES if b != "none"])]
    table = {}
    for backend, rows in named.groupby(named["backend"].astype(str)):
        hazard = rows["hazard_rows"].map(lambda v: int(float(v)) if str(v) not in ("", "nan") else 0)
        view = rows["backend_view"].fillna("").astype(str)
        table[BACKEND_NAMES[backend]] = {
            "patterns": ", ".join(sorted(set(rows["pattern"].fillna("").astype(str)) - {""})),
            "cases": int(len(rows)),
            "failed": int((rows["status"] != Status.PASS.value).sum()),
            "view_differs": int((view == "differs").sum()),
            "view_not_checked": int((~view.isin(["same", "differs"])).sum()),
            "hazard_cases": int((hazard > 0).sum()),
            "hazard_rows": int(hazard.sum()),
        }
    return table


def result_line(s: dict) -> str:
    if not s["complete"]:
        return (f"INCOMPLETE — {s['missing']} of {s['selected']} selected cases not run"
                + (f" (a sweep is running it: {s['running']})" if s.get("running") else "")
                + f"; resume with: {s['resume']}")
    if not s.get("api_compatible", True):
        return f"FAIL — {s['b']} does not accept every call {s['a']} accepts (api above)" + (
            "" if s["counts"].get(Status.PASS.value) == s["cases"] else "; and not every case passed")
    if not s["passed"]:
        return "FAIL — not every case passed"
    on = f" on {s['coverage']}" if s.get("coverage") else ""
    return f"PASS — every case passed: {s['cases']}/{s['selected']}{on}"


def format_summary(s: dict, show: int = 10) -> str:
    c = s["counts"]
    lines = [
        f"run {s['run']}: {s['a']} vs {s['b']} (oracle checked) on {s['device']} — {s['folder']}",
        f"  cases: {s['cases']} run of {s['selected']} selected ({s['grid_total']} in the grid"
        + (f"; {s['rejections']['calls']} of those run are rejection calls" if (s.get("rejections") or {}).get("calls") else "")
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
    if s.get("api") is not None:
        lines += ["  " + line for line in api_compat.summary_lines(s["api"], s["a"], s["b"])]
    lines += ["  " + line for line in s.get("features") or []]
    if rejections_line(s):
        lines.append(rejections_line(s))
    if s.get("memcheck"):
        lines.append("  memcheck: every case run had its loads and stores checked")
    lines.append(
        "  verdicts: " + ", ".join(f"{k} {v}" for k, v in c.items())
        + (f"; compacted order differs (allowed) in {s['order_differs']} passing cases" if s["order_differs"] else "")
    )
    if s.get("unknown_status"):
        lines.append(f"  WARNING: {s['unknown_status']} rows hold no known verdict")
    if s["duplicates"]:
        lines.append(f"  WARNING: {s['duplicates']} case IDs appear more than once in results.csv")
    if s.get("failures_by_check"):
        lines.append("  failures by check (each case under its first failing check): cases; the first; its report")
        width = max(len(c) for c in s["failures_by_check"])
        for check, g in s["failures_by_check"].items():
            if g["report"]:
                where = str(Path(s["folder"]) / g["report"] / "diff.md")
                rep = where if g["report_case"] == g["first"] else f"no report; the first reported is {g['report_case']}: {where}"
            else:
                rep = "no report written"
            lines.append(f"    {check:<{width}}  {g['cases']}; {g['first']}; {rep}")
    if s["failures"] and s["failures_by_dimension"]:
        lines.append("  failures by dimension (failed/total):")
        for axis, vals in s["failures_by_dimension"].items():
            lines.append(f"    {axis:>11}: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in vals.items()))
    if s.get("failing_cases"):
        lines.append(reports_line(s))
    if s.get("by_backend"):
        lines.append("  by backend (cases; failed; A/B view differs; view not checked; caller hazards: cases, rows):")
        labels = {name: f"{name} [{r['patterns']}]" for name, r in s["by_backend"].items()}
        width = max(len(label) for label in labels.values())
        for name, r in s["by_backend"].items():
            lines.append(
                f"    {labels[name]:<{width}}  {r['cases']} cases; {r['failed']} failed; "
                f"{r['view_differs']} view differs; {r['view_not_checked']} not checked; "
                f"hazards in {r['hazard_cases']} cases, {r['hazard_rows']} rows"
            )
    lines += speed_lines(s.get("speed") or [], s.get("device"), s.get("a") or "A", s.get("b") or "B")
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
            + (f"worker start-up (spawn, imports, device init) {sess['startup_seconds']:.2f} s; " if sess.get("startup_seconds") else "")
            + phases_text(ph, sess.get("phases_split", True))
        )
    if sess.get("compile_ahead"):  # a GPU run's Triton variants, compiled on the host's cores (precompile.py)
        lines.append(f"  {sess['compile_ahead']}")
    if s.get("disk"):
        lines.append(disk_line(s["disk"]))
    if s["failures"]:
        lines.append(f"  failing cases ({len(s['failures'])}; first {min(show, len(s['failures']))}):")
        for f in s["failures"][:show]:
            rep = f"  report: {Path(s['folder']) / f['report'] / 'diff.md'}" if f["report"] else ""
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


def reports_line(s: dict) -> str:
    """How many report folders the run wrote, for which cases, and how to get any
    other case's report."""

    written, failing = s.get("report_folders", 0), s["failing_cases"]
    text = (f"  report folders: {written} written for {plural(failing, 'failing case')}, "
            f"{describe(s.get('reports', 'all'))}")
    if written >= failing:
        return text
    return text + f"; any other case's report: {other_report_command(s)}"


def other_report_command(s: dict) -> str:
    """The commands that give the report of a failing case that has no folder: a new
    run of it with its folder, and (for a shipped grid's case) a replay."""
    import shlex

    grid = s.get("grid_file")
    picked = (f"--a {shlex.quote(str(s['a']))} --b {shlex.quote(str(s['b']))} --device {s['device']}"
              + (f" --grid {shlex.quote(str(grid))}" if grid else ""))
    text = f"`remap-ab sweep --filter case=ID[,ID...] {picked} --reports all` (a new run)"
    if grid is None or grid in gridmod.shipped():
        text += (f", or `remap-ab replay ID --a {shlex.quote(str(s['a']))} --b {shlex.quote(str(s['b']))} "
                 f"--device {s['device']}` (its verdict again, from regenerated inputs)")
    return text


def phases_text(phases: dict, split: bool = True) -> str:
    """The phase times summed over workers; a run whose cases were timed whole (CPU
    --memcheck runs each case on its own) says its phases were not split, never 0.00 s."""
    if not split:
        total = sum(phases.values())
        return (f"phases not split (--memcheck on the CPU times each case whole): "
                f"{total:.2f} s of case time summed over workers")
    return "phases summed over workers: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
