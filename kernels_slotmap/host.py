"""The slot mapping on the host in NumPy (side A: vLLM's computation through 2025).

The table is int32 and is multiplied by ``block_size``, a Python int: NumPy 2 keeps
the product int32, so it wraps once block * block_size >= 2**31 (kept: that is the
behaviour under test). Nothing checks ``position // (block_size * W)`` against the
row's length: a position past its row reads on into the next row of the flattened
table, and only a read past the table's end raises (IndexError).

Each statement that encodes one rule stands on its own line: mutants edit lines.
"""

from __future__ import annotations

import numpy as np

from kernels_slotmap import PAD_SLOT_ID


def expand_kernel_blocks(block_table: np.ndarray, blocks_per_kv_block: int) -> np.ndarray:
    """The hybrid table: each allocation block id b becomes the kernel block ids
    b * k + j, j = 0..k-1 (int32, as the table is stored)."""
    if blocks_per_kv_block == 1:
        return block_table
    split = np.arange(blocks_per_kv_block, dtype=np.int32)
    expanded = block_table[:, :, None] * np.int32(blocks_per_kv_block) + split
    return expanded.reshape(block_table.shape[0], -1).astype(np.int32)


def compute_slot_mapping(
    block_table: np.ndarray,  # [max_num_reqs, max_num_blocks_per_req] int32
    req_indices: np.ndarray,  # [num_tokens] each token's request row
    positions: np.ndarray,  # [num_tokens] int64, each token's position in its request
    block_size: int,  # the kernel block size (the allocation block over blocks_per_kv_block)
    slot_mapping: np.ndarray,  # [>= num_tokens] int64, the caller's buffer; [:num_tokens] written
    dcp_world_size: int = 1,
    dcp_rank: int = 0,
    cp_kv_cache_interleave_size: int = 1,
    pad_slot_id: int = PAD_SLOT_ID,
    blocks_per_kv_block: int = 1,  # the hybrid split: kernel blocks per allocation block
) -> None:
    table = expand_kernel_blocks(block_table, blocks_per_kv_block)
    num_tokens = positions.shape[0]
    virtual_block_size = block_size * dcp_world_size
    entries = req_indices * table.shape[1] + positions // virtual_block_size
    block_numbers = table.ravel()[entries]
    offsets = positions % virtual_block_size
    local = (offsets // cp_kv_cache_interleave_size) % dcp_world_size == dcp_rank
    local_offsets = offsets // (dcp_world_size * cp_kv_cache_interleave_size) * cp_kv_cache_interleave_size
    local_offsets = local_offsets + offsets % cp_kv_cache_interleave_size
    slots = block_numbers * block_size + local_offsets
    slot_mapping[:num_tokens] = np.where(local, slots, pad_slot_id)
