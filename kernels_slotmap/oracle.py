"""The slot mapping by its definition, in plain torch and int64 throughout: no NumPy, no
Triton, no table flattening. A token's request comes from ``query_start_loc`` by a
search, its table entry from the hybrid table built by repeating each allocation block
id; so a shared mistake in either kernel's indexing does not reappear here."""

from __future__ import annotations

import torch

from kernels_slotmap import PAD_SLOT_ID


def slot_mapping(block_table: torch.Tensor, query_start_loc: torch.Tensor, positions: torch.Tensor, block_size: int,
                 dcp_world_size: int = 1, dcp_rank: int = 0, interleave: int = 1, pad_slot_id: int = PAD_SLOT_ID,
                 blocks_per_kv_block: int = 1) -> torch.Tensor:
    """``[num_tokens]`` int64 slots; ValueError for a position whose block lies past its
    request's row (out of contract: the kernels read another request's blocks)."""
    table = block_table.to(torch.int64)
    k = blocks_per_kv_block
    kernel_table = table.repeat_interleave(k, dim=1) * k + torch.arange(k, dtype=torch.int64, device=table.device).repeat(table.shape[1])
    ends = query_start_loc.to(torch.int64)[1:]
    tokens = torch.arange(positions.shape[0], dtype=torch.int64, device=table.device)
    request = torch.searchsorted(ends, tokens, right=True)
    pos = positions.to(torch.int64)
    span = block_size * dcp_world_size  # one kernel block on every rank
    column = torch.div(pos, span, rounding_mode="floor")
    past = column >= kernel_table.shape[1]
    if bool(past.any()):
        t = int(past.nonzero()[0, 0])
        raise ValueError(f"token {t} (request {int(request[t])}) has position {int(pos[t])}, in block {int(column[t])} "
                         f"past its row of {kernel_table.shape[1]} kernel blocks")
    within = pos - column * span
    group = torch.div(within, interleave, rounding_mode="floor")  # interleave groups, dealt round-robin to the ranks
    owner = group % dcp_world_size
    local_offset = torch.div(group, dcp_world_size, rounding_mode="floor") * interleave + within % interleave
    slots = kernel_table[request, column] * block_size + local_offset
    return torch.where(owner == dcp_rank, slots, torch.full_like(slots, pad_slot_id))
