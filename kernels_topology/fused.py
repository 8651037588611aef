"""The topology-witness merge as one Triton kernel (side B of the A/B).

One program per row. It walks the learned row once, block by block: each block is
copied to the output and every entry t >= 0 sets bit ``segment(t)`` of a per-lane
int64 mask (hence at most 64 segments); one OR-reduction makes the row's occupancy
mask. A barrier then orders the copy before the overwrite: the witnesses are the
left edges, rounded up, of the existing unoccupied segments, ranked by a prefix sum
and written over columns ``keep + rank`` while the rank is below the budget.

On a device other than CUDA the entry point falls back to the torch pair
(``kernels_topology.torch_pair``), as the vLLM code does. An A/B on the CPU must run
the kernel itself, through Triton's interpreter: ``with kernel_forced():`` (or the
module flag ``FORCE_KERNEL = True``) launches it on CPU tensors; that needs
``TRITON_INTERPRET=1`` set before this module was imported.

Each statement that encodes one rule stands on its own line: the subject's mutants
(``remap_ab/subjects/topology/mutants.toml``) edit this source line by line.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import triton
import triton.language as tl

from kernels_topology.torch_pair import merge_topology_witnesses, topology_witnesses

MAX_FUSED_SEGMENTS = 64
_MAX_BLOCK_K = 1024
_NUM_WARPS = 4
# Whether Triton's interpreter was on when the kernel below was decorated (only then
# can it run on CPU tensors).
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
# Launch the kernel on non-CUDA tensors instead of falling back to the torch pair.
FORCE_KERNEL = False

# The pair's two functions are re-exported: the fused kernel never materialises the
# witnesses, so the A/B reads them from side A (``calls.witnesses``).
__all__ = ["FORCE_KERNEL", "MAX_FUSED_SEGMENTS", "fused_topology_witness_merge", "kernel_forced",
           "merge_topology_witnesses", "topology_witnesses"]


@contextlib.contextmanager
def kernel_forced() -> Iterator[None]:
    """Inside the block the entry point launches the kernel whatever the device (the
    CPU A/B's B side); the flag is restored after it."""
    global FORCE_KERNEL
    previous, FORCE_KERNEL = FORCE_KERNEL, True
    try:
        yield
    finally:
        FORCE_KERNEL = previous


@triton.jit
def _topology_witness_merge_kernel(
    learned_ptr,  # [R, topk] int32
    context_lens_ptr,  # [R] int32
    out_ptr,  # [R, topk] int32
    topk,
    learned_keep,
    budget,
    learned_stride0,
    learned_stride1,
    lens_stride,
    out_stride0,
    out_stride1,
    S: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    length = tl.load(context_lens_ptr + row * lens_stride).to(tl.int64)
    length_pos = tl.maximum(length, 1)
    segs = tl.minimum(length_pos, S)
    learned_row = learned_ptr + row * learned_stride0
    out_row = out_ptr + row * out_stride0

    one = tl.full([BLOCK_K], 1, tl.int64)
    lane_bits = tl.zeros([BLOCK_K], tl.int64)
    for start in range(0, topk, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        in_row = cols < topk
        t = tl.load(learned_row + cols * learned_stride1, mask=in_row, other=-1)
        tl.store(out_row + cols * out_stride1, t, mask=in_row)
        t64 = t.to(tl.int64)
        # t >= 0 here wherever it counts, so Triton's truncating // is a floor.
        seg = tl.minimum(tl.maximum(t64 * segs // length_pos, 0), S - 1).to(tl.int32)
        fold = in_row & (t64 >= 0)
        lane_bits = lane_bits | tl.where(fold, one << seg, 0)
    occupied = tl.reduce_or(lane_bits, 0)

    # The witnesses overwrite columns the copy above wrote, from other threads.
    tl.debug_barrier()

    s = tl.arange(0, BLOCK_S)
    s64 = s.to(tl.int64)
    exists = (s64 < segs) & (length > 0)
    taken = ((occupied >> s64) & 1) != 0
    free = exists & (~taken)
    edge = (s64 * length_pos + segs - 1) // segs
    rank = tl.cumsum(free.to(tl.int32), 0) - 1
    write = free & (rank < budget)
    tl.store(out_row + (learned_keep + rank) * out_stride1, edge.to(tl.int32), mask=write)


def _check(learned: torch.Tensor, context_lens: torch.Tensor, num_segments: int, learned_keep: int, max_replacements: int) -> None:
    if learned.dim() != 2:
        raise ValueError(f"learned must be 2-D [rows, topk], got shape {tuple(learned.shape)}; pass one row per query token")
    if context_lens.dim() != 1 or context_lens.shape[0] != learned.shape[0]:
        raise ValueError(
            f"context_lens must be 1-D with one length per learned row ({learned.shape[0]}), "
            f"got shape {tuple(context_lens.shape)}; pass one context length per row"
        )
    if num_segments <= 0:
        raise ValueError(f"num_segments must be at least 1, got {num_segments}; pass a positive segment count")
    if num_segments > MAX_FUSED_SEGMENTS:
        raise ValueError(
            f"num_segments must be at most {MAX_FUSED_SEGMENTS} for the fused merge (one int64 occupancy mask), "
            f"got {num_segments}; use at most {MAX_FUSED_SEGMENTS} segments"
        )
    topk = learned.shape[1]
    if not 0 <= learned_keep <= topk:
        raise ValueError(f"learned_keep must lie in [0, topk={topk}], got {learned_keep}; keep at most the whole row")
    if max_replacements < 0:
        raise ValueError(f"max_replacements must be at least 0, got {max_replacements}; pass 0 to merge nothing")


def fused_topology_witness_merge(
    learned: torch.Tensor, context_lens: torch.Tensor, num_segments: int, learned_keep: int, max_replacements: int
) -> torch.Tensor:
    """A new int32 ``[R, topk]``: ``learned`` with the row's witnesses merged in (see
    the module docstring); equal, bit for bit, to the torch pair's result."""
    _check(learned, context_lens, num_segments, learned_keep, max_replacements)
    if learned.device.type != "cuda" and not FORCE_KERNEL:
        witnesses = topology_witnesses(learned, context_lens, num_segments)
        return merge_topology_witnesses(learned, witnesses, learned_keep, max_replacements)
    if learned.device.type != "cuda" and not INTERPRETED:
        raise RuntimeError(
            "the fused kernel was forced onto a non-CUDA device but Triton's interpreter is off; "
            "set TRITON_INTERPRET=1 before importing kernels_topology.fused"
        )
    rows, topk = learned.shape
    topk_budget = topk - learned_keep
    budget = min(max_replacements, topk_budget)
    out = torch.empty((rows, topk), dtype=learned.dtype, device=learned.device)
    if rows == 0 or topk == 0:
        return out
    block_k = min(triton.next_power_of_2(topk), _MAX_BLOCK_K)
    _topology_witness_merge_kernel[(rows,)](
        learned,
        context_lens,
        out,
        topk,
        learned_keep,
        budget,
        learned.stride(0),
        learned.stride(1),
        context_lens.stride(0),
        out.stride(0),
        out.stride(1),
        S=num_segments,
        BLOCK_K=block_k,
        BLOCK_S=triton.next_power_of_2(num_segments),
        num_warps=_NUM_WARPS,
    )
    return out
