"""Count the distinct outputs each implementation produces when a DCP compaction case
is run many times: on a GPU quiet and with a contending side stream, on the CPU under
permuted interpreter schedules (each schedule is one run).

Writes nondet.json, nondet.csv and a chart (nondet.png with matplotlib, else
nondet.svg) into <root>/nondet/<time>-<device>/ (or --out), beside the sweep's runs.
Exit status: 0 when the failure rule holds (an implementation that promises column
order — the new kernel as a single tile — gives exactly one output; counts never vary;
every output meets the SPEC), 1 when it is broken, 2 on bad input. Tiled implementations' multiplicity is reported, never failed.
"""

from __future__ import annotations

import json
from pathlib import Path

from remap_ab import runtime
from remap_ab.commands.common import draw_chart, environment, int_list
from remap_ab.errors import UsageError
from remap_ab.options import add_device, add_root, checked_output_dir, non_negative_int, positive_int
from remap_ab.subjects.remap import nondet
from remap_ab.subjects.remap.charts import bar_chart, pivot

CPU_DEFAULT_TOKENS = "1,2,8"  # 256 tokens of the old kernel at K=2048 is ~20 s a run in the interpreter
GPU_DEFAULT_TOKENS = "1,2,8,256"


def add_arguments(p):
    # Not --a/--b: nondet characterises each implementation on its own, one or many.
    p.add_argument("--impls", default="old,new",
                   help="comma-separated implementations, each characterised on its own: old, new, oracle or a "
                        "dotted module path (default old,new)")
    p.add_argument("--topk", default="2048,384", help="K values: one class each (default 2048,384: single tile vs tiled)")
    p.add_argument("--tokens", default=None, help=f"token counts (default {GPU_DEFAULT_TOKENS} on GPU, {CPU_DEFAULT_TOKENS} on CPU)")
    p.add_argument("--runs", type=positive_int, default=None, help="runs per case and condition (default 20 on GPU; 8 schedules on CPU)")
    p.add_argument("--conditions", default=None, help="GPU: quiet,contended (default both); CPU: schedules")
    p.add_argument("--dcp-size", type=positive_int, default=4,
                   help="DCP world size, 2 or more: size 1 has no compaction to study (default 4; rank 0 is run)")
    p.add_argument("--invalid-ratio", type=float, default=0.3, help="fraction of -1 lanes (default 0.3)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="input seed (default 0)")
    add_device(p)
    add_root(p, "nondet/ artifacts, beside the sweep's runs")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for the artifacts (default <root>/nondet/<time>-<device>)")


def main(args) -> int:
    if args.dcp_size < 2:
        raise UsageError(f"--dcp-size {args.dcp_size}: nondet studies DCP compaction, which needs 2 or more ranks "
                         f"(size 1 delegates to the plain convert and compacts nothing)")
    impl_names = [n.strip() for n in args.impls.split(",") if n.strip()]
    if not impl_names:
        raise UsageError(f"--impls {args.impls!r} names no implementation; give e.g. old,new")
    device = runtime.select(args.device)
    out_dir = checked_output_dir(args.out or _default_out(args.root, device), "--out" if args.out else "--root")
    on_gpu = device == "cuda"
    tokens = int_list(args.tokens or (GPU_DEFAULT_TOKENS if on_gpu else CPU_DEFAULT_TOKENS), "--tokens")
    topks = int_list(args.topk, "--topk")
    runs = args.runs if args.runs is not None else (20 if on_gpu else 8)
    default_conditions = ",".join(nondet.GPU_CONDITIONS if on_gpu else nondet.CPU_CONDITIONS)
    conditions = [c.strip() for c in (args.conditions or default_conditions).split(",") if c.strip()]
    if not conditions:
        raise UsageError(f"--conditions {args.conditions!r} names no condition; give e.g. {default_conditions}")
    configs = nondet.nondet_cases(topks, tokens, dcp_size=args.dcp_size, invalid_ratio=args.invalid_ratio, seed=args.seed)

    env = environment(device)
    where = "GPU " + env["gpu"] if on_gpu else "CPU (Triton interpreter, permuted program schedules)"
    print(f"nondet on {where}: {len(configs)} cases x {len(impl_names)} implementations x {conditions} x {runs} runs", flush=True)
    results = nondet.run_nondet(
        configs, impl_names, device, runs, conditions,
        progress=lambda m: print(f"  {m.condition:>10} {m.topk_class:>15} T={m.config.tokens:<5} {m.impl:>6}: "
                                 f"{m.distinct_outputs}/{m.runs} distinct outputs, {m.distinct_counts} distinct counts",
                                 flush=True),
    )

    frame = nondet.table(results)
    frame.to_csv(out_dir / "nondet.csv", index=False)
    meta = dict(env)
    meta.update(runs=runs, conditions=conditions, impls=impl_names, topk=topks, tokens=tokens,
                dcp_size=args.dcp_size, invalid_ratio=args.invalid_ratio, seed=args.seed)
    (out_dir / "nondet.json").write_text(json.dumps({"meta": meta, "results": [m.to_dict() for m in results]}, indent=2) + "\n")
    chart = draw_chart(_chart, out_dir, results, "GPU " + env["gpu"] if on_gpu else "CPU interpreter, permuted schedules")

    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 48):
        print()
        print("distinct outputs / runs (DCP compaction, the whole output hashed as ordered bytes):")
        print(nondet.summary_table(results).to_string(index=False))
    broken = nondet.failures(results)
    print()
    for m in broken:
        print(f"FAIL {m.condition} {m.topk_class} T={m.config.tokens} {m.impl} (case {m.config.case_id}): {m.judge()[1]}")
    print(f"wrote {out_dir / 'nondet.csv'}, {out_dir / 'nondet.json'}, {chart}")
    if broken:
        print(f"nondet: {len(broken)} failure(s) of the rule")
        return 1
    print("nondet: rule holds (ordered paths gave one output; counts never varied; tiled multiplicity reported)")
    return 0


def _default_out(root: str, device: str) -> Path:
    import time

    return Path(root) / "nondet" / f"{time.strftime('%Y%m%d-%H%M%S')}-{device}"


def _chart(out_dir: Path, results, where: str) -> Path:
    groups, values = pivot(results, lambda m: f"{m.condition} K={m.config.topk} T={m.config.tokens}",
                           lambda m: m.impl, lambda m: m.distinct_outputs)
    title = f"distinct outputs per case over {results[0].runs if results else 0} runs — {where}"
    return bar_chart(out_dir / "nondet", title, groups, values, "distinct outputs")
