"""A file's whole history, A/B'd pair by pair: every revision of --repo that touched PATH
(git log --follow: renames followed; the first parent only, unless --all-parents), oldest
first, each swept against the revision before it that loads (or every one against
--baseline REV) on the grid (--grid, default the PR grid). One table, printed as each
pair finishes: revision, date, subject line, verdict (PASS; FAIL by check; API change;
not loadable: why; skipped: the file's bytes did not change), cases run, the first
behaviour change in a line. Each pair's sweep run folder (results, summary, report
folders of failing cases) is kept in the history folder under --root; --resume continues
a history without running a finished pair again (docs/history.md).

Exit status: 0 every revision passed (or was skipped, or is the first), 1 some did not
(a pair failed, a revision does not load, or the history is not finished), 2 bad input
(not a git repository, a PATH no revision holds, a bad range), 3 an internal error of
remap-ab, 130 stopped by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import json
import sys

from remap_ab import options, subjects
from remap_ab.errors import UsageError
from remap_ab.history import row as rowmod
from remap_ab.history.run import History, HistoryOptions, refuse_with_resume
from remap_ab.status import plural


def add_arguments(p):
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="the implementation file, relative to the repository's top folder, as it is named at the "
                        "walk's end (earlier names are followed); not with --resume")
    options.add(p, options.REPO.but(help="the git repository holding PATH (default $REMAP_AB_REPO, else the current "
                                         "directory)"))
    p.add_argument("--range", default=None, metavar="REV1..REV2",
                   help="only the revisions after REV1 up to REV2 (REV2 empty: HEAD), the first compared with the "
                        "file at REV1; REV alone: every revision up to REV (default: up to HEAD)")
    p.add_argument("--baseline", default=None, metavar="REV",
                   help="compare every revision with the file at REV instead of with the revision before it")
    p.add_argument("--all-parents", action="store_true",
                   help="walk every parent of a merge (the merged branches' commits too, in git log's order), not "
                        "only the first")
    options.add(p, options.SUBJECT)
    p.add_argument("--grid", default=None, metavar="NAME|FILE",
                   help="the grid each pair sweeps, as `remap-ab sweep --grid` takes it (default the subject's PR grid)")
    options.add(p, options.FILTER, options.MAX_SIZE)
    options.add_device(p)
    p.add_argument("-j", "--workers", type=options.non_negative_int, default=None, metavar="N",
                   help="each pair's sweep: worker processes (default: one per GPU on cuda, one per core on cpu; "
                        "0: in this process, the fastest start for a small grid)")
    options.add(p, options.BATCH)
    p.add_argument("--case-timeout", type=options.positive_float, default=None, metavar="SECONDS",
                   help="each pair's sweep: a case without a verdict after this long gets the verdict timeout "
                        "(default the sweep's, 900)")
    options.add_reports(p, resumed=True)
    options.add_root(p, "history folders")
    p.add_argument("--run", default=None, metavar="NAME",
                   help="the history folder's name under --root (default history-TIMESTAMP-FILE)")
    p.add_argument("--resume", action="store_true",
                   help="continue the history named by --run (default: the newest under --root) with its own "
                        "settings; finished pairs are not run again, one cut short continues its sweep")
    p.add_argument("--json", action="store_true",
                   help="print the history as one JSON document (settings, rows, counts, exit status) instead of the "
                        "table")
    p.add_argument("--no-progress", action="store_true", help="no line on stderr as each pair's sweep starts")


def _given_with_resume(args) -> list[str]:
    given = [flag for flag, value in (("PATH", args.path), ("--repo", args.repo), ("--range", args.range),
                                      ("--baseline", args.baseline), ("--grid", args.grid),
                                      (options.MAX_SIZE.flag, args.max_size), ("--reports", args.reports)) if value is not None]
    given += [flag for flag, on in (("--all-parents", args.all_parents), ("--filter", bool(args.filter)),
                                    ("--subject", args.subject != subjects.DEFAULT),
                                    ("--device", args.device != "auto")) if on]
    return given


def main(args) -> int:
    opts = HistoryOptions.from_args(args)  # validated once; prepare resolves it, a resume from history.json
    refuse_with_resume(opts, _given_with_resume(args))
    if not args.resume and not args.path:
        raise UsageError("give PATH, the file whose history to walk (or --resume to continue a history)")

    def on_row(row: rowmod.Row) -> None:
        if not args.json:
            for line in rowmod.lines(row):
                print(line, flush=True)

    def on_pair(line: str) -> None:
        if not args.no_progress:
            print(line, file=sys.stderr, flush=True)

    history = History(opts, on_row, on_pair)
    history.prepare()
    o = history.opts  # resolved
    if not args.json:
        against = f"--baseline {o.baseline[:12]}" if o.baseline else "the revision before it that loads"
        start, _, end = str(o.bounds).rpartition("..")
        bounds = f"after {start[:12]} up to {end[:12]}" if start else f"up to {end[:12]}"
        print(f"history of {o.path} in {o.repo} ({bounds}): {plural(len(history.walk.revisions), 'revision')}, "
              f"each against {against}; on {o.sweep.device}; run folders in {history.state.folder}", flush=True)
        print(rowmod.header(), flush=True)
    doc = history.run()
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return history.status()
    print(result_line(doc))
    return history.status()


def result_line(doc: dict) -> str:
    counts = ", ".join(f"{verdict} {n}" for verdict, n in doc["counts"].items())
    timing = (f"; {plural(doc['pairs_run'], 'pair')} swept, {doc['seconds_per_pair']:.2f} s each on average"
              if doc["pairs_run"] else "; no pair swept")
    if doc["pairs_done_before"]:
        timing += f"; {plural(doc['pairs_done_before'], 'pair')} finished before, not run again"
    if not doc["complete"]:
        return (f"result: INCOMPLETE — {len(doc['rows'])} of {plural(doc['revisions'], 'revision')} done "
                f"({counts}){timing}; resume with: {doc['resume']}")
    if doc["passed"]:
        return f"result: PASS — every revision passed, was skipped or is the first ({counts}){timing}"
    failing = sum(1 for r in doc["rows"] if r["verdict"] not in rowmod.PASSING)
    return f"result: FAIL — {failing} of {plural(doc['revisions'], 'revision')} did not pass ({counts}){timing}"
