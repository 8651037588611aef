"""A revision's row: its pair's verdict, read from the pair's sweep summary
(sweep/summary.py builds it; nothing here judges a case), and the row printed or as JSON.

Verdicts: PASS (every case passed), FAIL (cases failed: by check, or a run-level check),
API change (B does not accept every call A accepts, as the subject's summary lists it),
not loadable (the file does not load at this revision: why), skipped (the file's bytes
are those of the revision compared with: nothing can differ), base (the first loadable
revision, what the next is compared with), INCOMPLETE (a pair cut short: --resume runs
the rest). Only PASS, skipped and base rows pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from remap_ab.history.revisions import Revision
from remap_ab.status import plural

PASS, FAIL, API, UNLOADABLE, SKIPPED, BASE, INCOMPLETE = (
    "PASS", "FAIL", "API change", "not loadable", "skipped", "base", "INCOMPLETE")
PASSING = (PASS, SKIPPED, BASE)

# How the subject's summary names an API difference (its "what"), as a verb.
_API_VERBS = {"missing": "drops", "added": "adds", "added_required": "adds without a default",
              "default": "changes the default of", "position": "moves", "kind": "changes the kind of",
              "unreadable": "has an unreadable signature:"}


@dataclass
class Row:
    """One revision of the history and its pair's outcome (``against``: the commit its
    file was compared with; "" for a base row)."""

    revision: str
    date: str
    subject: str
    path: str
    renamed_from: str
    verdict: str
    against: str = ""
    verdict_text: str = ""  # the verdict with its detail: FAIL (out 3), API change; FAIL (counts 1)
    checks: dict = field(default_factory=dict)  # failing check -> cases
    cases: Optional[int] = None
    selected: Optional[int] = None
    change: str = ""  # the first behaviour change, in a line (or why it did not load, or what was skipped)
    folder: str = ""  # the pair's run folder (kept for every pair run)
    report: str = ""  # the first failing case's report file
    seconds: float = 0.0
    same_as: str = ""  # the revision whose pair held the same two files (its verdict taken)

    @classmethod
    def of(cls, rev: Revision, verdict: str, **fields) -> Row:
        return cls(revision=rev.commit, date=rev.date, subject=rev.subject, path=rev.path,
                   renamed_from=rev.renamed_from, verdict=verdict, **fields)

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Row:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def judged(rev: Revision, against: Revision, summary: dict, report_file: str, seconds: float) -> Row:
    """The row of a pair its sweep ran, from the sweep's summary (summary.json's dict)."""
    s = summary
    checks = {str(k): int(g["cases"]) for k, g in (s.get("failures_by_check") or {}).items()}
    names = {str(s.get("a")): against.short, str(s.get("b")): rev.short}
    api = [d for d in s.get("api") or [] if isinstance(d, dict)]
    report = ""
    failures = s.get("failures") or []
    reported = next((f for f in failures if f.get("report")), None)
    if reported:
        report = str(Path(s["folder"]) / str(reported["report"]) / report_file)
    common = {"against": against.commit, "checks": checks, "cases": int(s.get("cases", 0)),
              "selected": int(s.get("selected", 0)), "folder": str(s.get("folder", "")), "report": report,
              "seconds": round(seconds, 3)}
    failed_text = ", ".join(f"{check} {n}" for check, n in checks.items())
    if not s.get("complete") or s.get("interrupted"):
        missing = int(s.get("missing", 0))
        return Row.of(rev, INCOMPLETE, verdict_text=INCOMPLETE, **common,
                      change=f"{missing} of {plural(int(s.get('selected', 0)), 'case')} not run"
                             + (f" (interrupted by {s['interrupted']})" if s.get("interrupted") else ""))
    first = _first_failure(failures, names)
    if s.get("api_compatible") is False:
        text = API + (f"; FAIL ({failed_text})" if checks else "")
        said = api_line(api, failing=True) or _short(s.get("run_failure"), names)
        return Row.of(rev, API, verdict_text=text, change=f"{said}; {first}" if first else said, **common)
    if s.get("run_failure"):
        return Row.of(rev, FAIL, verdict_text=f"FAIL (run{'; ' + failed_text if checks else ''})",
                      change=_short(s["run_failure"], names), **common)
    if not s.get("passed"):
        return Row.of(rev, FAIL, verdict_text=f"FAIL ({failed_text})" if checks else FAIL, change=first, **common)
    added = api_line(api, failing=False)
    return Row.of(rev, PASS, verdict_text=PASS, change=f"API {added}" if added else "", **common)


def same_files(rev: Revision, against: Revision, earlier: Row) -> Row:
    """The row of a pair holding the same two files as ``earlier``'s: its verdict, its
    run folder, and ``same_as`` naming it (a sweep of the same bytes judges the same)."""
    said = f"the same two files as at {earlier.revision[:12]} (its verdict)"
    return Row.of(rev, earlier.verdict, against=against.commit, verdict_text=earlier.verdict_text, checks=earlier.checks,
                  cases=earlier.cases, selected=earlier.selected, folder=earlier.folder, report=earlier.report,
                  same_as=earlier.revision, change=f"{said}: {earlier.change}" if earlier.change else said)


def api_line(api: list[dict], failing: bool) -> str:
    """The API differences that fail (``failing``) or are reported, in one line:
    ``FUNCTION drops P, Q; FUNCTION2 adds R``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for d in api:
        if bool(d.get("fails")) == failing:
            groups.setdefault((str(d.get("function", "")), str(d.get("what", ""))), []).append(str(d.get("parameter", "")))
    parts = [f"{function} {_API_VERBS.get(what, what)} {', '.join(params)}" for (function, what), params in groups.items()]
    return "; ".join(parts) + ("" if failing or not parts else " (reported, not failed)")


def _short(text: object, names: dict[str, str]) -> str:
    """``text`` in one line, each implementation's long name as its short commit."""
    line = " ".join(str(text or "").split())
    for long, short in sorted(names.items(), key=lambda kv: -len(kv[0])):
        if long and long != "None":
            line = line.replace(long, short)
    return line


def _first_failure(failures: list, names: dict[str, str]) -> str:
    if not failures:
        return ""
    f = failures[0]
    return _short(f"case {f['case_id']} {f.get('first_mismatch') or str(f.get('status', '')).upper()}", names)


# ----------------------------------------------------------------------------- the table

HEADER = ("revision", "date", "subject", "verdict", "cases", "first behaviour change")
_WIDTHS = (12, 10, 34, 24, 7)


def header() -> str:
    return _columns(HEADER)


def lines(row: Row) -> list[str]:
    """The row as the table prints it, and under a failing pair the run folder it kept."""
    cases = "-" if row.cases is None else f"{row.cases}/{row.selected}"
    change = row.change
    if row.renamed_from:
        change = f"renamed from {row.renamed_from}" + (f"; {change}" if change else "")
    if row.against and row.verdict not in (SKIPPED, BASE):
        change = f"vs {row.against[:12]}: {change}" if change else f"vs {row.against[:12]}"
    out = [_columns((row.revision[:12], row.date[:10], row.subject, row.verdict_text or row.verdict, cases, change))]
    if not row.passed and row.folder:
        out.append(" " * 14 + f"run folder: {row.folder}" + (f"; first report: {row.report}" if row.report else ""))
    return out


def _columns(cells) -> str:
    # Only the commit message is cut to its column; a longer verdict pushes the rest right.
    head = [_fit(str(c), w, cut=i == 2) for i, (c, w) in enumerate(zip(cells, _WIDTHS))]
    return "  ".join([*head, str(cells[-1])]).rstrip()


def _fit(text: str, width: int, cut: bool) -> str:
    text = " ".join(text.split())
    return (text[: width - 1] + "…" if cut and len(text) > width else text).ljust(width)
