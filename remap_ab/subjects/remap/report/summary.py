"""The remap's part of a run's summary (sweep/summary.py builds the rest): the rejection
calls, the optional parameters per wrapper, B's signatures against A's, failures per
grid dimension and per valid-lane bucket, the attention backends' views, B's speed over
A's, and what the cases run cover of the call envelope.
"""

from __future__ import annotations

from typing import Any, Optional

from remap_ab import command_line
from remap_ab.declare.grid import failures_by_dimension
from remap_ab.status import Status
from remap_ab.subject import SummaryLines
from remap_ab.subjects.remap.case.config import BACKEND_NAMES
from remap_ab.subjects.remap.grid import api_compat, envelope
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.judge import features
from remap_ab.subjects.remap.report.speed_table import speed_lines, speed_rows

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


def summarise(df: Any, meta: dict, g: Optional[gridmod.Grid] = None) -> dict:
    """The remap's keys of summary.json, from the results table ``df`` and run.json."""
    g = g or gridmod.load(meta.get("grid_file"))
    rejections = _rejections(df)
    rejections.pop("failed")
    if "rejection" in df.columns:  # the grid's dimensions are the grid points' alone
        df = df[df["rejection"] == ""]
    failed = df[df["status"] != Status.PASS.value]
    ran = set(df["case_id"].astype(str))
    covered = gridmod.coverage(g, [p.config for p in g.points() if p.case_id in ran])
    pairs = pair_coverage([p.config for p in g.points() if p.case_id in ran], meta)
    axes = [(a.name, a.labels()) for a in g.axes]
    if "max_row_valid" in df.columns:
        df = df.assign(**{VALID_LANES: df["max_row_valid"].map(valid_lanes_bucket)})
        failed = df[df["status"] != Status.PASS.value]
        axes.append((VALID_LANES, [b[2] for b in VALID_LANE_BUCKETS]))
    by_dim = failures_by_dimension(df, axes)  # labels seen beyond the declared ones (the "-" of rotations) after them
    speed = speed_rows(df.to_dict("records"), {p.case_id: p.config for p in g.points()}) \
        if meta.get("device") == "cuda" else []
    order_differs = int(df["order_differs"].astype(str).str.lower().eq("true").sum()) if "order_differs" in df else 0
    # Per optional parameter × wrapper, the failing grid cases that passed it (features.py).
    failed_ids, ran_ids = set(failed["case_id"].astype(str)), set(df["case_id"].astype(str))
    feature_failures = features.failure_lines([p.config for p in g.points() if p.case_id in failed_ids],
                                              [p.config for p in g.points() if p.case_id in ran_ids]) \
        if failed_ids else []
    api = meta.get("api", [])
    incompatible = api_compat.fails(api)
    return {
        "order_differs": order_differs,
        "rejections": rejections,
        "api": api,
        "features": meta.get("features", []) + feature_failures,
        "coverage": covered,  # what the cases run cover of the call envelope, and the grids not run
        "pairs": pairs,  # the declared pairs of the envelope's dimensions the cases run exercised (envelope.py)
        "api_compatible": not incompatible,
        # A run-level failure beside the cases' (sweep/summary.result_line).
        "run_failure": f"{meta.get('b')} does not accept every call {meta.get('a')} accepts (api above)" if incompatible else "",
        "failures_by_dimension": by_dim,
        "by_backend": backend_table(df),
        "speed": speed,
        "failing_cases": int(len(failed)),  # grid cases (rejection calls get no report folder)
        "replay_reports": meta.get("grid_file") is None or meta.get("grid_file") in gridmod.shipped(),
    }


def pair_coverage(configs: list, meta: dict) -> dict:
    """What ``configs`` exercised of the envelope's declared pairs (envelope.PairCoverage's
    dict), a parameter passed at its absence's value to two sides that both lack it
    counting as absent (run.json's ``feature_plan``, where it has one)."""
    plan = features._plan_of(meta["feature_plan"]) if meta.get("feature_plan") else None
    return envelope.coverage_of(configs, plan).to_dict()


def summary_lines(s: dict) -> SummaryLines:
    calls = (s.get("rejections") or {}).get("calls")
    setup = []
    if s.get("api") is not None:
        setup += ["  " + line for line in api_compat.summary_lines(s["api"], s["a"], s["b"])]
    setup += ["  " + line for line in s.get("features") or []]
    if s.get("pairs"):
        setup.append("  " + envelope.PairCoverage(**{k: v for k, v in s["pairs"].items() if k != "line"}).line())
    if rejections_line(s):
        setup.append(rejections_line(s))
    findings = []
    if s.get("by_backend"):
        findings.append("  by backend (cases; failed; A/B view differs; view not checked; caller hazards: cases, rows):")
        labels = {name: f"{name} [{r['patterns']}]" for name, r in s["by_backend"].items()}
        width = max(len(label) for label in labels.values())
        for name, r in s["by_backend"].items():
            findings.append(
                f"    {labels[name]:<{width}}  {r['cases']} cases; {r['failed']} failed; "
                f"{r['view_differs']} view differs; {r['view_not_checked']} not checked; "
                f"hazards in {r['hazard_cases']} cases, {r['hazard_rows']} rows"
            )
    findings += speed_lines(s.get("speed") or [], s.get("device"), s.get("a") or "A", s.get("b") or "B")
    replay = ""
    if s.get("replay_reports", True):
        again = command_line.line("replay", "ID", a=str(s["a"]), b=str(s["b"]), device=str(s["device"]),
                                  repo=command_line.repo_of(s.get("implementations")),
                                  path_entries=s.get("python_path") or ())
        replay = f"`{again}` (its verdict again, from regenerated inputs)"
    return SummaryLines(
        cases_note=f"; {calls} of those run are rejection calls" if calls else "",
        setup=setup,
        verdicts_note=(f"; compacted order differs (allowed) in {s['order_differs']} passing cases"
                       if s.get("order_differs") else ""),
        findings=findings, other_report=replay,
    )


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
