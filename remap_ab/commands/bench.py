"""Time implementation A (old) against B (new) inside CUDA graphs, on the pull
request's grid (index_topk 512 and 2048 x 1, 256, 1024 tokens) for the counts path
(plain convert with return_valid_counts) and the DCP 4 compaction path.

Each cell is gated first: both implementations run on the exact inputs that will be
timed and are judged against the oracle; a disagreeing pair is refused, not timed.
Prints the measured table beside the PR's GB200 figures, the floor (an empty Triton
kernel with each implementation's grid, timed the same way) and the achieved bandwidth
against the H200's HBM peak; writes bench.csv, bench.json and a chart (bench.png with
matplotlib, else bench.svg) into --out. Needs a CUDA device. Exit status: 0 all cells
timed and verified, 1 a cell refused or failing its post-timing check, 2 bad input or
no GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from remap_ab.commands.common import draw_chart, environment, int_list


def add_arguments(p):
    p.add_argument("--a", default="old", help="implementation A (default old)")
    p.add_argument("--b", default="new", help="implementation B (default new)")
    p.add_argument("--topk", default="512,2048", help="K values (default 512,2048)")
    p.add_argument("--tokens", default="1,256,1024", help="token counts (default 1,256,1024)")
    p.add_argument("--paths", default="counts,dcp", help="counts (convert + return_valid_counts) and/or dcp (DCP 4 compaction)")
    p.add_argument("--calls", type=int, default=200, help="calls captured per graph (default 200)")
    p.add_argument("--repeats", type=int, default=20, help="timed replays per graph (default 20)")
    p.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    p.add_argument("--out", default="runs/bench", help="folder for the artifacts (default runs/bench)")


def main(args) -> int:
    from remap_ab import bench
    from remap_ab.errors import ConfigError

    bench.require_cuda()  # first, before any work: one line and exit 2 without a GPU
    from remap_ab import backend

    backend.select("cuda")
    if args.calls < 1 or args.repeats < 1:
        raise ConfigError("--calls and --repeats must be at least 1")
    paths = [p for p in args.paths.split(",") if p]
    configs = bench.bench_cases(int_list(args.topk, "--topk"), int_list(args.tokens, "--tokens"), paths, seed=args.seed)
    env = environment("cuda")
    print(f"bench {args.a} vs {args.b} on {env['gpu']} (torch {env['torch']}, triton {env['triton']}): "
          f"{len(configs)} cells, {args.calls} calls per graph, {args.repeats} repeats", flush=True)

    def progress(cell):
        r = cell.row()
        if cell.status == "refused":
            print(f"  {r['path']:>6} K={r['topk']:<5} T={r['tokens']:<5} REFUSED: {cell.why}", flush=True)
        else:
            print(f"  {r['path']:>6} K={r['topk']:<5} T={r['tokens']:<5} {r['a_us']:.2f} -> {r['b_us']:.2f} µs "
                  f"({r['speedup']:.2f}x); floors {r['floor_a_us']:.2f} / {r['floor_b_us']:.2f}", flush=True)

    cells = bench.run_bench(configs, args.a, args.b, calls=args.calls, repeats=args.repeats, progress=progress)

    meta = {**env, "a": args.a, "b": args.b, "calls": args.calls, "repeats": args.repeats}
    return write_report(cells, Path(args.out), meta)


def write_report(cells, out_dir: Path, meta: dict) -> int:
    """Artifacts first (so a printing problem cannot lose them), then the table."""
    from remap_ab import bench

    out_dir.mkdir(parents=True, exist_ok=True)
    bench.table(cells).to_csv(out_dir / "bench.csv", index=False)
    meta = {**meta, "hbm_peak_bytes_per_s": bench.H200_HBM_PEAK_BYTES_PER_S,
            "pr_gb200_us": {f"{k}x{t}": v for (k, t), v in bench.PR_GB200_US.items()}}
    rows = [{**c.row(), "samples_us": {k: t.samples for k, t in c.times.items()}} for c in cells]
    (out_dir / "bench.json").write_text(json.dumps({"meta": meta, "cells": rows}, indent=2, default=str) + "\n")
    chart = draw_chart(_chart, out_dir, cells, meta.get("gpu", "GPU"))

    import pandas as pd

    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print()
        print("µs per call inside CUDA graphs: median ±half the min-max range over repeats; "
              "floor = empty Triton kernel with the same grid; GB/s = minimum bytes moved / time (% of 4.8 TB/s HBM peak)")
        print(bench.printable(cells).to_string(index=False))
    headline = [c for c in cells if c.config.topk == 2048 and c.config.tokens == 1024 and bench.path_of(c.config) == "counts" and c.times]
    if headline:
        r = headline[0].row()
        print(f"\nheadline: counts path, K=2048, 1024 tokens: {r['a_us']:.2f} -> {r['b_us']:.2f} µs = {r['speedup']:.2f}x "
              f"(PR on GB200: 12.22 -> 3.84 µs = {12.22 / 3.84:.2f}x)")
    print(f"wrote {out_dir / 'bench.csv'}, {out_dir / 'bench.json'}, {chart}")
    bad = [c for c in cells if c.status == "refused" or c.verified_in_graph is False]
    for c in bad:
        print(f"FAIL {bench.path_of(c.config)} K={c.config.topk} T={c.config.tokens}: {c.why}")
    return 1 if bad else 0


def _chart(out_dir: Path, cells, gpu: str) -> Path:
    from remap_ab.charts import bar_chart

    groups = [f"{c.config.compacts and 'dcp' or 'counts'} K={c.config.topk} T={c.config.tokens}" for c in cells]
    nan = float("nan")
    a, b = (cells[0].a, cells[0].b) if cells else ("a", "b")
    series = {
        a: [c.times["a"].median if c.times else nan for c in cells],
        b: [c.times["b"].median if c.times else nan for c in cells],
        f"floor {a}": [c.times["floor_a"].median if c.times else nan for c in cells],
        f"floor {b}": [c.times["floor_b"].median if c.times else nan for c in cells],
    }
    return bar_chart(out_dir / "bench", f"µs per call in CUDA graphs — {gpu}", groups, series, "µs per call (log)", log=True)
