"""Run the grid of configurations (remap_ab/grid.toml) through implementations A and B
and the oracle, one row per case in <root>/<run>/results.csv and a report for every
case that does not pass.

On the CPU the default keeps the grid points with at most 3 token rows (576 of 1728),
so the sweep finishes in a few minutes on 2 cores; --max-tokens 1024 runs them all.
Exit status: 0 every case passed, 1 some case did not, 2 bad input.
"""

from __future__ import annotations

import sys


def add_arguments(p):
    p.add_argument("--list", action="store_true", help="print the selected configurations, one per line with its case ID, and nothing else")
    p.add_argument("--a", default=None, help="implementation A: old, new, oracle or a dotted module path (default old)")
    p.add_argument("--b", default=None, help="implementation B (default new)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default: cuda when present")
    p.add_argument(
        "--filter", action="append", default=[], metavar="NAME=V[,V...]",
        help="keep configurations whose grid dimension (path, k, tokens, invalid, oor, dcp, rank, flags, layout, "
        "table, negatives, requests) or config field has one of the values; repeatable (all must hold)",
    )
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="skip grid points with more than N token rows (default: 3 on cpu, none on cuda)")
    p.add_argument("-j", "--workers", type=int, default=None, metavar="N",
                   help="worker processes (default: one per GPU on cuda, one per core on cpu; 0: in this process). "
                        "Worker i runs on GPU i mod G, honouring CUDA_VISIBLE_DEVICES")
    p.add_argument("--batch", type=int, default=None, metavar="N", help="cases per batch (default 64 on cuda, 1 on cpu)")
    p.add_argument("--root", default="reports", help="folder holding the runs (default reports)")
    p.add_argument("--run", default=None, metavar="NAME", help="run name (default: timestamp-A-vs-B-device)")
    p.add_argument("--resume", action="store_true", help="continue the run named by --run (default: the newest) without repeating a case")
    p.add_argument("--grid", default=None, metavar="FILE", help="another grid file (default: the packaged remap_ab/grid.toml)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def main(args) -> int:
    from remap_ab import grid as gridmod
    from remap_ab.errors import ConfigError
    from remap_ab.sweep import Sweep, SweepOptions, format_summary, select

    if args.list:
        g = gridmod.load(args.grid)
        pts = select(g, args.filter, args.max_tokens)
        sys.stdout.write("".join(p.line() + "\n" for p in pts))
        return 0
    if args.resume and (args.a or args.b or args.filter or args.max_tokens is not None or args.grid):
        raise ConfigError("--resume continues a run with its own settings; drop --a/--b/--filter/--max-tokens/--grid")
    opts = SweepOptions(
        a=args.a or "old",
        b=args.b or "new",
        device=args.device,
        filters=args.filter,
        max_tokens=args.max_tokens,
        workers=args.workers,
        batch=args.batch,
        root=args.root,
        run=args.run,
        resume=args.resume,
        grid_file=args.grid,
        progress=not args.no_progress,
    )
    sweep = Sweep(opts)
    sweep.prepare()
    if sweep.already:
        print(f"resuming {sweep.folder}: {sweep.already} cases already done, {len(sweep.todo)} to run", file=sys.stderr)
    summary = sweep.run()
    print(format_summary(summary))
    return 0 if summary["passed"] else 1
