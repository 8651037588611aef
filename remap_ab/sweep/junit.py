"""A sweep run as a JUnit XML file (``sweep --junitxml FILE``), so that CI dashboards show
grid cases as they show tests: one testcase per selected case, named by its case ID and
grid labels; a case that did not pass carries its verdict line as the failure (or error)
message and its replay command in ``system-out``; a case not run (an interrupted run) is
``skipped`` with the command that resumes the run, never a pass.

Written with the standard library's ElementTree: the format is a few elements, and
every JUnit reader (Jenkins, GitLab, GitHub's test reporters, junitparser) reads it.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from remap_ab import command_line
from remap_ab.status import Status
from remap_ab.sweep.run_folder import read_results, read_run_json, resume_command

SUITE = "remap-ab sweep"


def case_name(case_id: str, labels: dict) -> str:
    """``<case ID> [path=... k=...]``: the ID first, so a dashboard's search finds it."""
    return f"{case_id} [" + " ".join(f"{k}={v}" for k, v in labels.items()) + "]"


def _replay(folder: Path, report: str) -> str:
    try:
        return json.loads((folder / report / "verdict.json").read_text())["replay"]
    except (OSError, ValueError, KeyError):
        return ""


def _seconds(row: dict) -> float:
    total = 0.0
    for key in ("a_ms", "b_ms"):
        try:
            total += float(row.get(key) or 0.0) / 1e3
        except ValueError:
            pass
    return total


def build(folder: Path, points: list) -> ET.ElementTree:
    """The JUnit tree of the run in ``folder`` over its selected ``points`` (grid order)."""
    folder = Path(folder)
    meta = read_run_json(folder)
    df = read_results(folder)
    rows = {str(r["case_id"]): r for r in df.to_dict("records")}
    suite = ET.Element("testsuite", name=SUITE)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    grid = [("--grid", meta["grid_file"])] if meta.get("grid_file") else []
    sweep_again = command_line.line("sweep", a=meta["a"], b=meta["b"], repo=command_line.repo_of(meta.get("implementations")),
                                    device=meta["device"],
                                    options=[*grid, ("--root", os.path.abspath(folder.parent))],
                                    path_entries=meta.get("python_path") or ())
    for p in points:
        labels = dict(p.labels)  # a grid point's axes, or a rejection call's id
        kind = labels.get("path") or ("rejection" if "rejection" in labels else "case")
        case = ET.SubElement(suite, "testcase", classname=f"remap-ab.sweep.{kind}", name=case_name(p.case_id, labels))
        counts["tests"] += 1
        row = rows.get(p.case_id)
        if row is None:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"not run: the run is incomplete; resume with: {resume_command(folder, meta)}")
            continue
        seconds = _seconds(row)
        total_time += seconds
        case.set("time", f"{seconds:.6f}")
        status = str(row["status"])
        if status == Status.PASS.value:
            continue
        kind = "failure" if status == Status.FAIL.value else "error"
        counts["failures" if kind == "failure" else "errors"] += 1
        line = str(row.get("first_mismatch") or status)
        ET.SubElement(case, kind, message=line, type=status).text = line
        out = [f"verdict: {status.upper()} {line}"]
        replay = _replay(folder, str(row.get("report") or "")) if row.get("report") else ""
        if replay:
            out.append(f"replay: {replay}")
            out.append(f"report: {folder / str(row['report']) / 'diff.html'}")
        out.append(f"run it alone: {sweep_again} --filter case={p.case_id}")
        ET.SubElement(case, "system-out").text = "\n".join(out) + "\n"
    for k, v in counts.items():
        suite.set(k, str(v))
    suite.set("time", f"{total_time:.6f}")
    root = ET.Element("testsuites", name=SUITE)
    root.append(suite)
    for k in ("tests", "failures", "errors", "skipped"):
        root.set(k, suite.get(k, "0"))
    ET.indent(root)
    return ET.ElementTree(root)


def write(path: Path, folder: Path, points: list) -> None:
    tree = build(folder, points)
    tmp = Path(f"{path}.tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
