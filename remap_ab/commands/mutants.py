"""Run the seeded-mutant catalogue (remap_ab/mutants.py) against the suite and print
the kill matrix.

For each mutant: generate it from the real kernel source into a temporary package,
prove it observable (a witness case where its output differs from the real kernel's),
then run (a) the ci-profile property suite (tests/test_properties_*.py) in a
subprocess with the mutant as implementation A (mutant of old) or B (mutant of new),
stopping at the first failing test, and (b) a small sweep subset, stopping at the
first failing case. --full runs every test and case, to show every check that kills.

Exit status: 0 when every mutant is killed (and every declared-equivalent one shows
no difference), 1 when one survives or cannot be shown to change any output, 2 on a
usage error or a catalogue edit that no longer matches the kernels.
"""

from __future__ import annotations

import difflib
import json
import sys
import time
from dataclasses import asdict


def add_arguments(p):
    p.add_argument("--list", action="store_true", help="list the catalogue and exit (with -v: each mutant's source edit)")
    p.add_argument("-v", "--verbose", action="store_true", help="with --list: show each edit as a diff; else: every kill in detail")
    p.add_argument("--only", action="append", metavar="ID[,ID]", help="run only these mutants (repeatable)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    p.add_argument("--full", action="store_true", help="run every property and sweep case (no stop at the first kill)")
    p.add_argument("--no-props", action="store_true", help="skip the property suite")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep subset")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant check (default 600)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--keep", metavar="DIR", help="generate the mutant packages in DIR and keep them")


def main(args) -> int:
    from remap_ab import mutants as M

    only = [i for chunk in (args.only or []) for i in chunk.split(",") if i]
    selected = M.catalogue(only)
    if args.list:
        _list(M, selected, args.verbose)
        return 0

    live = [m for m in selected if not m.equivalent]
    equiv = [m for m in selected if m.equivalent]
    files = M.property_files()
    mode = "full (every check to the end)" if args.full else "fast (each check stops at its first kill)"
    print(
        f"remap-ab mutants: {len(live)} mutants + {len(equiv)} declared equivalent, -j {args.jobs}, {mode}\n"
        f"  properties: {'skipped' if args.no_props else f'{len(files)} files, REMAP_AB_PROFILE=ci'}; "
        f"sweep subset: {'skipped' if args.no_sweep else f'{len(M.sweep_subset())} cases'}",
        flush=True,
    )
    start = time.perf_counter()

    def progress(r):
        print(f"  {r.verdict:>10}  {r.id:<28} {r.seconds:6.1f} s", flush=True)

    results = M.run_all(
        selected, jobs=args.jobs, full=args.full, props=not args.no_props, sweep=not args.no_sweep,
        timeout=args.timeout, keep=args.keep, progress=progress,
    )
    wall = time.perf_counter() - start
    _print_matrix(results, wall, args.verbose)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"wall_seconds": wall, "mutants": [asdict(r) | {"verdict": r.verdict} for r in results]}, f, indent=2)
    bad = [r for r in results if r.verdict not in ("killed", "equivalent")]
    return 1 if bad else 0


def _list(M, selected, verbose):
    print(f"{len(selected)} mutants ({sum(1 for m in selected if m.equivalent)} declared equivalent, never counted)")
    for m in selected:
        tag = "  [equivalent]" if m.equivalent else ""
        print(f"  {m.id:<28} {m.target:<4} {m.area:<22} {m.description}{tag}")
        if verbose:
            src = M.kernel_source(m.target)
            diff = difflib.unified_diff(
                src.splitlines(), M.mutated_source(m).splitlines(),
                f"kernels_{m.target}/_remap.py", f"{m.package}/_remap.py", n=0, lineterm="",
            )
            for line in list(diff)[2:]:
                print("      " + line)
            if m.equivalent:
                print("      equivalent: " + m.equivalent)


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1] if nodeid else ""


def _cell(check: dict | None) -> str:
    if check is None:
        return "-"
    st = check["status"]
    if st != "killed":
        return st.upper() if st == "survived" else st
    if check["check"] == "sweep":
        return f"case {check['examples']} ({check['killer']}) {check['seconds']:.1f}s"
    ex = check.get("examples")
    how = " @example" if check.get("how") == "regression @example" else ""
    n = f" ex {ex}{how}" if ex is not None else ""
    return f"{_short(check['killer'])}{n} {check['seconds']:.1f}s"


def _print_matrix(results, wall, verbose):
    print()
    print("kill matrix (properties: first failing test, its examples up to the kill, time; sweep: first failing case)")
    head = f"{'mutant':<28} {'side':<4} {'witness':<8} {'properties':<58} {'sweep':<38} verdict"
    print(head)
    print("-" * len(head))
    for r in results:
        w = "yes" if r.witness else ("none" if r.equivalent else "NONE")
        props = _cell(r.checks.get("properties")) if not r.equivalent else "(not run: equivalent)"
        sweep = _cell(r.checks.get("sweep")) if not r.equivalent else ""
        print(f"{r.id:<28} {r.target:<4} {w:<8} {props:<58} {sweep:<38} {r.verdict.upper()}")
    counted = [r for r in results if not r.equivalent]
    killed = [r for r in counted if r.verdict == "killed"]
    by_props = [r for r in counted if r.checks.get("properties", {}).get("status") == "killed"]
    by_sweep = [r for r in counted if r.checks.get("sweep", {}).get("status") == "killed"]
    print("-" * len(head))
    print(
        f"killed {len(killed)}/{len(counted)} (properties {len(by_props)}, sweep subset {len(by_sweep)}); "
        f"{len(results) - len(counted)} declared equivalent, not counted; wall {wall:.1f} s"
    )
    print()
    print("witnesses (the mutant changes this output of the real kernel):")
    for r in results:
        if r.witness:
            from remap_ab.mutants import Witness

            print(f"  {r.id}: {Witness(**r.witness).line()}")
        elif r.equivalent:
            print(f"  {r.id}: no difference on {r.witness_tried} cases (declared equivalent: {r.equivalent})")
        else:
            print(f"  {r.id}: NO WITNESS in {r.witness_tried} cases — not counted as a kill")
    problems = [r for r in results if r.verdict not in ("killed", "equivalent")]
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
