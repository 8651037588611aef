"""``remap-ab bench`` for the remap (the default subject): its options, their help, and
its entry point, which remap_ab/commands/bench.py composes with the shared options.
"""

from __future__ import annotations

import argparse

from remap_ab import options
from remap_ab.bench.session import Session
from remap_ab.errors import NeedsGPUError, UsageError
from remap_ab.options import int_list
from remap_ab.speed import parse_fail_slower
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.parts.bench import cross_compile, pr_table, width_scan
from remap_ab.subjects.remap.parts.bench.decode import DecodeModel
from remap_ab.subjects.remap.parts.bench.suite import (
    DET_RUNS,
    DET_TOKENS,
    GPU_ONLY,
    SECTIONS,
    Suite,
    SuiteOptions,
    parse_sections,
)

# remap-ab bench --help's text for the remap.
DESCRIPTION = """\
Sections (run in this order; --sections picks any of them, --all runs every one):
  pr           old vs new inside CUDA graphs on the pull request's grid, beside its GB200
               figures and the empty-kernel floor of each grid; --cold-l2 adds the same cells
               with rotating input copies so every call misses L2. Its cells are every path
               (--paths) at every row count of the call envelope (remap_ab/subjects/remap/envelope.toml:
               decode batches and prefill steps to 16384), and the speed gate judges each
  contention   K=2048, the old kernel at 16/8/4/2 tiles and the new single tile, tokens 1..4096,
               each split into its grid's launch floor and the rest: does the 16-vs-4-tile gap
               grow with batch? Beside each tile count its control (the atomic replaced by a
               write to the tile's own slot): atomic - control = the contention cost
  decode       µs per decode step of a model (default 78 layers, index_topk 2048, DCP 1 and 4)
               at batch 1..1024, old and new, from measured per-call times
  width        the single tile at K=256..16384 with 8 and another warp count against the tiled
               path, on every path it serves (counts, in-place DCP, DCP compaction): registers,
               spills, occupancy, and where one program per row stops winning
  determinism  a sparse-attention consumer of the compacted indices run 20 times (GPU: quiet and
               contended; CPU: permuted interpreter schedules): distinct outputs, largest |Δ|
  resources    registers, spills, shared memory, warps, occupancy of every variant compiled;
               and every variant of A and B cross-compiled for each --resource-targets
               (on the CPU: remap-ab resources)
  host         host µs per wrapper call (T=1, K=512, counts path, 2000 calls, no sync)
  sweep        the full sweep in this process (-j 0): phase split, then end to end

Without --all/--sections: the pr and resources sections (the compiled variants' registers,
spills and shared memory are printed with the table). --sweep-phases: host and sweep.

Output: <root>/bench/<stamp>/ (or --report DIR): index.html (every table and chart),
results.json and tables.zip (CSV per table, PNG per chart), rewritten after every section so
a run stopped by --budget-s or killed keeps what was measured. Nothing is timed that
disagrees with the oracle on the timed inputs. The pr cells pass a speed gate: a cell
where B is slower than A beyond noise (--fail-slower, default 5%: the whole bootstrap
interval of B's median over A's above 1.05) is named and fails the run. Exit status: 0
every section complete and every check passed; 1 a timing refused or failing its
post-timing check, a cell the speed gate fails, or a section partial / not run / in
error; 2 bad input, or only GPU sections asked for without a GPU."""

DEFAULT_SECTIONS = ("pr", "resources")
# --repeats' default: the pull request's table alone (resources times nothing, so pr with it
# counts as alone, the default sections) takes more replays per graph than a longer run.
PR_ALONE_REPEATS, OTHER_REPEATS = 20, 10
# bench's --repeats help, stated by the part that decides the default (commands/bench.py).
REPEATS_HELP = (f"timed replays per graph (default {PR_ALONE_REPEATS} when pr is the only section timed, as "
                f"without --sections, or {OTHER_REPEATS} with other timed sections, e.g. --all)")
UNTIMED = ("resources",)  # sections that compile or count, and replay no graph


HOST_CALLS = {"cuda": 2000, "cpu": 10}  # --host-calls' default per device


def _ints(values) -> str:
    return ",".join(map(str, values))


def default_repeats(sections) -> int:
    """--repeats when not given: PR_ALONE_REPEATS when pr is the only section timed, else OTHER_REPEATS."""
    return PR_ALONE_REPEATS if {s for s in sections if s not in UNTIMED} == {"pr"} else OTHER_REPEATS
SWEEP_PHASES = ("host", "sweep")
DEFAULT_A, DEFAULT_B = "old", "new"


def add_arguments(p: argparse.ArgumentParser, groups: dict) -> None:
    """The remap's options, after the shared ones (remap_ab/commands/bench.py): some in
    its groups (``groups``: title -> argument group), the rest in groups of their own."""
    what = groups["what to run"]
    what.add_argument("--all", action="store_true", help="run every section")
    what.add_argument("--sections", default=None, metavar="LIST",
                      help="comma-separated sections: pr, contention, decode, width, determinism, resources, host, sweep")
    what.add_argument("--sweep-phases", action="store_true", help="the host-overhead and sweep-phase sections")
    what.add_argument("--cold-l2", action="store_true", help="pr section: also time with rotating inputs (every call misses L2)")
    t = groups["timing"]
    t.add_argument("--seed", type=options.non_negative_int, default=0, help="input seed (default 0)")
    t.add_argument("--topk", default="512,2048", help="pr: K values (default 512,2048)")
    t.add_argument("--tokens", default=None,
                   help="pr: token counts (default: every row count of the call envelope, remap_ab/subjects/remap/envelope.toml: "
                        "decode batches and prefill steps up to 16384)")
    t.add_argument("--paths", default=",".join(pr_table.PATHS),
                   help=f"pr: paths (default all: {','.join(pr_table.PATHS)}; counts = convert with counts, dcp = DCP 4 "
                        "compaction, convert = without counts, prefill = counts with prefill rows, dcp-inplace = "
                        "DCP 4 in place)")
    t.add_argument("--contention-tokens", default="1,8,64,256,1024,4096", help="contention: token counts")
    d = p.add_argument_group("decode-step model")
    d.add_argument("--layers", type=options.positive_int, default=78, help="layers per decode step (default 78)")
    d.add_argument("--decode-topk", type=options.positive_int, default=2048, help="index_topk (default 2048)")
    d.add_argument("--dcp", default="1,4", help="DCP sizes (default 1,4)")
    d.add_argument("--batches", default="1,2,4,8,16,32,64,128,256,512,1024", help="batch sizes (requests)")
    d.add_argument("--tokens-per-request", type=options.positive_int, default=1, help="query tokens per request per step (default 1)")
    s = p.add_argument_group("width scan")
    s.add_argument("--scan-k", default="256,512,1024,2048,4096,8192,16384", help="single-tile widths (powers of two >= 128)")
    s.add_argument("--scan-warps", default="8,16", help="warp counts of the single tile (default 8,16)")
    s.add_argument("--scan-tokens", default="1,256,1024", help="token counts (default 1,256,1024)")
    s.add_argument("--scan-paths", default="counts,dcp-inplace,dcp-compact",
                   help="paths the single tile serves (default all: counts,dcp-inplace,dcp-compact)")
    r = p.add_argument_group("resources")
    r.add_argument("--resource-targets", default="sm_80,sm_90,sm_100,sm_120,gfx90a,gfx942,gfx950",
                   help="targets to cross-compile every variant for (default all)")
    e = p.add_argument_group("end-to-end determinism")
    e.add_argument("--det-topk", default="2048,384", help="K values (default 2048,384)")
    e.add_argument("--det-tokens", default=None,
                   help=f"token counts (default {_ints(DET_TOKENS['cuda'])} on GPU, {_ints(DET_TOKENS['cpu'])} on CPU)")
    e.add_argument("--det-runs", type=options.positive_int, default=None,
                   help=f"runs per cell (default {DET_RUNS['cuda']} on GPU, {DET_RUNS['cpu']} on CPU)")
    h = p.add_argument_group("host and sweep")
    h.add_argument("--host-calls", type=options.positive_int, default=None,
                   help=f"calls per host measurement (default {HOST_CALLS['cuda']} on GPU, {HOST_CALLS['cpu']} on CPU)")
    h.add_argument("--host-impls", default=None, help="implementations for host overhead (default: --a,--b)")
    h.add_argument("--sweep-filter", action="append", default=[], metavar="NAME=V",
                   help="sweep section: time only this subset (repeatable)")
    h.add_argument("--no-fresh-process", action="store_true", help="sweep section: skip the end-to-end run as a fresh process")


def _sections(args) -> list:
    chosen = sum(bool(x) for x in (args.all, args.sections, args.sweep_phases))
    if chosen > 1:
        raise UsageError("give one of --all, --sections and --sweep-phases")
    if args.all:
        return list(SECTIONS)
    if args.sections:
        return parse_sections(args.sections)
    if args.sweep_phases:
        return list(SWEEP_PHASES)
    return list(DEFAULT_SECTIONS)
def build_options(args, device: str):
    """SuiteOptions from the parsed command line (every list validated here)."""
    sections = _sections(args)
    fail_slower = parse_fail_slower(args.fail_slower)
    on_gpu = device == "cuda"
    paths = tuple(x for x in args.paths.split(",") if x)
    bad = [x for x in paths if x not in pr_table.PATHS]
    if bad or not paths:
        raise UsageError(f"--paths {args.paths!r}: choose from {','.join(pr_table.PATHS)}")
    if args.tokens is None:  # the call envelope's rows
        args.tokens = ",".join(str(t) for t in envelope.load().rows)
    scan_k, scan_warps = tuple(int_list(args.scan_k, "--scan-k")), tuple(int_list(args.scan_warps, "--scan-warps"))
    width_scan.check_widths(scan_k)
    width_scan.check_warps(scan_warps)
    scan_paths = tuple(x.strip() for x in args.scan_paths.split(",") if x.strip())
    width_scan.check_paths(scan_paths)

    targets = tuple(x.strip() for x in args.resource_targets.split(",") if x.strip())
    if not targets or any(t not in cross_compile.TARGETS for t in targets):
        raise UsageError(f"--resource-targets {args.resource_targets!r}: choose from {', '.join(cross_compile.TARGETS)}")
    positive = {"--topk": args.topk, "--tokens": args.tokens, "--contention-tokens": args.contention_tokens,
                "--batches": args.batches, "--scan-tokens": args.scan_tokens, "--det-topk": args.det_topk,
                "--dcp": args.dcp}
    lists = {}
    for flag, text in positive.items():
        values = int_list(text, flag)
        if any(v < 1 for v in values):
            raise UsageError(f"{flag} {text!r}: every value must be at least 1")
        lists[flag] = tuple(values)
    det_tokens = None
    if args.det_tokens:
        det_tokens = tuple(int_list(args.det_tokens, "--det-tokens"))
        if any(v < 1 for v in det_tokens):
            raise UsageError(f"--det-tokens {args.det_tokens!r}: every value must be at least 1")
    if args.det_runs is not None and args.det_runs < 2:
        raise UsageError(f"--det-runs {args.det_runs}: comparing runs needs at least 2")
    if any(k % 128 for k in lists["--det-topk"]):
        raise UsageError(f"--det-topk {args.det_topk!r}: every K must be a multiple of 128 (BLOCK_N)")
    if any(k % 128 for k in lists["--topk"]):
        raise UsageError(f"--topk {args.topk!r}: every K must be a multiple of 128 (BLOCK_N)")
    model = DecodeModel(layers=args.layers, topk=args.decode_topk, dcp_sizes=lists["--dcp"],
                        tokens_per_request=args.tokens_per_request)
    if model.topk % 128:
        raise UsageError(f"--decode-topk {model.topk}: must be a multiple of 128 (BLOCK_N)")
    if not on_gpu and all(s in GPU_ONLY for s in sections):
        raise NeedsGPUError("bench times kernels inside CUDA graphs and needs a CUDA device; torch sees none "
                            "(run it on the GPU machine; on the CPU only --sections determinism,host[,sweep] run)")
    repeats = args.repeats or default_repeats(sections)
    a, b = args.a or DEFAULT_A, args.b or DEFAULT_B
    host_impls = tuple(x for x in (args.host_impls or f"{a},{b}").split(",") if x)
    return SuiteOptions(
        sections=sections, device=device, budget_s=args.budget_s, a=a, b=b, calls=args.calls,
        repeats=repeats, seed=args.seed, pr_topk=lists["--topk"], pr_tokens=lists["--tokens"], pr_paths=paths,
        cold_l2=args.cold_l2 or args.all, contention_tokens=lists["--contention-tokens"], model=model,
        decode_batches=lists["--batches"], scan_k=scan_k, scan_warps=scan_warps, scan_tokens=lists["--scan-tokens"],
        scan_paths=scan_paths, resource_targets=targets,
        det_topk=lists["--det-topk"], det_tokens=det_tokens, det_runs=args.det_runs,
        host_calls=args.host_calls or HOST_CALLS["cuda" if on_gpu else "cpu"], host_impls=host_impls,
        sweep_filters=tuple(args.sweep_filter), sweep_fresh_process=not args.no_fresh_process,
        fail_slower=fail_slower,
    )


def main(args, session: Session) -> int:
    device = session.device
    opts = build_options(args, device)  # every bad option is one line before any work
    folder = session.output_folder()
    env = session.environment
    meta = {**env, "command": session.command,
            "sections": opts.sections, "calls": opts.calls, "repeats": opts.repeats, "cold_l2": opts.cold_l2}
    where = env.get("gpu") or "CPU (Triton interpreter)"
    print(f"bench on {where} (torch {env['torch']}, triton {env['triton']}): sections {', '.join(opts.sections)}"
          + (f"; budget {opts.budget_s:.0f} s" if opts.budget_s else "") + f"; writing {folder}", flush=True)
    suite = Suite(opts, folder, meta, say=lambda line: print(line, flush=True))
    sections = suite.run()
    files = suite.write()
    # Every finding once more at the end, so the tail of a long printout holds them all.
    print("\n=== findings ===")
    for s in sections:
        print(f"[{s.key}] {s.status}" + (f" — {s.note}" if s.note else ""))
        for f in s.findings:
            print(f"  - {f}")
    print("wrote " + ", ".join(str(f) for f in files))
    incomplete = [s for s in sections if s.status != "complete"]
    for s in incomplete:
        print(f"INCOMPLETE {s.key}: {s.status}" + (f" — {s.note}" if s.note else ""))
    if suite.failed_checks:
        print(f"FAIL: {suite.failed_checks} timing(s) refused or failing their post-timing check (see the page)")
    if suite.slower_cells:
        print(f"FAIL: {opts.b} is slower than {opts.a} beyond noise in {len(suite.slower_cells)} cell(s):")
        for line in suite.slower_cells:
            print(f"  {line}")
    return 1 if incomplete or suite.failed_checks or suite.slower_cells else 0
