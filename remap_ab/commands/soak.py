"""Run fresh random configurations — beyond the grid — through A, B and the oracle
until the deadline (--minutes), --max-cases per worker, or Ctrl-C.

Every draw is new: K any multiple of BLOCK_N up to --max-topk (4096), T up to
--max-tokens, every wrapper path, DCP sizes 2/4/8 with any rank and interleave, every
block-table kind, row layout and kind of negative id; the call envelope's block sizes,
strides and caller buffers (remap_ab/subjects/remap/envelope.toml) on every wrapper that may take them,
counted per parameter x wrapper in the summary. Draws are seeded (--seed; printed
when drawn at random), so the same seed draws the same cases in the same order.

GPU: one worker per visible GPU (or --workers; several run as pool.py's worker
processes, fed by this process's draws, a dead one replaced), every --contend-every-th case
under a contending side stream, the others in batches. A new variant (K, BLOCK_N, W,
DCP rank...) is a new Triton compile: one draw in --fresh-every brings one, the others
re-draw the data of a recent one, and --compile-workers processes compile the coming
variants ahead on the host's cores while the GPU judges the compiled ones. The summary
says where the time went (judging, compiling and loading in the worker, waiting for the
compile-ahead). CPU (the Triton interpreter, batched, which compiles nothing): one
worker, every draw fresh, T capped at 512 unless --max-tokens says otherwise.

Each case that does not pass is listed with its replay command (the first ones as they
come, all of them in ROOT/soak/<time>/soak.json); the first --reports of each failure
class (the verdict's first check x the wrapper path) get a normal case report folder
there too. Ctrl-C stops after the cases in flight and prints the summary (a second
Ctrl-C abandons them). Exit status: 0 every case passed,
1 a case did not pass (or none finished), 2 bad input, 130 stopped by Ctrl-C with no
failure.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import signal
import sys
import time

from remap_ab import command_line, runtime
from remap_ab.errors import UsageError
from remap_ab.host import gpus
from remap_ab.host.interrupts import Interrupts
from remap_ab.options import (
    add_device,
    add_implementations,
    add_reports,
    add_root,
    checked_output_dir,
    non_negative_int,
    positive_float,
    positive_int,
)
from remap_ab.processes.precompile import default_workers
from remap_ab.report_cap import DEFAULT_REPORTS, describe
from remap_ab.soak import run as soak
from remap_ab.soak.run import CPU_MAX_TOKENS, GPU_MAX_TOKENS
from remap_ab.subjects.remap import registry
from remap_ab.sweep.run import DEFAULT_CASE_TIMEOUT


def add_arguments(p):
    p.add_argument("--minutes", type=positive_float, required=True, help="how long to soak (no case starts after that)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="seed of the draws (default: a random one, printed, so the soak can be repeated)")

    p.add_argument("--max-tokens", type=positive_int, default=None,
                   help=f"largest T drawn (default {GPU_MAX_TOKENS} on GPU, {CPU_MAX_TOKENS} on CPU)")
    p.add_argument("--max-topk", type=positive_int, default=4096,
                   help="largest K drawn; K is any multiple of the drawn BLOCK_N up to it (default 4096)")
    p.add_argument("--max-cases", type=positive_int, default=None,
                   help="stop after this many cases per worker (the first ones drawn)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes (default: one per visible GPU; 1 on CPU)")
    p.add_argument("--contend-every", type=non_negative_int, default=4,
                   help="GPU: run every Nth case under a contending side stream (0: never; default 4)")
    p.add_argument("--batch", type=positive_int, default=16, help="GPU: quiet cases judged per batch (default 16)")
    p.add_argument("--fresh-every", type=positive_int, default=None,
                   help="one draw in N is a fresh variant, the others re-draw the data of a recent one "
                        "(default 4 on GPU, where a variant is a compile; 1 on CPU: every draw fresh)")
    p.add_argument("--compile-workers", type=non_negative_int, default=None,
                   help="GPU: processes compiling the coming variants ahead (default: the host's cores less one "
                        "per GPU worker; 0: none, each variant compiles at its launch)")
    add_implementations(p)
    add_device(p)
    add_root(p)
    add_reports(p)


def main(args) -> int:
    device = runtime.select(args.device)
    on_gpu = device == "cuda"
    if args.max_topk < min(soak.BLOCK_NS):
        raise UsageError(f"--max-topk {args.max_topk}: K must allow at least one tile of {min(soak.BLOCK_NS)}; give 32 or more")
    max_tokens = args.max_tokens or (soak.GPU_MAX_TOKENS if on_gpu else soak.CPU_MAX_TOKENS)
    if args.compile_workers and not on_gpu:
        raise UsageError("--compile-workers is for a GPU soak (the interpreter compiles nothing); drop it")
    fresh_every = args.fresh_every or (soak.GPU_FRESH_EVERY if on_gpu else 1)
    if args.reports is None:
        args.reports = DEFAULT_REPORTS
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    gpu_list = gpus.visible_gpus(os.environ, gpus.count_gpus()) if on_gpu else []
    workers = args.workers or (len(gpu_list) if on_gpu else 1)
    if not on_gpu:
        compile_workers = 0
    elif args.compile_workers is not None:
        compile_workers = args.compile_workers
    else:
        compile_workers = default_workers(workers)
    # Import the implementations here, so a bad name is one line (exit 2) before any worker starts.

    registry.get(args.a), registry.get(args.b)

    root = checked_output_dir(args.root, "--root")
    folder = root / "soak" / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    where = (f"{workers} worker(s) on GPU(s) {','.join(gpu_list)}" if on_gpu
             else f"CPU (the Triton interpreter, batched): {workers} worker(s), "
                  f"T capped at {max_tokens}" + ("" if args.max_tokens else " (--max-tokens to change)"))
    print(f"soak {args.a} vs {args.b} for {args.minutes:g} min, seed {seed}: {where}; "
          f"K up to {args.max_topk}, T up to {max_tokens}"
          + (f", every {args.contend_every}th case under a contending side stream" if on_gpu and args.contend_every else "")
          + (f", one draw in {fresh_every} a fresh variant" if fresh_every > 1 else "")
          + (f", {compile_workers} compile-ahead process(es)" if compile_workers else ""),
          flush=True)
    repeat = [("--minutes", f"{args.minutes:g}"), ("--seed", str(seed))]
    repeat += [("--max-tokens", str(args.max_tokens))] if args.max_tokens else []
    repeat += [("--fresh-every", str(fresh_every))] if args.fresh_every else []
    print("  repeat with: " + command_line.line("soak", a=args.a, b=args.b, device=device, options=repeat), flush=True)

    start = time.time()
    deadline = start + args.minutes * 60.0
    plans = [
        soak.WorkerPlan(worker=w, device=device, a=args.a, b=args.b, seed=seed, max_tokens=max_tokens,
                        max_topk=args.max_topk, folder=str(folder), deadline=deadline, max_cases=args.max_cases,
                        contend_every=args.contend_every, batch=args.batch, fresh_every=fresh_every,
                        compile_workers=compile_workers,
                        # Prefill steps beyond the default cap; an explicit --max-tokens is a hard cap.
                        prefill_share=0.0 if args.max_tokens else
                        (soak.GPU_PREFILL_SHARE if on_gpu else soak.CPU_PREFILL_SHARE),
                        reports=args.reports)
        for w in range(workers)
    ]
    tally = soak.Tally()
    # The first Ctrl-C lets the cases in flight finish; a second abandons them.
    interrupted = Interrupts(
        first_asks=lambda _: say("soak: Ctrl-C: stopping after the cases in flight (Ctrl-C again to abandon them)"),
        signals=(signal.SIGINT,))
    last = [time.time()]
    reported = [0]

    def progress() -> None:
        for rec in tally.failures[reported[0]:SHOWN]:
            say(f"soak: FAIL {rec.line}")
            if rec.report:
                say(f"      report {rec.report}")
            say(f"      replay: {rec.replay}")
            if reported[0] == SHOWN - 1:
                say(f"soak: the failures after the first {SHOWN} are counted in the progress lines and listed in "
                    f"{folder / 'soak.json'}")
            reported[0] += 1
        now = time.time()
        if now - last[0] >= soak.PROGRESS_EVERY_S:
            last[0] = now
            say(f"soak {_clock(now - start)}/{_clock(args.minutes * 60)}: {len(tally.records)} cases, "
                f"{len(tally.failures)} not passing; {tally.rate_line(now)}")

    with interrupted:
        if workers == 1:
            soak.run_inline(plans[0], tally, interrupted, progress)
        else:
            import dataclasses


            # One draw stream for the pool, the same cases as --max-cases per worker.
            total = None if args.max_cases is None else args.max_cases * workers
            soak.run_pool(dataclasses.replace(plans[0], max_cases=total),
                          gpus.worker_environments(workers, device, gpu_list), tally, interrupted, progress,
                          DEFAULT_CASE_TIMEOUT)
    progress()
    return _summary(args, tally, interrupted, start, folder, seed)


SHOWN = 20  # failing cases listed as they come and in the summary (soak.json lists every one)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def _summary(args, tally, interrupted, start: float, folder, seed: int) -> int:
    now = time.time()
    elapsed = now - start
    why = ("stopped by Ctrl-C" if interrupted.asked
           else "deadline reached" if now >= start + args.minutes * 60 else "--max-cases reached")
    failures = tally.failures
    print()
    print(f"soak summary ({why} after {_clock(elapsed)} of {_clock(args.minutes * 60)}; seed {seed}):")
    print(f"  {len(tally.records)} cases judged, {len(failures)} not passing")
    print(f"  throughput: {tally.rate_line(now) or 'no worker started'}")
    if tally.times:
        print(f"  time: {tally.total_times().line()}")
    print("  configurations drawn:")
    for line in soak.distribution_lines(tally.distribution()):
        print("  " + line)
    print("  optional parameters passed, per wrapper (calls; who ran them, the oracle standing in for a side "
          "that lacks one):")
    for line in soak.parameter_lines(tally.parameter_counts(), registry.get(args.a).module,
                                     registry.get(args.b).module):
        print("  " + line)
    if failures:
        print("  failures by dimension (not passing/judged):")
        for line in soak.failure_lines(tally.failures_by_dimension()):
            print("  " + line)
    if failures:
        print(f"  report folders: {tally.report_folders} written for {len(failures)} cases not passing, "
              f"{describe(args.reports)}"
              + ("" if tally.report_folders >= len(failures) else
                 "; any other case's report: its replay line below (or in soak.json) with --report DIR"))
    for rec in failures[:SHOWN]:
        print(f"  FAIL {rec.line}")
        if rec.report:
            print(f"       report {rec.report}")
        print(f"       replay: {rec.replay}")
    if len(failures) > SHOWN:
        print(f"  ... and {len(failures) - SHOWN} more, each with its replay line in {folder / 'soak.json'}")
    (folder / "soak.json").write_text(json.dumps({
        "a": args.a, "b": args.b, "seed": seed, "minutes": args.minutes, "stopped": why,
        "seconds": round(elapsed, 3), **tally.to_dict(now)}, indent=2) + "\n")
    print(f"  wrote {folder / 'soak.json'}")
    if failures:
        print(f"soak: FAIL — {len(failures)} of {len(tally.records)} cases did not pass")
        return 1
    if not tally.records:
        print("soak: no case finished; nothing was checked")
        return 1
    if interrupted.asked:
        print(f"soak: interrupted — the {len(tally.records)} cases judged all passed")
        return 130
    print(f"soak: PASS — all {len(tally.records)} cases passed")
    return 0
