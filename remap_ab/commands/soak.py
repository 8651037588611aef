"""Run fresh random configurations — beyond the grid — through A, B and the oracle
until the deadline (--minutes), --max-cases per worker, or Ctrl-C. --subject picks the
kernel pair (docs/subjects.md): what is drawn is the subject's (``Subject.soak``), the
rest is remap_ab/soak/'s.

The remap (the default subject): every draw is new: K any multiple of BLOCK_N up to --max-topk (4096), T up to
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

The topology subject (docs/soak-bench-resources.md): rows up to the prefill sizes on a
GPU (capped at 64 rows on the CPU, where --max-tokens raises the cap), topk from 1 to
2048 and 2176, S from 1 to 64, every context-length class, keep and budget at their
edges, padding, duplicates and entries at or past L.

Each case that does not pass is listed with its replay command (the first ones as they
come, all of them in ROOT/soak/<time>/soak.json); the first --reports of each failure
class (the verdict's first check x the wrapper path) get a normal case report folder
there too. Ctrl-C stops after the cases in flight and prints the summary (a second
Ctrl-C abandons them). Exit status: 0 every case passed,
1 a case did not pass (or none finished), 2 bad input, 130 stopped by Ctrl-C with no
failure.
"""

from __future__ import annotations

import os
import random

from remap_ab import runtime, subjects
from remap_ab.errors import UsageError
from remap_ab.host import gpus
from remap_ab.options import (
    SUBJECT,
    add,
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
from remap_ab.report_cap import DEFAULT_REPORTS
from remap_ab.soak import session
from remap_ab.subject import SoakSettings
from remap_ab.subjects.remap.soak import CPU_MAX_TOKENS, GPU_MAX_TOKENS
from remap_ab.sweep.run import DEFAULT_CASE_TIMEOUT


def add_arguments(p):
    p.add_argument("--minutes", type=positive_float, required=True, help="how long to soak (no case starts after that)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="seed of the draws (default: a random one, printed, so the soak can be repeated)")
    add(p, SUBJECT)
    p.add_argument("--max-tokens", type=positive_int, default=None,
                   help=f"largest T drawn (default {GPU_MAX_TOKENS} on GPU, {CPU_MAX_TOKENS} on CPU); "
                        "topology: the most rows (default the prefill sizes on GPU, 64 on CPU)")
    p.add_argument("--max-topk", type=positive_int, default=None,
                   help="largest K drawn; K is any multiple of the drawn BLOCK_N up to it (default 4096); "
                        "topology: the largest topk (default 2176)")
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
    add_implementations(p, decided_later=("the subject's: old for the remap, a for topology",
                                          "the subject's: new, or b"))
    add_device(p)
    add_root(p)
    add_reports(p)


def main(args) -> int:
    device = runtime.select(args.device)
    on_gpu = device == "cuda"
    subject = subjects.get(args.subject)
    if args.compile_workers and not on_gpu:
        raise UsageError("--compile-workers is for a GPU soak (the interpreter compiles nothing); drop it")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    gpu_list = gpus.visible_gpus(os.environ, gpus.count_gpus()) if on_gpu else []
    workers = args.workers or (len(gpu_list) if on_gpu else 1)
    if not on_gpu:
        compile_workers = 0
    elif args.compile_workers is not None:
        compile_workers = args.compile_workers
    else:
        compile_workers = default_workers(workers)
    settings = SoakSettings(
        device=device, a=args.a or subject.default_a, b=args.b or subject.default_b, workers=workers, gpus=gpu_list,
        options=dict(max_tokens=args.max_tokens, max_topk=args.max_topk, contend_every=args.contend_every,
                     batch=args.batch, fresh_every=args.fresh_every, compile_workers=compile_workers))
    root = checked_output_dir(args.root, "--root")
    return session.run(session.Soak(args.subject, settings, args.minutes, seed, root, args.max_cases,
                                    args.reports if args.reports is not None else DEFAULT_REPORTS,
                                    DEFAULT_CASE_TIMEOUT))
