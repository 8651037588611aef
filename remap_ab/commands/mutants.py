"""Run a subject's seeded-mutant catalogue against the suite and print the kill matrix
of the device it ran on. The subject's mutants are its part (the module its
``parts["mutants"]`` names): the remap's (catalogue.toml there) runs each mutant in a
worker process of its own (``remap_ab/mutants/``); another's (``kill``, ``kill_all``)
judges them in this process, or in -j worker processes.

The remap's:

For each mutant: generate it from the real kernel source into a temporary package,
prove it observable (a witness case where its output differs from the real kernel's),
then run its kill checks, each stopping at its first kill: the sweep subset and the
property suite (its SUITE_PACKAGE; profile ci on the CPU, gpu on CUDA) with the mutant
as implementation A (mutant of old) or B (mutant of new); the race check (repeated
multi-tile runs: permuted program orders on the CPU, quiet and under a contending side
stream on a GPU) for mutants labelled needs_gpu; the memory check of the witness case
for mutants only a memory check can see. --full runs every check on every mutant to
the end.

Exit status: 0 when every mutant is killed, or is declared equivalent and shows no
difference, or is labelled "needs a GPU" on the CPU, or could not be checked here
("not run", said plainly); 1 when one survives, has no witness, or a check broke;
2 on a usage error or a catalogue entry that no longer matches the kernels.

--subject NAME (another subject than the remap): that subject's catalogue (e.g.
remap_ab/subjects/topology/mutants.toml), each mutant's witness judged by the subject's
judge with the mutant as B, after the real kernel passed the same witness; a mutant that
needs a GPU is "needs a GPU" on the CPU, never killed. It takes --list, -v, --only, -j,
--device, --json and --keep; exit status as above.
"""

from __future__ import annotations

import difflib
import importlib
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import as_completed
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

from remap_ab import mutants as M
from remap_ab import options, runtime
from remap_ab.commands.common import options_given, subject_part
from remap_ab.errors import BackendError, MutantError, ReportError, UsageError
from remap_ab.mutants.properties import PROFILE_FOR_DEVICE, property_files
from remap_ab.processes import start
from remap_ab.status import Outcome


def add_arguments(p):
    p.add_argument("--list", action="store_true",
                   help="list the catalogue and exit (with -v: each mutant's source edit)")
    p.add_argument("-v", "--verbose", action="store_true", help="with --list: show each edit as a diff; else: every kill in detail")
    p.add_argument("--only", action="append", metavar="ID[,ID]", help="run only these mutants (repeatable)")
    p.add_argument("-j", "--jobs", type=options.positive_int, default=1, help="mutants run in parallel (default 1)")
    options.add_device(p)
    p.add_argument("--full", action="store_true",
                   help="run every check on every mutant, each to the end (no stop at the first kill)")
    p.add_argument("--no-props", action="store_true", help="skip the property suite")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep subset")
    p.add_argument("--race", action="store_true", help="also run the race check on mutants not labelled needs_gpu")
    p.add_argument("--memcheck", action="store_true",
                   help="also run the memory check (the case run with --memcheck) on every mutant's witness case")
    p.add_argument("--timeout", type=options.positive_float, default=600.0, help="seconds per mutant (default 600)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--keep", metavar="DIR", help="generate the mutant packages in DIR and keep them")
    p.add_argument("--side-by-side", nargs="+", metavar="JSON",
                   help="print the verdicts of earlier --json results (e.g. a CPU and a GPU run) side by side, and exit")
    options.add(p, options.SUBJECT)
    # Each option's default, to tell what a run of another subject's catalogue would leave unused.
    p.set_defaults(_option_defaults={a.dest: a.default for a in p._actions if a.dest != "help"})


def _selected_ids(only) -> list[str]:
    ids = [i.strip() for chunk in (only or []) for i in chunk.split(",") if i.strip()]
    if only is not None and not ids:
        raise UsageError(f"--only {','.join(only)!r} names no mutant id; give ids such as --only blk_le_w "
                         "(`remap-ab mutants --list` lists them)")
    return ids


def _device(choice: str) -> str:
    device = runtime.default_device() if choice == "auto" else choice
    if device == "cuda" and not runtime.cuda_available():
        raise BackendError("--device cuda was asked for but torch sees no CUDA device; use --device cpu (the Triton interpreter)")
    return device


def main(args) -> int:
    if args.side_by_side:
        return _side_by_side(args.side_by_side)
    part = subject_part(args.subject, "mutants", ())
    if hasattr(part, "main"):  # a part that runs its own kill loop (a declared subject's: declare/mutants.py)
        return int(part.main(args) or 0)
    part = subject_part(args.subject, "mutants", ("select",))
    if not getattr(part, "WORKER", False):
        return _subject_main(args, subject_part(args.subject, "mutants", IN_PROCESS))
    selected = part.select(_selected_ids(args.only))
    if args.list:
        _list(part, selected, args.verbose)
        return 0
    if args.no_props and args.no_sweep:
        raise UsageError("--no-props with --no-sweep leaves none of the suite's checks to run, so no mutant could be "
                         "killed by the suite; drop one of them")
    json_path = options.checked_output_file(args.json, "--json") if args.json else None
    keep = options.checked_output_dir(args.keep, "--keep") if args.keep else None
    device = _device(args.device)
    settings = M.MutantSettings(device, args.jobs, args.full, not args.no_props, not args.no_sweep, args.race,
                                args.memcheck, args.timeout, keep)  # the kill loop's, once

    live = [m for m in selected if not m.equivalent]
    equiv = [m for m in selected if m.equivalent]
    profile = PROFILE_FOR_DEVICE[device]
    mode = "full (every check to the end)" if args.full else "fast (each check stops at its first kill)"
    gpu_only = sum(1 for m in live if m.needs_gpu)
    props_line = "skipped" if args.no_props else \
        f"{len(property_files(part.SUITE_PACKAGE))} modules of {part.SUITE_PACKAGE}, profile {profile}"
    print(
        f"remap-ab mutants on {device}: {len(live)} mutants ({gpu_only} labelled needs_gpu) + {len(equiv)} declared "
        f"equivalent, -j {args.jobs}, {mode}\n"
        f"  properties: {props_line}; sweep subset: {'skipped' if args.no_sweep else f'{len(part.subset.sweep_subset())} cases'}",
        flush=True,
    )
    start = time.perf_counter()

    def progress(r):
        print(f"  {str(r.verdict):>12}  {r.id:<30} {r.seconds:6.1f} s", flush=True)

    results = M.run_all(selected, part, settings, progress=progress)
    wall = time.perf_counter() - start
    _print_worker_matrix(part, results, device, wall, args.verbose)
    if json_path:
        payload = {"device": device, "wall_seconds": wall,
                   "mutants": [asdict(r) | {"verdict": r.verdict, "killed_by": r.killed_by} for r in results]}
        try:
            json_path.write_text(json.dumps(payload, indent=2))
        except OSError as exc:
            raise UsageError(f"--json {json_path}: cannot write it ({exc.strerror}); the matrix above is complete") from None
    bad = [r for r in results if r.verdict in M.FAILING]
    return 1 if bad else 0


def _list(part: ModuleType, selected, verbose):
    print(f"{len(selected)} mutants ({sum(1 for m in selected if m.equivalent)} declared equivalent, never counted)")
    for m in selected:
        tag = "  [equivalent]" if m.equivalent else ("  [needs a GPU]" if m.needs_gpu else "")
        tag += {"memcheck": "  [memcheck only]", "call": "  [call checks only]",
                "rejection": "  [rejection calls only]", "speed": "  [speed gate only]"}.get(m.observable, "")
        print(f"  {m.id:<30} {m.target:<4} {m.area:<22} {m.description}{tag}")
        if verbose:
            for line in part.edit_diff(m):
                print("      " + line)
            for label, text in (("equivalent", m.equivalent), ("needs a GPU", m.needs_gpu)):
                if text:
                    print(f"      {label}: {text}")


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1] if nodeid else ""


def _cell(check: dict | None) -> str:
    if check is None:
        return "-"
    st = Outcome(check["status"])
    if st == Outcome.SURVIVED:
        return "SURVIVED"
    if st != Outcome.KILLED:
        return str(st)
    if check["check"] == "properties":
        ex = check.get("examples")
        how = " @example" if check.get("how") == "regression @example" else ""
        n = f" ex {ex}{how}" if ex is not None else ""
        return f"{_short(check['killer'])}{n} {check['seconds']:.1f}s"
    if check["check"] == "race":
        return f"{check['killer']} {check['how']} {check['seconds']:.1f}s"
    if check["check"] in ("memcheck", "call", "rejects", "speed"):
        return f"{check['killer']} {check['seconds']:.1f}s"
    return f"case {check['examples']} ({check['killer']}) {check['seconds']:.1f}s"


MATRIX = ("properties", "sweep", "race", "call", "memcheck", "rejects", "speed")  # the kill matrix's columns


def _print_matrix(device: str, legend: str, columns: list, rows: list, summary: list, needs_gpu: list,
                  needs_gpu_heading: str) -> None:
    """The kill matrix of any subject: ``columns`` (title, width) of which the last is
    left unpadded, a row of cells per mutant, the summary line's parts, and the mutants
    that need a GPU (id, why) under ``needs_gpu_heading``."""
    print()
    print(f"kill matrix on {device} ({legend})")
    head = " ".join([*(f"{title:<{width}}" for title, width in columns[:-1]), columns[-1][0]])
    print(head)
    print("-" * len(head))
    for cells in rows:
        print(" ".join([*(f"{cell:<{width}}" for cell, (_, width) in zip(cells[:-1], columns[:-1])), cells[-1]]))
    print("-" * len(head))
    print("; ".join(summary))
    if needs_gpu:
        print()
        print(needs_gpu_heading)
        for mutant_id, why in needs_gpu:
            print(f"  {mutant_id}: {why}")


def _tally(verdicts: list, by_check: dict, needs_gpu: str, tail: str) -> list[str]:
    """The summary line's parts: the kills (by check, when any check is named), those
    that need a GPU (``needs_gpu`` says what that meant here), not run and failing
    verdicts, and ``tail``."""
    count = {o: verdicts.count(o) for o in Outcome}
    parts = [f"killed {count[Outcome.KILLED]}/{len(verdicts)}"
             + (f" ({', '.join(f'{c} {n}' for c, n in by_check.items())})" if by_check else "")]
    if count[Outcome.NEEDS_GPU]:
        parts.append(f"{count[Outcome.NEEDS_GPU]} need a GPU ({needs_gpu})")
    if count[Outcome.NOT_RUN]:
        parts.append(f"{count[Outcome.NOT_RUN]} not run here")
    parts += [f"{count[o]} {o}" for o in M.FAILING if count[o]]
    return parts + [tail]


def _print_worker_matrix(part: ModuleType, results, device, wall, verbose):
    counted = [r for r in results if not r.equivalent]
    rows = []
    for r in results:
        w = "yes" if r.witness else ("none" if (r.equivalent or r.observable in ("memcheck", "call", "speed") or
                                               (r.needs_gpu and device == "cpu")) else "NONE")
        rows.append([r.id, r.target, w, *(_cell(r.checks.get(c)) for c in MATRIX), str(r.verdict).upper()])
    by = {c: sum(1 for r in counted if r.status_of(c) == Outcome.KILLED) for c in MATRIX}
    summary = _tally([r.verdict for r in counted], by, "not killed here",
                     f"{len(results) - len(counted)} declared equivalent, not counted; wall {wall:.1f} s")
    columns = [("mutant", 30), ("side", 4), ("witness", 8), ("properties", 56), ("sweep", 36), ("race", 30),
               ("call", 20), ("memcheck", 20), ("rejects", 28), ("speed", 20), ("verdict", 0)]
    _print_matrix(device, "properties: first failing test, its examples up to the kill, time; "
                          "sweep: first failing case; race: first failing case and condition; call, memcheck: the witness "
                          "case; rejects: the first call the mutant accepts or rejects otherwise; speed: the witness cell "
                          "under bench's speed gate, GPU only",
                  columns, rows, summary, [(r.id, r.needs_gpu) for r in counted if r.verdict == Outcome.NEEDS_GPU],
                  "needs a GPU (not killed on the CPU, where the catalogue says why the bug cannot show; a race check "
                  "ran the permuted program orders where one was planned):")
    not_run_here = [r for r in counted if r.verdict == Outcome.NOT_RUN]
    if not_run_here:
        print()
        print("not run here (no verdict: neither killed nor survived):")
        for r in not_run_here:
            whys = sorted({c["detail"] for c in r.checks.values() if Outcome(c["status"]) == Outcome.NOT_RUN
                           and "memcheck" in c["check"]}) or sorted({c["detail"] for c in r.checks.values()})
            print(f"  {r.id}: {'; '.join(whys)}")
    print()
    print("witnesses (the mutant changes this output of the real kernel):")

    for r in results:
        if r.witness:
            print(f"  {r.id}: {part.Witness(**r.witness).line()}")
        elif r.equivalent:
            print(f"  {r.id}: no difference on {r.witness_tried} cases (declared equivalent: {r.equivalent})")
        elif r.observable == "memcheck":
            print(f"  {r.id}: outputs unchanged on its witness case, as declared; only the memory check sees it")
        elif r.observable == "call":
            print(f"  {r.id}: outputs unchanged on its witness case, as declared; only the call checks see it")
        elif r.observable == "speed":
            print(f"  {r.id}: outputs unchanged on its witness case, as declared; only the speed gate on a GPU sees it")
        elif r.needs_gpu and device == "cpu":
            print(f"  {r.id}: no difference on its declared case here (needs a GPU)")
        elif r.verdict == Outcome.KILLED:
            print(f"  {r.id}: none on the single witness runs; the race check's kill, with the real kernel "
                  f"passing the same runs, shows it")
        else:
            print(f"  {r.id}: NO WITNESS in {r.witness_tried} cases — not counted as a kill")
    notes = [(r.id, n) for r in results for n in r.notes]
    if notes:
        print()
        for rid, n in notes:
            print(f"note: {rid}: {n}")
    problems = [r for r in results if r.verdict in M.FAILING]
    if verbose or problems:
        print()
        print("details:")
        for r in results:
            if not verbose and r not in problems:
                continue
            if r.error:
                print(f"  {r.id}: {r.error}")
            for name, c in r.checks.items():
                extra = f" (all: {', '.join(_short(k) for k in c['killers'])})" if len(c.get("killers", [])) > 1 else ""
                print(f"  {r.id} [{name}] {c['status']}: {c.get('detail', '')[:300]}{extra}")
    if problems:
        print()
        for r in problems:
            print(f"SURVIVOR/PROBLEM: {r.id} ({r.verdict}): {r.description}", file=sys.stderr)


def _side_by_side(paths) -> int:
    """Verdict and killing checks per mutant, one column per results file."""
    runs = []
    for path in paths:
        try:
            data = json.loads(open(path).read())
            rows = {m["id"]: m for m in data["mutants"]}
            device = str(data["device"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReportError(f"--side-by-side {path}: not a `remap-ab mutants --json` file ({exc})") from None
        runs.append((f"{device} ({path})", rows))
    ids = list(dict.fromkeys(i for _, rows in runs for i in rows))
    width = max(34, *(len(label) + 2 for label, _ in runs))
    print(f"{'mutant':<30} " + " ".join(f"{label:<{width}}" for label, _ in runs))
    for i in ids:
        cells = []
        for _, rows in runs:
            m = rows.get(i)
            if m is None:
                cells.append("(not in this run)")
                continue
            killers = [c for c, v in m["checks"].items() if v["status"] == Outcome.KILLED.value]
            cells.append(f"{str(m['verdict']).upper()}" + (f" by {'+'.join(killers)}" if killers else ""))
        print(f"{i:<30} " + " ".join(f"{c:<{width}}" for c in cells))
    return 0


# --------------------------------------------------------------------------- another subject's catalogue

# What a catalogue judged in this process (or -j workers) holds: the remap's, run in worker
# processes of its own, declares WORKER and the driver's members (remap_ab/mutants/).
IN_PROCESS = ("select", "mutated_source", "kill", "kill_all", "TARGET", "MUTANTS_FILE")
SUBJECT_OPTIONS = frozenset({"list", "verbose", "only", "jobs", "device", "json", "keep", "subject", "side_by_side"})


def _subject_main(args, catalogue: ModuleType) -> int:
    unused = options_given(args, SUBJECT_OPTIONS)
    if unused:
        raise UsageError(f"{', '.join(unused)}: the remap catalogue's options; mutants --subject {args.subject} "
                         "takes --list, -v, --only, -j, --device, --json and --keep")
    try:
        selected = catalogue.select(_selected_ids(args.only))
        for m in selected:  # fail fast, before anything runs, if an edit no longer applies
            catalogue.mutated_source(m)
    except ValueError as exc:
        raise MutantError(str(exc)) from None
    if args.list:
        _list_subject(catalogue, selected, args.verbose)
        return 0
    json_path = options.checked_output_file(args.json, "--json") if args.json else None
    keep = options.checked_output_dir(args.keep, "--keep") if args.keep else None
    device = runtime.select(_device(args.device))
    gpu_only = sum(1 for m in selected if m.needs_gpu)
    jobs = min(args.jobs, len(selected)) or 1
    where = "in this process" if jobs == 1 else f"in {jobs} worker processes"
    print(f"{args.subject} mutants on {device}: {len(selected)} mutants ({gpu_only} labelled "
          f"needs_gpu), each witness judged {where} with the mutant as B", flush=True)
    folder = keep or Path(tempfile.mkdtemp(prefix=f"remap-ab-{args.subject}-mutants-"))
    start = time.perf_counter()

    def progress(k):
        print(f"  {str(k.verdict):>12}  {k.id:<30} {k.seconds:6.1f} s", flush=True)

    try:
        if jobs == 1:
            results = catalogue.kill_all(selected, device, folder, progress=progress)
        else:
            results = _kill_in_workers(catalogue, selected, device, folder, jobs, progress)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    wall = time.perf_counter() - start
    _print_subject_matrix(results, device, wall, args.verbose)
    if json_path:
        payload = {"subject": args.subject, "device": device, "wall_seconds": wall,
                   "mutants": [asdict(k) | {"verdict": str(k.verdict),
                                            "checks": {k.check: {"status": str(k.verdict), "detail": k.detail}}}
                               for k in results]}
        try:
            json_path.write_text(json.dumps(payload, indent=2))
        except OSError as exc:
            raise UsageError(f"--json {json_path}: cannot write it ({exc.strerror}); the matrix above is complete") from None
    return 1 if any(k.verdict in M.FAILING for k in results) else 0


def _kill_in_workers(catalogue: ModuleType, selected, device: str, folder: Path, jobs: int, progress) -> list:
    """``catalogue.kill`` of each mutant in ``jobs`` worker processes (each keeps the real
    kernel's control rows of its own), printed as they finish, returned in catalogue order."""
    with start.executor(jobs) as pool:
        futures = {pool.submit(_kill_one, catalogue.__name__, m, device, str(folder)): i for i, m in enumerate(selected)}
        done: dict = {}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            progress(done[futures[future]])
    return [done[i] for i in range(len(selected))]


def _kill_one(catalogue: str, mutant, device: str, folder: str):
    """One mutant's row, in a worker process (``_kill_in_workers``)."""
    runtime.select(device)
    return importlib.import_module(catalogue).kill(mutant, device, Path(folder))


def _list_subject(catalogue: ModuleType, selected, verbose: bool) -> None:
    print(f"{len(selected)} mutants of {catalogue.TARGET.name} ({catalogue.MUTANTS_FILE})")
    for m in selected:
        print(f"  {m.id:<30} {m.caught_by:<10} {m.description}" + ("  [needs a GPU]" if m.needs_gpu else ""))
        if verbose:
            source = catalogue.TARGET.read_text()
            diff = difflib.unified_diff(source.splitlines(), catalogue.mutated_source(m).splitlines(),
                                        catalogue.TARGET.name, f"{m.module_name}.py", n=0, lineterm="")
            for text in list(diff)[2:]:
                print("      " + text)
            if m.needs_gpu:
                print(f"      needs a GPU: {m.needs_gpu}")


def _print_subject_matrix(results, device: str, wall: float, verbose: bool) -> None:
    width = max([len(k.witness) for k in results] + [7])
    columns = [("mutant", 26), ("caught by", 10), ("witness", width), ("check", 9), ("verdict", 12), ("detail", 0)]
    rows = [[k.id, k.caught_by, k.witness, k.check, str(k.verdict).upper(),
             k.detail if verbose or k.verdict != Outcome.NEEDS_GPU else "see below"] for k in results]
    by_check: dict = {}
    for k in results:
        if k.verdict == Outcome.KILLED:
            by_check[k.check] = by_check.get(k.check, 0) + 1
    _print_matrix(device, "judge: the witness case through the subject's judge, the mutant as B, after the real kernel "
                          "passed it; rejection: the declared rejection call; repeats: a needs_gpu witness the judge "
                          "passed, run again against A on a GPU; schedule: the witness under its CPU interpreter "
                          "schedule (relaxed stores), the real kernel equal to A there",
                  columns, rows, _tally([k.verdict for k in results], by_check, "not run, not killed here",
                                        f"wall {wall:.1f} s"),
                  [(k.id, k.needs_gpu) for k in results if k.verdict == Outcome.NEEDS_GPU],
                  "needs a GPU (not run here, where the catalogue says why the bug cannot show):")
    for k in results:
        if k.verdict in M.FAILING:
            print(f"SURVIVOR/PROBLEM: {k.id} ({k.verdict}): {k.description}: {k.detail}", file=sys.stderr)
