"""A judged topology case as a results row and, when it fails, a report folder.

The verdict (one place): the first mismatch with the oracle blames its side
(``a-vs-oracle`` before ``b-vs-oracle``); A differing from B where neither differs on
the oracle's rows (``fused_equals_pair``: the oracle sampled a large case's rows) is
``a-vs-b``; any other finding is on a property, ``property:<name>``, shared by every
side and blaming none. A case that raised is an ERROR with the exception's line.

A failing case's folder ``<run folder>/<case ID>/`` holds ``report.md`` (the case, every
mismatch with A's, B's and the oracle's values at its first differing element, every
property finding, the replay and sweep lines), ``case.json`` (the case) and
``verdict.json`` (``VERDICT_FIELDS``: the verdict, A, B and the device, which ``remap-ab
replay --subject topology FOLDER`` reads). How many
folders a run writes: ``report_cap``'s setting, per failure class (the check), counted
in the run folder (``.report-slots/``) so that every worker shares the count.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, report_cap
from remap_ab.status import Status
from remap_ab.subjects.topology import calls
from remap_ab.subjects.topology.check import CaseResult
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.properties import DOES_NOT_HOLD, PROPERTIES

LINE_LIMIT = 300  # characters of a finding's detail in results.csv (report.md has all of it)
ROW_WINDOW = 16  # learned entries shown on each side of a mismatch's column
SIDE_NAMES = {"a": "A", "b": "B"}
# verdict.json: the case's ID, its verdict (status, check, first_mismatch as results.csv
# has them), the implementations as the run named them and the device.
VERDICT_FIELDS = ("case_id", "status", "check", "first_mismatch", "a", "b", "device")


def case_id(case: TopologyCase) -> str:
    """12 hex digits of the case's JSON: the same case, the same ID, in every process."""
    return hashlib.sha256(case.to_json().encode()).hexdigest()[:12]


def split_findings(result: CaseResult) -> tuple[list, list]:
    """``(on the property, explained)``: a finding checked on a side that differs from
    the oracle (``fused_equals_pair`` too, once either side does) is a consequence of
    that side's mismatch, not news about the property; the rest are findings on the
    property, which every side shares."""
    wrong = {side for side, _ in result.mismatches}
    explained = [(side, f) for side, f in result.findings
                 if any(s.strip() in wrong for s in side.split(","))]
    return [sf for sf in result.findings if sf not in explained], explained


def verdict(result: CaseResult) -> tuple[Status, str, str]:
    """``(status, check, first_mismatch)`` of a judged case."""
    others = len(result.mismatches) + len(result.findings) - 1
    more = f" (+{others} more)" if others > 0 else ""
    for side in ("a", "b"):
        for s, m in result.mismatches:
            if s == side:
                return Status.FAIL, f"{side}-vs-oracle", describe_mismatch(side, m) + more
    if not result.findings:
        return Status.PASS, "", ""
    pair = [f for _, f in result.findings if f.property == "fused_equals_pair"]
    if pair:
        return Status.FAIL, "a-vs-b", f"merged, A vs B: {pair[0].describe()}"[:LINE_LIMIT] + more
    side, f = result.findings[0]
    return Status.FAIL, f"property:{f.property}", (f"property {f.describe()}"[:LINE_LIMIT] + f" (checked on {side})" + more)


def describe_mismatch(side: str, m) -> str:
    name = SIDE_NAMES[side]
    if m.row < 0:
        return f"{m.output}: {name}'s dtype or shape differs from the oracle's"
    return f"{name} {m.describe(name, 'oracle')}"


def row(case: TopologyCase, result: Optional[CaseResult], report: str, error: str = "",
        status: Status = Status.ERROR) -> dict:
    """The case's results row (``subject.COLUMNS``, plus ``case_id``); without a result,
    a case that ended with ``status`` (error, crash, timeout) saying ``error``."""
    if result is None:
        return {"case_id": case_id(case), "status": status, "check": str(status), "first_mismatch": error,
                "mismatches": "", "findings": 0, "properties_failed": "", "oracle_rows": "", "a_ms": "", "b_ms": "",
                "report": report}
    status, check, first = verdict(result)
    on_property, _ = split_findings(result)
    return {
        "case_id": case_id(case), "status": status, "check": check, "first_mismatch": first,
        "mismatches": " ".join(f"{side}:{m.output}" for side, m in result.mismatches),
        "findings": len(on_property),
        "properties_failed": " ".join(dict.fromkeys(f.property for _, f in on_property)),
        "oracle_rows": result.oracle_rows,
        "a_ms": f"{result.a_ms:.3f}", "b_ms": f"{result.b_ms:.3f}",
        "report": report,
    }


def claim(folder: Path, cap: Any, check: str, cid: str) -> bool:
    """Whether this failing case gets a report folder: ``cap`` None or ``all``: every
    one; N: the first N of its check across every process writing into ``folder``
    (report_cap's slots; the topology's failure class is the check alone)."""
    return report_cap.claim(folder, cap, "topology." + check, cid)


def replay_command(case: TopologyCase, a: str = "a", b: str = "b", path_entries: Optional[Iterable[str]] = None) -> str:
    """The case's replay line, naming A and B where they are not the defaults, with the
    PYTHONPATH they need (``path_entries``; None: this process's, command_line.run_entries)."""
    return case.replay_command(a, b, command_line.run_entries([a, b]) if path_entries is None else path_entries)


def replay_line(case: TopologyCase, a: str, b: str) -> str:
    """A judged case's one replay line (``Subject.replay_line``): A and B as loaded, so a
    custom module's folder is the line's PYTHONPATH."""
    impl_a, impl_b = calls.resolve(a, "a"), calls.resolve(b, "b")
    return case.replay_command(impl_a.name, impl_b.name, command_line.run_entries([impl_a.name, impl_b.name]))


def sweep_command(case: TopologyCase, a: str, b: str, device: str, root: Optional[str] = None) -> str:
    return command_line.line("sweep", a=a if a != "a" else None, b=b if b != "b" else None, device=device,
                             options=[("--subject", "topology"), *([("--root", root)] if root else []),
                                      ("--filter", f"case={case_id(case)}")],
                             path_entries=command_line.run_entries([a, b]))


def write(folder: Path, case: TopologyCase, result: Optional[CaseResult], a: str, b: str, device: str,
          error: str = "", status: Status = Status.ERROR) -> Path:
    """``<folder>/<case ID>/report.md`` and ``case.json``; the folder."""
    cid = case_id(case)
    out = Path(folder) / cid
    out.mkdir(parents=True, exist_ok=True)
    (out / "case.json").write_text(case.to_json() + "\n")
    st, check, first = verdict(result) if result is not None else (status, str(status), error)
    saved = dict(zip(VERDICT_FIELDS, (cid, str(Status(st).value), check, first, a, b, device)))
    (out / "verdict.json").write_text(json.dumps(saved, indent=1) + "\n")
    root = os.path.abspath(Path(folder).parent)  # the run's --root: the sweep line writes beside this run
    (out / "report.md").write_text("\n".join(markdown(case, result, a, b, device, error, status, root)) + "\n")
    return out


def markdown(case: TopologyCase, result: Optional[CaseResult], a: str, b: str, device: str, error: str = "",
             status: Status = Status.ERROR, root: Optional[str] = None) -> list[str]:
    cid = case_id(case)
    if result is None:
        head = [f"# topology case {cid}: {str(status).upper()}", "", f"{error}", ""]
    else:
        st, check, _ = verdict(result)
        head = [f"# topology case {cid}: {str(st).upper()} ({check})", ""]
    lines = head + [
        f"- case: `{case.key()}`",
        f"- rows {case.rows}, topk {case.topk}, num_segments {case.segments}, learned_keep {case.keep}, "
        f"max_replacements {case.max_replacements} (budget {case.budget})",
        f"- A: `{a}`; B: `{b}`; device {device}",
    ]
    if result is not None:
        lines.append(f"- oracle rows: {result.oracle_rows}; A {result.a_ms:.3f} ms, B {result.b_ms:.3f} ms")
        lines += ["", "## Mismatches (a side differs from the oracle: that side is wrong)", ""]
        lines += [line for side, m in result.mismatches for line in _mismatch_lines(result, side, m)] or ["none"]
        on_property, explained = split_findings(result)
        lines += ["", "## Property findings (on a property the PR states, which every side shares: no blame on A or B)", ""]
        for side, f in on_property:
            lines.append(f"- **{f.property}** ({PROPERTIES.get(f.property, '')}), checked on {side}: {f.describe()}")
            if f.property in DOES_NOT_HOLD:
                lines.append(f"  - known not to hold (docs/topology.md): {DOES_NOT_HOLD[f.property]}")
        if not on_property:
            lines.append("none")
        if explained:
            lines += ["", "## Properties broken by an output that differs from the oracle (consequences of the mismatches above)", ""]
            lines += [f"- **{f.property}**, checked on {side}: {f.describe()}" for side, f in explained]
    lines += [
        "", "## Again", "",
        "Replay (A, B, the oracle and every property, printed):", "",
        f"    {replay_command(case, a, b)}", "",
        "The same case as a sweep (this report again):", "",
        f"    {sweep_command(case, a, b, device, root)}",
        "",
    ]
    return lines


def _mismatch_lines(result: CaseResult, side: str, m) -> list[str]:
    name = SIDE_NAMES[side]
    if m.row < 0:
        return [f"- {describe_mismatch(side, m)}"]
    values = [f"oracle {m.right}"]
    if m.output == "merged" and result.a_merged is not None and result.b_merged is not None:
        values = [f"A {int(result.a_merged[m.row, m.col])}", f"B {int(result.b_merged[m.row, m.col])}", *values]
    else:
        values = [f"{name} {m.left}", *values, "B has no witnesses (the fused kernel never materialises them)"]
    out = [f"- {name} {m.output}[{m.row}, {m.col}]: {', '.join(values)}"]
    if result.inputs is not None:
        learned = result.inputs.learned[m.row]
        col = min(m.col, learned.numel() - 1) if m.output == "merged" else 0
        lo, hi = max(col - ROW_WINDOW, 0), min(col + ROW_WINDOW + 1, learned.numel())
        entries = ", ".join(str(int(v)) for v in learned[lo:hi])
        out.append(f"  learned row {m.row} (L={int(result.inputs.context_lens[m.row])}), columns {lo}..{hi - 1}: [{entries}]")
    return out
