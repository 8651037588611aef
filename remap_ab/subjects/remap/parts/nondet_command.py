"""The remap's part of ``remap-ab nondet`` (``parts["nondet"]``): its nondeterminism study
(nondet.py, which words the command's description and declares its case options); here
the command line, the device, the artifacts and the exit status."""

from __future__ import annotations

import json
from pathlib import Path

from remap_ab import runtime
from remap_ab.commands.common import draw_chart, environment
from remap_ab.errors import UsageError
from remap_ab.options import add_device, add_root, checked_output_dir, int_list, non_negative_int, positive_int
from remap_ab.subjects.remap.judge import nondet

DESCRIPTION = nondet.COMMAND_DOC  # what `remap-ab nondet --help` describes: the study is the subject's

# The types the subject's option declarations name ("ints" stay text until parsed with the device's default).
_TYPES = {"ints": str, "positive_int": positive_int, "float": float}


def _add(p, declared) -> None:
    for o in declared:
        p.add_argument(o["flag"], dest=o["dest"], type=_TYPES[o["type"]], default=o["default"], help=o["help"])


def add_arguments(p):
    # Not --a/--b: nondet characterises each implementation on its own, one or many.
    p.add_argument("--impls", default="old,new",
                   help="comma-separated implementations, each characterised on its own: old, new, oracle or a "
                        "dotted module path (default old,new)")
    _add(p, nondet.OPTIONS)
    p.add_argument("--runs", type=positive_int, default=None, help="runs per case and condition (default 20 on GPU; 8 schedules on CPU)")
    p.add_argument("--conditions", default=None, help="GPU: quiet,contended (default both); CPU: schedules")
    _add(p, nondet.AFTER_CONDITIONS)
    p.add_argument("--seed", type=non_negative_int, default=0, help="input seed (default 0)")
    add_device(p)
    add_root(p, "nondet/ artifacts, beside the sweep's runs")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for the artifacts (default <root>/nondet/<time>-<device>)")


def main(args) -> int:
    declared = nondet.OPTIONS + nondet.AFTER_CONDITIONS
    values = {o["dest"]: getattr(args, o["dest"]) for o in declared}
    nondet.check_options(values)
    impl_names = [n.strip() for n in args.impls.split(",") if n.strip()]
    if not impl_names:
        raise UsageError(f"--impls {args.impls!r} names no implementation; give e.g. old,new")
    device = runtime.select(args.device)
    out_dir = checked_output_dir(args.out or _default_out(args.root, device), "--out" if args.out else "--root")
    on_gpu = device == "cuda"
    # A list whose default is the device's first: its error comes first, as it always did.
    for o in sorted((o for o in declared if o["type"] == "ints"), key=lambda o: o["default"] is not None):
        values[o["dest"]] = int_list(values[o["dest"]] or nondet.default_ints(o["dest"], on_gpu), o["flag"])
    runs = args.runs if args.runs is not None else (20 if on_gpu else 8)
    default_conditions = ",".join(nondet.GPU_CONDITIONS if on_gpu else nondet.CPU_CONDITIONS)
    conditions = [c.strip() for c in (args.conditions or default_conditions).split(",") if c.strip()]
    if not conditions:
        raise UsageError(f"--conditions {args.conditions!r} names no condition; give e.g. {default_conditions}")
    configs = nondet.study_cases(values, args.seed)

    env = environment(device)
    where = "GPU " + env["gpu"] if on_gpu else "CPU (Triton interpreter, permuted program schedules)"
    print(f"nondet on {where}: {len(configs)} cases x {len(impl_names)} implementations x {conditions} x {runs} runs", flush=True)
    results = nondet.run_nondet(configs, impl_names, device, runs, conditions,
                                progress=lambda m: print(nondet.progress_line(m), flush=True))

    frame = nondet.table(results)
    frame.to_csv(out_dir / "nondet.csv", index=False)
    meta = dict(env)
    meta.update(runs=runs, conditions=conditions, impls=impl_names, **{o["dest"]: values[o["dest"]] for o in declared},
                seed=args.seed)
    (out_dir / "nondet.json").write_text(json.dumps({"meta": meta, "results": [m.to_dict() for m in results]}, indent=2) + "\n")
    chart = draw_chart(nondet.chart, out_dir, results, "GPU " + env["gpu"] if on_gpu else "CPU interpreter, permuted schedules")

    nondet.print_summary(results)
    broken = nondet.failures(results)
    print()
    for m in broken:
        print(nondet.failure_line(m))
    print(f"wrote {out_dir / 'nondet.csv'}, {out_dir / 'nondet.json'}, {chart}")
    if broken:
        print(f"nondet: {len(broken)} failure(s) of the rule")
        return 1
    print("nondet: rule holds (ordered paths gave one output; counts never varied; tiled multiplicity reported)")
    return 0


def _default_out(root: str, device: str) -> Path:
    import time

    return Path(root) / "nondet" / f"{time.strftime('%Y%m%d-%H%M%S')}-{device}"
