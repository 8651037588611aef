"""The remap's ``remap-ab resources``: which variants of A's and B's wrappers it
cross-compiles (targets, paths, K, BLOCK_N) and what it prints and keeps of them
(bench/cross_compile.py compiles; resources_command.py, its part of the command, holds
the command line, the output file and the exit status).
"""

from __future__ import annotations

import time
from typing import Any

from remap_ab.errors import UsageError
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import cross_compile as cc

# ``remap-ab resources --help``'s description (resources_command.py's DESCRIPTION).
COMMAND_DOC = """Compile every variant the wrappers of A and B launch for GPUs this machine need not
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

# The command's options that say what it compiles, as data (resources_command.py
# declares them after --a/--b): ``type`` "names" is a comma-separated choice of
# ``known``, "ints" a comma-separated list of integers; "append" a repeatable option.
OPTIONS: tuple[dict[str, Any], ...] = (
    dict(flag="--targets", dest="targets", default=",".join(cc.DEFAULT_TARGETS), type="names", known=tuple(cc.TARGETS),
         help=f"comma-separated targets (default all: {','.join(cc.DEFAULT_TARGETS)})"),
    dict(flag="--paths", dest="paths", default=",".join(cc.DEFAULT_PATHS), type="names", known=tuple(cc.PATHS),
         help=f"paths (default all: {','.join(cc.DEFAULT_PATHS)})"),
    dict(flag="--topk", dest="topk", default=",".join(map(str, cc.DEFAULT_TOPKS)), type="ints",
         help="K values (default 128 ... 16384)"),
    dict(flag="--block-n", dest="block_n", default=",".join(map(str, cc.DEFAULT_BLOCK_NS)), type="ints",
         help="BLOCK_N the caller passes (default 128); a K it does not divide is skipped"),
)
ALLOW_SPILL: dict[str, Any] = dict(flag="--allow-spill", dest="allow_spill", type="append", metavar="TARGET:PATH:K",
                   help="a known spill of B where A does not spill, reported but not failed (repeatable; * matches "
                        "any, e.g. '*:dcp-compact:16384')")


def check(values: dict, given: dict, a: str, b: str) -> None:
    """UsageError for what the parsed options (``values`` by dest; ``given``: as typed)
    cannot compile; an ImplementationError for a bad A or B, here once rather than in
    every worker."""
    for bn in values["block_n"]:
        if bn < 1 or bn & (bn - 1):
            raise UsageError(f"--block-n {bn}: BLOCK_N must be a power of two (tl.arange needs one)")
    for k in values["topk"]:
        if k < 1 or all(k % bn for bn in values["block_n"]):
            raise UsageError(f"--topk {k}: must be a positive multiple of a --block-n value ({given['block_n']})")
    for entry in values["allow_spill"]:
        if len(entry.split(":")) != 3:
            raise UsageError(f"--allow-spill {entry!r}: give TARGET:PATH:K, e.g. sm_90:dcp-compact:16384")
    for name in (a, b):
        registry.get(name)


def compile_and_print(values: dict, a: str, b: str, jobs: int) -> tuple[dict, list[str], list[str]]:
    """Compile every variant the options name in ``jobs`` processes and print the
    tables, the notes and where spills begin: (what the output file keeps, B's
    regressions, the known ones)."""
    start = time.perf_counter()
    rows = cc.run(a, b, values["targets"], values["paths"], values["topk"], values["block_n"], jobs)
    wall = time.perf_counter() - start
    compiled = sum(1 for r in rows if "unsupported" not in r)
    print(cc.format_tables(rows))
    for note in cc.unsupported_notes(rows):
        print(f"note: {note}")
    print("where spills begin:")
    for line in cc.spill_onsets(rows):
        print(f"  {line}")
    bad = cc.regressions(rows, values["allow_spill"])
    known = cc.known_regressions(rows, values["allow_spill"])
    for line in known:
        print(f"known (--allow-spill): {line}")
    print(f"{compiled} variants compiled for {len(values['targets'])} target(s) in {wall:.1f} s on {jobs} process(es)")
    verdict = {"regressions": bad, "known_regressions": known, "spill_onsets": cc.spill_onsets(rows),
               "unsupported": cc.unsupported_notes(rows)}
    kept = {"a": a, "b": b, "targets": values["targets"], "paths": values["paths"], "topk": values["topk"],
            "block_n": values["block_n"], "wall_s": round(wall, 2), "jobs": jobs, "rows": rows, "verdict": verdict}
    return kept, bad, known
