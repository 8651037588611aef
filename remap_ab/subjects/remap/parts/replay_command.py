"""The remap's part of ``remap-ab replay`` (``parts["replay"]``, which ``commands/replay.py``
runs): a case or rejection call found by its report folder or its ID
(a report under --root, else the shipped grids and rejection calls), run again beside
its saved verdict, N times (``--repeat``; replays.py counts the runs and names a
nondeterministic failure, beside a ``nondet`` line that studies it)."""

from __future__ import annotations

import re
from pathlib import Path

from remap_ab import command_line, options, replays, runtime
from remap_ab.errors import ImplementationError, ReportError, UsageError
from remap_ab.interpreter.schedule import interpreter_schedule
from remap_ab.status import Status
from remap_ab.subjects.remap.case.inputs import tensor_sha256
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.judge import registry, rejections
from remap_ab.subjects.remap.judge.rejections import judged
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report.report import find_report, load_report, mismatch_line


def main(args) -> int:
    target = args.target
    root = _readable_root(args.root)
    report = None
    config = None
    call = None
    if Path(target).exists():
        report = load_report(target)
    elif re.fullmatch(r"[0-9a-f]{12}", target):
        found = find_report(target, root)
        if found is not None:
            report = load_report(found)
        else:
            by_id = {p.case_id: p for name in gridmod.shipped() for p in gridmod.load(name).points()}
            calls = {c.case_id: c for c in rejections.load()}
            if target in calls:
                call = calls[target]
            elif target not in by_id:
                raise ReportError(f"no report of case {target} under {root}/ and it is not a case of the grid "
                                  f"(nor of any shipped grid: {', '.join(gridmod.shipped())}), nor a rejection call")
            else:
                config = by_id[target].config
    else:
        raise ReportError(f"{target} is neither a report folder nor a case ID (12 hex digits)")

    if report is not None and args.repo is None:
        registry.adopt_repo({"a": report.a.source, "b": report.b.source})  # the recorded repository
    a = args.a or (report.a.pinned if report else "old")
    b = args.b or (report.b.pinned if report else "new")
    device = runtime.select(args.device)
    if report is not None and report.rejection is not None:
        return _replay_call(report.rejection, report, a, b, device, args)
    if report is None and config is None:
        return _replay_call(call, None, a, b, device, args)
    saved_failed = None if report is None else not Status(report.verdict.status).passed
    runs = replays.runs_for(getattr(args, "repeat", None), saved_failed)
    results = []
    try:
        if report is not None:
            config = report.config
            source = report.inputs_from
            schedule = None
            if report.schedule:
                policy, seed = report.schedule
                if device != "cpu":
                    raise ReportError(
                        f"report {report.folder} was produced under program schedule {policy}:{seed}; replay it with --device cpu"
                    )

                def schedule():
                    return interpreter_schedule(policy, int(seed))

                source += f", program schedule {policy}:{seed}"
            for _ in range(runs):
                results.append(run_case(config, a, b, device=device, inputs=report.inputs, schedule=schedule,
                                        memcheck=args.memcheck))
        else:
            assert config is not None  # found in the grid above
            source = "the grid's configuration (inputs generated afresh)"
            for _ in range(runs):
                results.append(run_case(config, a, b, device=device, memcheck=args.memcheck))
    except ImplementationError as exc:
        hint = _path_hint(report, a, b, args)
        raise ImplementationError(f"{exc}{hint}") from None
    failing = [i for i, r in enumerate(results) if not r.verdict.passed]
    result = results[failing[0] if failing else 0]  # the verdict shown: the first failing run's, if any
    v = result.verdict
    config = result.config
    changed = _changed_files(report, a, b)
    print(f"replay of case {config.case_id}: {a} vs {b} (oracle checked) on {device}, from {source}"
          + (" with memcheck" if args.memcheck else "") + (f", {runs} runs" if runs > 1 else ""))
    print(f"  config: {config.cli_args() or '(defaults)'}")
    for line in changed:
        print(f"  note: {line}")
    if runs > 1:
        print("  runs: " + ", ".join(Status(r.verdict.status).value.upper() for r in results)
              + (f" (the verdict below is run {failing[0] + 1}'s)" if failing else ""))
    _print_verdict(v)
    if report is not None:
        saved = report.verdict
        status = Status(saved.status)
        if status in (Status.CRASH, Status.TIMEOUT):
            what = "did not crash" if status is Status.CRASH else "finished"
            print(f"  saved verdict: {status.value.upper()} ({saved.first.message if saved.first else ''}); this replay {what}")
        else:
            _print_reproduced(saved, v)
        line = _outputs_line(report, result)
        if line:
            print(f"  outputs: {line}")
    same_code = not changed and report is not None and (a, b) == (report.a.pinned, report.b.pinned)
    counted = replays.Replays(runs, len(failing), saved_failed, same_code)
    if runs > 1 or counted.nondeterministic:
        print("  " + counted.line())
    if counted.nondeterministic:
        print("  nondet: " + _nondet_line(config, b, device))
    return counted.status


def _nondet_line(config, b: str, device: str) -> str:
    """The nondeterminism study of B at this case's size (``remap-ab nondet``)."""
    words = [("--impls", b), ("--topk", str(config.topk)), ("--tokens", str(config.tokens)),
             ("--invalid-ratio", f"{config.invalid_ratio:g}"), ("--seed", str(config.seed))]
    if config.mode == "dcp" and config.dcp_size >= 2:
        words.append(("--dcp-size", str(config.dcp_size)))
    return command_line.line("nondet", device=device, options=words)


def _outputs_line(report, result) -> str:
    """Whether this replay's whole outputs are the saved ones, byte for byte (sha256),
    for each side that ran the recorded implementation ('' without recorded digests)."""

    record = report.outputs
    if record is None:
        return ""
    same: list[str] = []
    changed: list[str] = []
    for role, o in (("a", result.a), ("b", result.b)):
        saved = record["roles"].get(role)
        if saved is None or saved["name"] != o.name:
            continue  # another implementation than the recorded one: nothing to compare
        for name, x in (("out", o.out), ("counts", o.counts)):
            digest = saved["tensors"].get(name)
            now = tensor_sha256(x) if hasattr(x, "dtype") else None
            (same if (digest and digest["sha256"]) == now else changed).append(f"{o.name}'s {name}")
    if not same and not changed:
        return ""
    if not changed:
        return "bit-identical to the saved ones (sha256 of the whole tensors): " + ", ".join(same)
    return "NOT the saved ones (sha256 of the whole tensors differs): " + ", ".join(changed)


def _replay_call(case, report, a: str, b: str, device: str, args) -> int:
    """Replay a rejection call: the same call through A and B (on the report's saved
    base inputs when there is a report), its verdict beside the saved one."""

    try:
        v = judged(case, registry.get(a), registry.get(b), device, args.memcheck,
                   inputs=report.inputs if report is not None else None)[0]
    except ImplementationError as exc:
        raise ImplementationError(f"{exc}{_path_hint(report, a, b, args)}") from None
    source = report.inputs_from if report is not None else "the call's base case (inputs generated afresh)"
    print(f"replay of rejection call {case.id} (case {case.case_id}): {a} vs {b} on {device}, from {source}"
          + (" with memcheck" if args.memcheck else ""))
    print(f"  call: {case.describe()}")
    for line in _changed_files(report, a, b):
        print(f"  note: {line}")
    _print_verdict(v)
    if report is not None:
        _print_reproduced(report.verdict, v)
    return 0 if v.passed else 1


def _print_verdict(v) -> None:
    print(f"case {v.case_id}: {Status(v.status).value.upper()}")
    for m in v.failures:
        print(f"  {m.status.value.upper()} {mismatch_line(m)}")
    for i in v.info:
        print("  info " + i)


def _print_reproduced(saved, v) -> None:
    """The saved verdict beside this replay's, and whether the replay reproduced it."""
    print(f"  saved verdict: {Status(saved.status).value.upper()}" + (f" — {mismatch_line(saved.first)}" if saved.first else ""))
    same = _key(saved) == _key(v)
    print("  reproduced: " + ("yes, same verdict and first mismatch" if same else "NO — the verdict differs from the saved one"))


def _changed_files(report, a: str, b: str) -> list[str]:
    """A file implementation whose bytes differ from the ones the report recorded."""

    if report is None:
        return []
    lines = []
    for role, saved, name in (("A", report.a, a), ("B", report.b, b)):
        now = registry.get(name).source
        if saved.source and now is not None and now.sha256 != saved.source.get("sha256"):
            lines.append(f"{role} {now.path} has changed since the report (sha256 {now.sha256[:16]}, "
                         f"recorded {saved.source['sha256'][:16]}): this replays other code")
    return lines


def _readable_root(root: str) -> Path:
    """--root is only read here: it may be missing (nothing found), not a file."""

    path = Path(root)
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"--root {path}: {parent} is a file, not a folder; give the folder holding the runs")
    return path


def _path_hint(report, a: str, b: str, args) -> str:
    """The replay line with the PYTHONPATH the report recorded for a custom module."""
    if report is None:
        return ""
    entries = [info.path_entry for info in (report.a, report.b) if info.name in (a, b) and info.path_entry]
    if not entries:
        return ""
    root = [("--root", args.root)] if args.root != options.DEFAULT_ROOT else []
    return (f"; the report recorded it as imported from {':'.join(dict.fromkeys(entries))}: "
            + command_line.line("replay", args.target, options=root, path_entries=entries))


def _key(v):
    f = v.first
    return (v.status, None if f is None else (f.check, f.impl, f.row, f.col, tuple(sorted(f.values.items())), f.lanes, f.rows))
