"""One topology case judged again: ``remap-ab replay --subject topology TARGET``
(replay_command.py) and its alias ``python -m remap_ab.subjects.topology`` (__main__.py)
both run this module.

TARGET is a report folder (or a file in it: report.py says what a folder holds), a
case's JSON text (the replay line a finding prints), or a case ID (12 hex digits, as
results.csv has it): the newest report of that case under the root, else the grid's
case of that ID. The case is judged as the sweep judges it (A, B, the oracle, every
property) and its verdict printed; a folder's saved verdict is printed beside it, with
whether this replay reproduced it. ``repeat`` runs it that many times (default 5 after a
saved failure; remap_ab/replays.py counts them and names a nondeterministic failure).

Exit status: 0 the case passes, 1 a mismatch, a property finding, a side that raised or
a nondeterministic failure;
bad input (a missing or corrupt folder, JSON that is no case, an unknown ID, an
implementation that cannot be loaded) is a ReportError or an ImplementationError, which
the command line prints in one line with exit 2.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from remap_ab import command_line, replays
from remap_ab.errors import ReportError, exception_line
from remap_ab.subjects.topology import calls, grid, report
from remap_ab.subjects.topology.check import SideRaised, check_case
from remap_ab.subjects.topology.config import TopologyCase

CASE_ID = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class Target:
    """What a replay runs: the case, where it came from (words), and the folder's saved
    verdict (verdict.json, report.VERDICT_FIELDS; None without a folder or a record)."""

    case: TopologyCase
    source: str
    saved: Optional[dict] = None


def find(target: str, root: Path) -> Target:
    """The case ``target`` names (see the module docstring); ReportError, naming what is
    wrong, otherwise."""
    path = Path(target)
    if CASE_ID.fullmatch(target) and not path.exists():
        return _by_id(target, root)
    if target.lstrip().startswith("{"):
        return Target(_case_from(target, "the case JSON given"), "the case JSON given")
    if path.exists():
        return load(path)
    raise ReportError(f"{target}: neither a topology report folder, a case's JSON text nor a case ID (12 hex digits); "
                      "give one of them")


def load(path: Path) -> Target:
    """A report folder (or a file in it): its case.json, and verdict.json when present."""
    folder = path.parent if path.is_file() else path
    case_file = folder / "case.json"
    if not case_file.is_file():
        raise ReportError(f"{folder}: no case.json, so no topology report folder; give a folder a topology sweep or "
                          "soak wrote (<run folder>/<case ID>/)")
    try:
        text = case_file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{case_file}: cannot be read ({exception_line(exc)})") from None
    case = _case_from(text, str(case_file))
    saved = None
    verdict_file = folder / "verdict.json"
    if verdict_file.is_file():
        try:
            saved = json.loads(verdict_file.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReportError(f"{verdict_file}: corrupt ({exception_line(exc)}); the report is corrupt (write it "
                              "again), or replay its case.json's JSON") from None
        missing = [f for f in report.VERDICT_FIELDS if not isinstance(saved, dict) or not isinstance(saved.get(f), str)]
        if missing:
            raise ReportError(f"{verdict_file}: no text field {missing[0]!r}; the report is corrupt (write it again), "
                              "or replay its case.json's JSON")
        if saved["case_id"] != report.case_id(case):
            raise ReportError(f"{folder}: verdict.json is of case {saved['case_id']}, case.json of "
                              f"{report.case_id(case)}; the report is corrupt (write it again)")
    return Target(case, f"report folder {folder}", saved)


def _case_from(text: str, where: str) -> TopologyCase:
    try:
        return TopologyCase.from_json(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{where}: not JSON ({exc.msg} at character {exc.pos}); give a case's JSON text as a "
                          "replay line prints it") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{where}: no topology case ({exception_line(exc)}); its fields are "
                          "config.TopologyCase's") from None


def _by_id(case_id: str, root: Path) -> Target:
    """The newest report of the case under ``root/*/``, else the grid's case of that ID."""
    hits = [p for p in root.glob(f"*/{case_id}") if (p / "case.json").is_file()] if root.is_dir() else []
    if hits:
        return load(max(hits, key=lambda p: p.stat().st_mtime))
    for case in grid.cases():
        if report.case_id(case) == case_id:
            return Target(case, f"the grid's case {case_id} (no report of it under {root}/)")
    raise ReportError(f"no topology report of case {case_id} under {root}/ and no case of the topology grid has that "
                      "ID; give a report folder, a case's JSON text, or --root where its run is")


def replay(target: Target, a: Optional[str], b: Optional[str], device: str, repeat: Optional[int] = None,
           given: str = "") -> int:
    """Judge ``target`` on ``device`` with implementations ``a`` and ``b`` (None: the
    folder's, else the subject's defaults) ``repeat`` times (replays.runs_for) and print
    the verdict; 0 pass, 1 not (or a nondeterministic failure). ``given``: the target as
    the command line named it, for the line that repeats the replay."""
    saved = target.saved or {}
    a = a or saved.get("a") or "a"
    b = b or saved.get("b") or "b"
    impl_a, impl_b = calls.resolve(a, "a"), calls.resolve(b, "b")
    case = target.case
    saved_failed = None if target.saved is None else target.saved["status"] != "pass"
    runs = replays.runs_for(repeat, saved_failed)
    verdicts = [_judged(case, device, impl_a, impl_b) for _ in range(runs)]
    failing = [i for i, (now, _) in enumerate(verdicts) if now[0] != "pass"]
    now, lines = verdicts[failing[0] if failing else 0]  # the verdict shown: the first failing run's, if any
    print(lines)
    print(f"  verdict: {_verdict_words(*now)}; A {impl_a.name}, B {impl_b.name}, on {device}, from {target.source}")
    if runs > 1:
        print("  runs: " + ", ".join(v[0].upper() for v, _ in verdicts)
              + (f" (the verdict above is run {failing[0] + 1}'s)" if failing else ""))
    if target.saved is not None:
        then = (target.saved["status"], target.saved["check"], target.saved["first_mismatch"])
        print(f"  saved verdict: {_verdict_words(*then)}; A {target.saved['a']}, B {target.saved['b']}, "
              f"on {target.saved['device']}")
        print("  reproduced: " + ("yes, the same verdict and first mismatch" if then == now
                                  else "NO: the verdict differs from the saved one"))
    elif target.source.startswith("report folder"):
        print("  saved verdict: not recorded (the folder has no verdict.json); A and B: the subject's defaults "
              "unless --a/--b name others")
    same_code = target.saved is not None and (target.saved["a"], target.saved["b"]) == (impl_a.name, impl_b.name)
    counted = replays.Replays(runs, len(failing), saved_failed, same_code)
    if runs > 1 or counted.nondeterministic:
        print("  " + counted.line())
    if counted.nondeterministic and given:
        print("  repeat it: " + command_line.line("replay", given, subject="topology", device=device,
                                                  options=[("--repeat", str(10 * runs))]))
    return counted.status


def _judged(case: TopologyCase, device: str, impl_a, impl_b) -> tuple[tuple[str, str, str], str]:
    """One run: ``(status, check, first mismatch)`` and the lines that show it."""
    try:
        result = check_case(case, device, b_module=impl_b.module, a_module=impl_a.module)
    except SideRaised as exc:  # a verdict on that side, as the sweep records it
        return ("error", "error", str(exc)), (f"case {case.key()}\n  ERROR {exc}\n  replay: "
                                              f"{case.replay_command(impl_a.name, impl_b.name)}")
    status, check, first = report.verdict(result)
    return (str(status.value), check, first), "\n".join(result.lines(impl_a.name, impl_b.name))


def _verdict_words(status: str, check: str, first: str) -> str:
    return status.upper() + (f" ({check})" if check and check != status else "") + (f": {first}" if first else "")
