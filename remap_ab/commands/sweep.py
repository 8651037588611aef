"""Run the grid of configurations (remap_ab/subjects/remap/grid/grid.toml) through implementations A and B
and the oracle, one row per case in <root>/<run>/results.csv and a report folder for
the first failing cases of each failure class (--reports).

Every device runs the whole grid by default: on 2 CPU cores (the Triton interpreter,
batched) about 3 minutes (docs/performance.md); the size cap at 3 (its option below) keeps a third of
the points (under a minute).
Ctrl-C (SIGINT) or SIGTERM stops the run: the cases in flight are dropped, and the
summary of what ran and failed so far ends with the exact --resume command.
Exit status: 0 every case passed, 1 some case did not (or the run is incomplete),
2 bad input, 3 an internal error of remap-ab, 130 stopped by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import sys

from remap_ab import options, runtime, subjects
from remap_ab.errors import UsageError
from remap_ab.host.interrupts import as_interrupted, moment
from remap_ab.status import plural
from remap_ab.subject import command_part
from remap_ab.sweep import junit
from remap_ab.sweep.run import Sweep, SweepOptions
from remap_ab.sweep.run_folder import resume_command
from remap_ab.sweep.summary import format_summary


def add_arguments(p):
    p.add_argument("--list", action="store_true",
                   help="print the configurations this sweep would run on this device (size cap applied; "
                        "a note on stderr says what was left out), one per line with its case ID")
    options.add_implementations(p, decided_later=("the subject's: old for the remap, a for topology; with --resume, "
                                                  "the run's own", "the subject's: new, or b; with --resume, the run's own"))
    options.add_device(p)
    options.add(p, options.SUBJECT, options.FILTER, options.MAX_SIZE)
    p.add_argument("-j", "--workers", type=options.non_negative_int, default=None, metavar="N",
                   help="worker processes (default: one per GPU on cuda, one per core on cpu; 0: in this process, "
                        "without crash isolation or --case-timeout). Worker i runs on GPU i mod G, honouring "
                        "CUDA_VISIBLE_DEVICES")
    options.add(p, options.BATCH)
    p.add_argument("--case-timeout", type=options.positive_float, default=None, metavar="SECONDS",
                   help="a case without a verdict after this long gets the verdict timeout; its worker is "
                        "replaced and the sweep goes on (default 900: a 1024-token case on the CPU fits; "
                        "a batch gets one case's time, then is re-run case by case)")
    options.add_memcheck(p)
    options.add_call_checks(p)
    options.add_reports(p, resumed=True)
    options.add_bisect(p)
    options.add_root(p, "runs")
    p.add_argument("--run", default=None, metavar="NAME",
                   help="run name: the folder under --root, a name and not a path (default: timestamp-A-vs-B-device)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run named by --run (default: the newest) without repeating a case")
    p.add_argument("--repair", action="store_true",
                   help="with --resume: re-run the cases whose results.csv rows fail validation (a status that is "
                        "no verdict, a damaged field), keeping every valid row")
    p.add_argument("--grid", default=None, metavar="NAME|FILE",
                   help="the grid: a shipped one by name (pr: remap_ab/subjects/remap/grid/grid.toml, the default; models: "
                        "the index widths of the models that run this kernel, remap_ab/subjects/remap/grid/grids/models.toml; "
                        "callers: exactly the calls the attention backends make, each named by its backend, "
                        "remap_ab/subjects/remap/grid/grids/callers.toml) or a TOML file")
    p.add_argument("--trace", default=None, metavar="DIR",
                   help="run the calls recorded in DIR (remap_ab.record, REMAP_AB_RECORD) instead of a grid: each "
                        "through A, B and the oracle with every check a grid case gets (docs/traces.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.add_argument("--junitxml", metavar="FILE", default=None,
                   help="also write the run as JUnit XML: one testcase per selected case, the verdict line as "
                        "the failure message, the replay command in its output; cases not run are skipped")


def _list(opts: SweepOptions) -> int:
    """The points the sweep would run, one per line, as the subject's selection chose them."""
    subject = subjects.get(opts.subject)
    device = runtime.default_device() if opts.device == "auto" else opts.device
    selection = subject.select(opts.grid_file, list(opts.filters), opts.max_size, opts.a or subject.default_a,
                               opts.b or subject.default_b, device, None)
    command = "sweep" if opts.subject == subjects.DEFAULT else f"sweep --subject {opts.subject}"
    lines, note = subject.listing(selection, list(opts.filters), opts.max_size, device, command)
    # Line by line: one write of the whole list can land in the pipe complete before a
    # reader like ``head -1`` leaves, and then nobody sees that it left (exit 141).
    for line in lines:
        sys.stdout.write(line + "\n")
    print(note, file=sys.stderr)
    return 0


def _trace(args) -> None:
    """--trace DIR: the subject's trace part names the subject that runs DIR as its grid
    (the remap's: remap_ab/subjects/remap/trace_subject.py)."""
    if args.trace is None:
        return
    if args.grid is not None or args.resume:
        raise UsageError("--trace DIR runs the recorded calls as the grid; drop --grid/--resume "
                         "(a trace run resumes with --resume alone)")
    part = command_part(subjects.get(args.subject), "trace", ("NAME",), named=args.subject)
    args.subject, args.grid = part.NAME, args.trace


def main(args) -> int:
    _trace(args)
    opts = SweepOptions.from_args(args)  # validated once; prepare resolves it, a resume from run.json
    if args.list:
        return _list(opts)
    if args.repair and not args.resume:
        raise UsageError("--repair mends a run folder that --resume continues; add --resume (and --run NAME)")
    if args.resume and (args.a or args.b or args.filter or args.max_size is not None or args.grid or args.memcheck
                        or args.device != "auto" or args.reports is not None or args.subject != subjects.DEFAULT):
        raise UsageError("--resume continues a run with its own settings; "
                         f"drop --a/--b/--subject/--device/--filter/{options.MAX_SIZE.flag}/--grid/--memcheck/--reports")
    if args.junitxml is not None:
        options.checked_output_file(args.junitxml, "--junitxml")
    sweep = Sweep(opts)
    try:
        sweep.prepare()
        moment("prepared")
        for line in sweep.selected.header:  # e.g. the remap's: how each optional parameter is exercised
            print(line, file=sys.stderr)
        for damaged in sweep.repaired:
            print(f"repairing: {damaged.line(sweep.folder / 'results.csv')}; dropped, its case runs again", file=sys.stderr)
        if sweep.already:
            print(f"resuming {sweep.folder}: {plural(sweep.already, 'case')} already done, {len(sweep.todo)} to run",
                  file=sys.stderr)
        summary = sweep.run()
        print(format_summary(summary))
    except KeyboardInterrupt as exc:  # outside the run's own handling (set-up, the summary): one line
        stopped = as_interrupted(exc)
        folder = getattr(sweep, "folder", None)
        if folder is not None and (folder / "run.json").is_file():
            stopped.then = f"what ran is kept; resume with: {resume_command(folder)}"
        raise stopped from None
    if args.junitxml is not None:
        junit.write(args.junitxml, sweep.folder, sweep.points)
        print(f"JUnit XML: {args.junitxml} ({len(sweep.points)} testcases)", file=sys.stderr)
    if summary["interrupted"]:
        return summary["interrupted_status"]
    return 0 if summary["passed"] else 1
