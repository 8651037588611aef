"""The remap's part of ``remap-ab soak`` (``commands/soak.py`` composes it): its
paragraph of the command's --help and its size options."""

from __future__ import annotations

from remap_ab.options import positive_int
from remap_ab.subjects.remap.parts.soak import CPU_MAX_LANES, CPU_MAX_TOKENS, GPU_MAX_TOKENS, MAX_TOPK

DESCRIPTION = f"""\
The remap (the default subject): every draw is new: K any multiple of BLOCK_N up to --max-topk ({MAX_TOPK}), T up to
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
worker, every draw fresh, T up to {CPU_MAX_TOKENS} with K scaled to it (at most {CPU_MAX_LANES:,} lanes a case)
unless --max-tokens says otherwise. T comes from the call envelope's row classes (each scale
and parity alike) and half the fresh draws aim at a declared pair of the envelope not yet
drawn; the summary says how many of the declared pairs the draws exercised."""


def add_arguments(p) -> None:
    """The size options, after --subject (their dests are the keys of SoakSettings.options)."""
    p.add_argument("--max-tokens", type=positive_int, default=None,
                   help=f"largest T drawn (default {GPU_MAX_TOKENS} on GPU, {CPU_MAX_TOKENS} on CPU)")
    p.add_argument("--max-topk", type=positive_int, default=None,
                   help=f"largest K drawn; K is any multiple of the drawn BLOCK_N up to it (default {MAX_TOPK})")
