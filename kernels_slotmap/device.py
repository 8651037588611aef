"""The slot mapping on the device as one Triton kernel (side B: vLLM's rewrite).

Grid ``num_reqs + 1``: program r walks request r's tokens ``[qsl[r], qsl[r+1])`` in
chunks of ``BLOCK_SIZE`` (1024, a constexpr, not the cache's block size); the last
program fills ``slot_mapping[num_tokens:]`` with PAD, so a CUDA graph replaying a fixed
size sees no stale slots. Block ids are widened to int64 before the multiply. Like the
host version, nothing checks a position's block against the row's length.

On the CPU the kernel runs in Triton's interpreter, which needs ``TRITON_INTERPRET=1``
set before this module is imported (remap_ab.runtime.select does it).

Each statement that encodes one rule stands on its own line: mutants edit lines.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels_slotmap import PAD_SLOT_ID

BLOCK_SIZE = 1024


@triton.jit
def _slot_mapping_kernel(
    query_start_loc_ptr,  # [num_reqs + 1] int32
    positions_ptr,  # [num_tokens] int64
    block_table_ptr,  # [max_num_reqs, *] int32
    block_table_stride,
    slot_mapping_ptr,  # [max_num_tokens] int64
    num_tokens,
    max_num_tokens,
    block_size,
    dcp_world_size,
    dcp_rank,
    interleave,
    pad_slot_id,
    blocks_per_kv_block,
    BLOCK_SIZE: tl.constexpr,
):
    req = tl.program_id(0)
    num_reqs = tl.num_programs(0) - 1
    lanes = tl.arange(0, BLOCK_SIZE)
    if req == num_reqs:
        for start in range(num_tokens, max_num_tokens, BLOCK_SIZE):
            tail = start + lanes
            tl.store(slot_mapping_ptr + tail, tl.full([BLOCK_SIZE], pad_slot_id, tl.int64), mask=tail < max_num_tokens)
    else:
        first = tl.load(query_start_loc_ptr + req)
        end = tl.load(query_start_loc_ptr + req + 1)
        row = block_table_ptr + req.to(tl.int64) * block_table_stride
        virtual_block_size = block_size * dcp_world_size
        for start in range(first, end, BLOCK_SIZE):
            tokens = start + lanes
            valid = tokens < end
            pos = tl.load(positions_ptr + tokens, mask=valid, other=0)
            kernel_block = pos // virtual_block_size
            allocation_block = tl.load(row + kernel_block // blocks_per_kv_block, mask=valid, other=0)
            block = allocation_block.to(tl.int64) * blocks_per_kv_block + kernel_block % blocks_per_kv_block
            offset = pos % virtual_block_size
            local = (offset // interleave) % dcp_world_size == dcp_rank
            local_offset = offset // (dcp_world_size * interleave) * interleave + offset % interleave
            slot = tl.where(local, block * block_size + local_offset, pad_slot_id)
            tl.store(slot_mapping_ptr + tokens, slot, mask=valid)


def compute_slot_mapping(
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32
    positions: torch.Tensor,  # [num_tokens] int64
    block_table: torch.Tensor,  # [max_num_reqs, max_num_blocks_per_req] int32, row r = request r
    block_size: int,  # the kernel block size (the allocation block over blocks_per_kv_block)
    slot_mapping: torch.Tensor,  # [max_num_tokens] int64: [:num_tokens] the slots, the rest PAD
    dcp_world_size: int = 1,
    dcp_rank: int = 0,
    cp_kv_cache_interleave_size: int = 1,
    pad_slot_id: int = PAD_SLOT_ID,
    blocks_per_kv_block: int = 1,  # the hybrid split: kernel blocks per allocation block
) -> None:
    num_reqs = query_start_loc.shape[0] - 1
    _slot_mapping_kernel[(num_reqs + 1,)](
        query_start_loc, positions, block_table, block_table.stride(0), slot_mapping,
        positions.shape[0], slot_mapping.shape[0], block_size, dcp_world_size, dcp_rank,
        cp_kv_cache_interleave_size, pad_slot_id, blocks_per_kv_block, BLOCK_SIZE=BLOCK_SIZE,
    )
