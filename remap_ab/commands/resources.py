"""Compile every variant the wrappers of A and B launch for GPUs this machine need not
have, and print per target the registers (NVIDIA) or VGPRs/AGPRs/SGPRs (AMD), spills,
scratch, shared memory / LDS and occupancy of each: path, K, BLOCK_N, warps.

Targets: sm_80, sm_90, sm_100, sm_120 (A100, H100/H200, B200/GB200, RTX 50xx) and gfx90a,
gfx942, gfx950 (MI200, MI300, MI350); a target this Triton cannot compile for gets a
one-line note. Each variant is bound as a real launch binds it (Triton's own binder
over the wrapper's call: strides of 1 constant, divisibility by 16, unused pointers
None), so the figures are the launch's. Compiles run in --jobs processes.

Exit status: 0; 1 when B fails to compile a variant or spills where A does not (a CI
regression gate); 2 on bad input.
"""

from __future__ import annotations

import json
import os
import time

from remap_ab import options
from remap_ab.bench import cross_compile as cc
from remap_ab.commands.common import int_list
from remap_ab.errors import UsageError
from remap_ab.subjects.remap import registry


def add_arguments(p):
    options.add_implementations(p)
    p.add_argument("--targets", default=",".join(cc.DEFAULT_TARGETS),
                   help=f"comma-separated targets (default all: {','.join(cc.DEFAULT_TARGETS)})")
    p.add_argument("--paths", default=",".join(cc.DEFAULT_PATHS), help=f"paths (default all: {','.join(cc.DEFAULT_PATHS)})")
    p.add_argument("--topk", default=",".join(map(str, cc.DEFAULT_TOPKS)), help="K values (default 128 ... 16384)")
    p.add_argument("--block-n", default=",".join(map(str, cc.DEFAULT_BLOCK_NS)),
                   help="BLOCK_N the caller passes (default 128); a K it does not divide is skipped")
    p.add_argument("--jobs", "-j", type=options.positive_int, default=None,
                   help="compile processes (default: the machine's cores)")
    p.add_argument("--allow-spill", action="append", default=[], metavar="TARGET:PATH:K",
                   help="a known spill of B where A does not spill, reported but not failed (repeatable; * matches "
                        "any, e.g. '*:dcp-compact:16384')")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every row and the verdict to FILE")


def _names(text: str, known, flag: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad or not names:
        raise UsageError(f"{flag} {text!r}: choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


def main(args) -> int:
    targets = _names(args.targets, cc.TARGETS, "--targets")
    paths = _names(args.paths, cc.PATHS, "--paths")
    topks = int_list(args.topk, "--topk")
    block_ns = int_list(args.block_n, "--block-n")
    for bn in block_ns:
        if bn < 1 or bn & (bn - 1):
            raise UsageError(f"--block-n {bn}: BLOCK_N must be a power of two (tl.arange needs one)")
    for k in topks:
        if k < 1 or all(k % bn for bn in block_ns):
            raise UsageError(f"--topk {k}: must be a positive multiple of a --block-n value ({args.block_n})")
    for entry in args.allow_spill:
        if len(entry.split(":")) != 3:
            raise UsageError(f"--allow-spill {entry!r}: give TARGET:PATH:K, e.g. sm_90:dcp-compact:16384")
    for name in (args.a, args.b):
        registry.get(name)  # a bad name is one line here, not an error in every worker
    jobs = args.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    rows = cc.run(args.a, args.b, targets, paths, topks, block_ns, jobs)
    wall = time.perf_counter() - start
    compiled = sum(1 for r in rows if "unsupported" not in r)
    print(cc.format_tables(rows))
    for note in cc.unsupported_notes(rows):
        print(f"note: {note}")
    print("where spills begin:")
    for line in cc.spill_onsets(rows):
        print(f"  {line}")
    bad = cc.regressions(rows, args.allow_spill)
    known = cc.known_regressions(rows, args.allow_spill)
    for line in known:
        print(f"known (--allow-spill): {line}")
    print(f"{compiled} variants compiled for {len(targets)} target(s) in {wall:.1f} s on {jobs} process(es)")
    if args.json:
        verdict = {"regressions": bad, "known_regressions": known, "spill_onsets": cc.spill_onsets(rows),
                   "unsupported": cc.unsupported_notes(rows)}
        payload = {"a": args.a, "b": args.b, "targets": targets, "paths": paths, "topk": topks, "block_n": block_ns,
                   "wall_s": round(wall, 2), "jobs": jobs, "rows": rows, "verdict": verdict}
        path = options.checked_output_file(args.json, "--json")
        with open(path, "w") as f:
            json.dump(payload, f, indent=1, default=str)
        print(f"wrote {path}")
    if bad:
        print(f"FAIL: {len(bad)} regression(s) of B against A:")
        for line in bad:
            print(f"  {line}")
        return 1
    print(f"PASS: B ({args.b}) compiles every variant and spills nowhere A ({args.a}) does not"
          + (f", except the {len(known)} known spill(s) above" if known else ""))
    return 0
