"""The generator's hash on a GPU in one pass (``inputs._draw``'s values, bit for bit).

In torch, a draw is some twenty elementwise ops over int64 tensors, each a pass over
memory; for the sweep's lanes those passes are most of the generation's device time.
This kernel reads each element's index and stream keys once, mixes in registers in
32-bit unsigned arithmetic (its wrap-around is the ``& 0xFFFFFFFF`` the torch form
spells out) and writes each value once. Imported only on a GPU: the CPU generates with
torch (the interpreter would be slower, not faster).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from remap_ab import runtime

_BLOCK = 1024


@triton.jit
def _mix32(x):
    x ^= x >> 16
    x *= 0x7FEB352D
    x ^= x >> 15
    x *= 0x5BD1E995
    x ^= x >> 16
    return x


# One variant for every batch (a new one would be compiled, on a cold cache, at a
# generation's first use): no value or alignment specialisation, the stream count a
# loop bound rather than a constant.
_ARGS = ("keys", "key_stride_s", "key_stride_n", "index", "index_stride", "out", "n", "streams")


@triton.jit(do_not_specialize=_ARGS, do_not_specialize_on_alignment=_ARGS)
def _draw_kernel(keys, key_stride_s, key_stride_n, index, index_stride, out, n, streams, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    i = tl.load(index + at * index_stride, mask=inside, other=0).to(tl.uint32)
    key_at = keys + at * key_stride_n
    out_at = out + at
    for _ in range(streams):
        k = tl.load(key_at, mask=inside, other=0).to(tl.uint32)
        x = _mix32(_mix32(i + k) ^ k)
        tl.store(out_at, x.to(tl.int64), mask=inside)
        key_at += key_stride_s
        out_at += n


def draw(keys: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``inputs._draw(keys, index)`` for a 1-D ``index`` and ``keys`` of shape [N], [1],
    [S, N] or [S, 1] (N: ``index``'s length), all int64 on one GPU."""
    n = index.numel()
    rows = keys if keys.dim() == 2 else keys.view(1, -1)
    streams = rows.shape[0]
    out = torch.empty((streams, n), dtype=torch.int64, device=index.device)
    if n and streams:
        runtime.triton_key_ready()  # the first lookup would hash Triton's installation again beside the thread hashing it
        _draw_kernel[(triton.cdiv(n, _BLOCK),)](
            rows, rows.stride(0), rows.stride(1) if rows.shape[1] > 1 else 0, index, index.stride(0), out, n, streams,
            BLOCK=_BLOCK,
        )
    return out if keys.dim() == 2 else out.view(n)
