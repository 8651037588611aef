"""A declared subject's parts of ``remap-ab run``, ``replay`` and ``mutants``
(``Subject.command_part``): each an object with ``DESCRIPTION``, ``add_arguments(p)``
and ``main(args) -> int``, as a packaged subject's ``*_command`` module.

    run       one case (``--case JSON``, default the grid's first) through A, B and the
              oracle; its verdict, its report folder with ``--report DIR``, its replay line
    replay    TARGET a case's JSON text, a report folder (or a file in it) or a case ID of
              the grid; the verdict now, beside a folder's saved one
    mutants   the kill matrix of the subject's ``mutants`` (declare/mutants.py)
    bench     A and B timed on the subject's ``bench`` cases (remap_ab/bench/pairs.py),
              where it declares some

Exit status: 0 the case passes (every mutant killed), 1 not, 2 bad input (one line)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, replays, runtime
from remap_ab.declare import mutants
from remap_ab.declare.calls import as_outputs
from remap_ab.declare.compare import mismatch, value_at
from remap_ab.errors import ConfigError, MutantError, UsageError
from remap_ab.status import Status
from remap_ab.subject import JudgeSettings


def part(subject: Any, command: str) -> Optional[Any]:
    if command == "bench" and not subject.bench:
        return None
    made = {"run": RunPart, "replay": ReplayPart, "mutants": MutantsPart, "bench": BenchPart}.get(command)
    return made(subject) if made is not None else None


def _case(subject: Any, text: str, where: str) -> dict:
    try:
        case = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not a case's JSON ({exc.msg}); give e.g. "
                         f"'{json.dumps(subject.grid.cases()[0], sort_keys=True)}'") from None
    missing = [a for a in subject.grid.axis_names if not isinstance(case, dict) or a not in case]
    if missing:
        raise UsageError(f"{where}: the case has no {missing[0]}; a case names {', '.join(subject.grid.axis_names)}")
    return case


def _judged_once(subject: Any, case: dict, a: str, b: str, device: str, folder: Optional[Path]) -> dict:
    settings = JudgeSettings(a, b, device, str(folder) if folder else None, reports="all")
    row = subject.judge([case], settings, None)[0]
    status, check = str(row["status"]), str(row["check"])
    print(f"{status.upper()}" + (f" [{check}] {row['first_mismatch']}" if status != Status.PASS else "")
          + f"  (case {row['case_id']}, A {a}, B {b}, {device})")
    if row.get("report"):
        print(f"  report: {Path(str(folder)) / row['report'] / 'report.md'}")
    print(f"  replay: {subject.replay_line(case, None, None, a, b)}")
    return row


class RunPart:
    DESCRIPTION = "A declared subject's case is given as its JSON (--case); without it, the grid's first case."

    def __init__(self, subject: Any):
        self.subject = subject

    def add_arguments(self, p) -> None:
        p.add_argument("--case", metavar="JSON", help="the case, as its JSON (default: the grid's first case)")
        p.add_argument("--a", metavar="NAME", help=f"implementation A (default {self.subject.default_a})")
        p.add_argument("--b", metavar="NAME", help=f"implementation B (default {self.subject.default_b})")
        p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                       help="cuda, or cpu (the Triton interpreter); default auto")
        p.add_argument("--report", metavar="DIR", help="write the case's report folder under DIR when it fails")
        p.add_argument("--shrink", action="store_true",
                       help="instead of one case: the smallest failing case the subject's strategy draws (Hypothesis)")

    def main(self, args) -> int:
        s = self.subject
        device = runtime.select(args.device)
        a, b = args.a or s.default_a, args.b or s.default_b
        if getattr(args, "shrink", False):
            if s.strategy() is None:
                raise UsageError(f"--shrink: {s.name} declares no strategy to draw from; drop --shrink")
            smallest = s.smallest_failing(a, b, device)
            if smallest is None:
                print(f"PASS  no failing case in 200 draws of {s.name}'s strategy (A {a}, B {b}, {device})")
                return 0
            print(f"smallest failing case: {json.dumps(smallest, sort_keys=True)}")
            args.case = json.dumps(smallest)
        case = _case(s, args.case, "--case") if args.case else s.grid.cases()[0]
        row = _judged_once(s, case, a, b, device, Path(args.report) if args.report else None)
        return 0 if str(row["status"]) == Status.PASS else 1


class ReplayPart:
    DESCRIPTION = "A declared subject's TARGET: a case's JSON text, a report folder (or a file in it), or a case ID."

    def __init__(self, subject: Any):
        self.subject = subject

    def add_arguments(self, p) -> None:
        """None beyond ``remap-ab replay``'s own."""

    def main(self, args) -> int:
        s = self.subject
        if getattr(args, "memcheck", False):
            raise UsageError(f"--memcheck: {s.name} has no memory check (the sanitizer takes the remap's cases only); drop it")
        saved: dict = {}
        target = str(args.target)
        path = Path(target)
        if target.lstrip().startswith("{"):
            case = _case(s, target, "TARGET")
        elif path.exists():
            folder = path if path.is_dir() else path.parent
            if not (folder / "case.json").is_file():
                raise UsageError(f"{target}: no case.json there; give a report folder of {s.name} or a case's JSON")
            saved = json.loads((folder / "case.json").read_text())
            case = saved["case"]
        else:
            by_id = {s.grid.case_id(c): c for c in s.grid.cases()}
            if target not in by_id:
                raise ConfigError(f"{target}: no case of {s.name}'s grid has this ID, and it is no folder or case JSON")
            case = by_id[target]
        device = runtime.select(args.device)
        a, b = args.a or saved.get("a") or s.default_a, args.b or saved.get("b") or s.default_b
        was = saved.get("row", {})
        saved_failed = str(was["status"]) != Status.PASS if "status" in was else None
        runs = replays.runs_for(getattr(args, "repeat", None), saved_failed)
        settings = JudgeSettings(a, b, device, None, reports="all")
        rows = [_judged_once(s, case, a, b, device, None)]
        rows += [s.judge([case], settings, None)[0] for _ in range(runs - 1)]
        failing = [r for r in rows if str(r["status"]) != Status.PASS]
        if runs > 1:
            print("  runs: " + ", ".join(str(r["status"]).upper() for r in rows))
        if saved:
            print(f"  saved verdict: {str(was.get('status', '')).upper()} [{was.get('check', '')}] {was.get('first_mismatch', '')}")
        same_code = bool(saved) and (saved.get("a"), saved.get("b")) == (a, b)
        counted = replays.Replays(runs, len(failing), saved_failed, same_code)
        if runs > 1 or counted.nondeterministic:
            print("  " + counted.line())
        if counted.nondeterministic:
            print("  repeat it: " + command_line.line("replay", target, subject=s.name, device=device,
                                                      options=[("--repeat", str(10 * runs))],
                                                      path_entries=command_line.import_entries([s.name])))
        return counted.status


class MutantsPart:
    DESCRIPTION = ("A declared subject's mutants are data (its ``mutants``): each judged over the grid in this process "
                   "with the mutant as B, killed when its declared check fails.")

    def __init__(self, subject: Any):
        self.subject = subject

    def add_arguments(self, p) -> None:
        """None beyond ``remap-ab mutants``'s own (it honours --list, --only, --device, --json)."""

    def main(self, args) -> int:

        s = self.subject
        ids = [i.strip() for chunk in (getattr(args, "only", None) or []) for i in chunk.split(",") if i.strip()]
        try:
            selected = mutants.select(s, ids)
        except ValueError as exc:
            raise MutantError(str(exc)) from None
        if getattr(args, "list", False):
            print(f"{len(selected)} mutants of {s.name}")
            for m in selected:
                print(f"  {m.id:<26} {m.killed_by:<16} {m.description}")
            return 0
        device = runtime.select(getattr(args, "device", "auto"))
        jobs = getattr(args, "jobs", 1)
        print(f"{s.name} mutants on {device}: {len(selected)} mutants, each judged over the grid in this process"
              + (f" (-j {jobs} has no effect here)" if jobs != 1 else ""), flush=True)
        kills = mutants.kill_all(s, selected, device, progress=lambda k: print(
            f"  {str(k.verdict):>10}  {k.id:<26} {k.seconds:6.1f} s  {k.witness} {k.detail}", flush=True))
        if getattr(args, "json", None):
            Path(args.json).write_text(json.dumps({"subject": s.name, "device": device, "mutants": [
                asdict(k) | {"verdict": str(k.verdict)} for k in kills]}, indent=2) + "\n")
        bad = [k for k in kills if k.verdict in mutants.FAILING]
        print(f"mutants: {len(kills) - len(bad)} of {len(kills)} killed by their declared check"
              + (f"; not: {', '.join(k.id for k in bad)}" if bad else ""))
        return 1 if bad else 0


class BenchPart:
    """``remap-ab bench --subject NAME`` for a declared subject: its ``bench`` cases are the
    shapes, each side called as ``bench_call`` makes it, the outputs compared as declared;
    the timing, the gate, the page and the options are remap_ab/bench/pairs.py's."""

    def __init__(self, subject: Any):
        self.subject = subject
        self.KEY, self.TITLE = subject.name, subject.title
        self.QUESTION = (f"µs per call of B and A on the same inputs, on {subject.name}'s bench cases; each case checked "
                         "equal (its declared outputs) before and after timing.")
        self.DESCRIPTION = (f"--subject {subject.name}: its {len(subject.bench)} bench cases (the subject's ``bench``), "
                            "A and B on the same inputs; the shared options alone.")

    def shapes(self) -> tuple:
        return tuple(self.subject.bench)

    def labels(self, case: dict) -> dict:
        return dict(case)

    def pair(self, case: dict, a: str, b: str, device: str) -> _Pair:
        s = self.subject
        inputs = s.inputs(case, device)
        eager = tuple(side for side, name in (("a", a), ("b", b)) if name in s.bench_eager)
        return _Pair(s, case, inputs, s.bench_call(a, inputs), s.bench_call(b, inputs), s.replay_line(case, None, None, a, b),
                     eager)

    def add_arguments(self, parser, groups: dict) -> None:
        """No options beyond the shared ones (remap_ab/commands/bench.py)."""

    def main(self, args, session) -> int:
        return session.time_pairs(self, args, session)  # the part stands in for a bench module


class _Pair:
    """One bench case's two calls (bench.pairs.TimedPair)."""

    def __init__(self, subject: Any, case: dict, inputs: dict, a: Any, b: Any, replay: str, eager: tuple = ()):
        self.subject, self.labels, self.inputs, self.a, self.b, self.replay = subject, dict(case), inputs, a, b, replay
        self.eager = eager  # the sides timed as eager calls (the subject's bench_eager)

    def disagreement(self, a_out: Any, b_out: Any) -> Optional[str]:
        names = [o.name for o in self.subject.outputs]
        try:
            a, b = as_outputs(a_out, names), as_outputs(b_out, names)
        except TypeError as exc:
            return str(exc)
        for o in self.subject.outputs:
            m = mismatch(o, "b", b[o.name], a[o.name])
            if m is not None:
                if m.problem:
                    return f"B's output {o.name} is {m.problem}"
                at = m.first[0]
                return (f"B's output {o.name} differs from A's at {list(at)}: A {value_at(a[o.name], at)}, "
                        f"B {value_at(b[o.name], at)} ({m.count} of {m.total} elements differ)")
        return None
