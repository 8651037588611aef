"""One scheduled batch in both calling conventions: the host version's per-token request
rows and the device version's ``query_start_loc``. The scheduler lays a batch's tokens
out request by request, so the two carry the same facts; ``req_indices`` and
``query_start_loc`` turn one into the other, and ``host_args``/``device_args`` build each
side's call from one batch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels_slotmap import PAD_SLOT_ID


@dataclass(frozen=True)
class Params:
    """The call's scalars, as both versions take them."""

    block_size: int  # the kernel block size
    dcp_world_size: int = 1
    dcp_rank: int = 0
    cp_kv_cache_interleave_size: int = 1
    pad_slot_id: int = PAD_SLOT_ID
    blocks_per_kv_block: int = 1

    def scalars(self) -> dict:
        """The keyword arguments after the buffer, as both versions name them."""
        return {"dcp_world_size": self.dcp_world_size, "dcp_rank": self.dcp_rank,
                "cp_kv_cache_interleave_size": self.cp_kv_cache_interleave_size, "pad_slot_id": self.pad_slot_id,
                "blocks_per_kv_block": self.blocks_per_kv_block}


@dataclass(frozen=True)
class Batch:
    """A scheduled batch: the block table (the first ``columns`` of an int32 buffer, so
    its row stride may exceed its width), request r's tokens at ``[qsl[r], qsl[r+1])``
    and each token's position."""

    table_buffer: np.ndarray  # [max_num_reqs, stride] int32
    columns: int  # the table's width: max_num_blocks_per_req
    query_start_loc: np.ndarray  # [num_reqs + 1] int32
    positions: np.ndarray  # [num_tokens] int64
    max_num_tokens: int  # the slot buffer's length (>= num_tokens; more: the PAD tail)

    @property
    def block_table(self) -> np.ndarray:
        return self.table_buffer[:, : self.columns]


def req_indices(query_start_loc: np.ndarray) -> np.ndarray:
    """Each token's request row (int64), from ``query_start_loc``."""
    counts: np.ndarray = np.diff(query_start_loc.astype(np.int64))
    if (counts < 0).any():
        raise ValueError("query_start_loc must not decrease")
    return np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)


def query_start_loc(req_indices: np.ndarray, num_reqs: int) -> np.ndarray:
    """``[num_reqs + 1]`` int32 from each token's request row; ValueError when the tokens
    are not laid out request by request (then no ``query_start_loc`` describes them)."""
    rows = np.asarray(req_indices, dtype=np.int64)
    if rows.size and ((np.diff(rows) < 0).any() or rows[0] < 0 or rows[-1] >= num_reqs):
        raise ValueError(f"req_indices must be non-decreasing rows in [0, {num_reqs}) to have a query_start_loc")
    counts = np.bincount(rows, minlength=num_reqs)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def host_args(batch: Batch, params: Params, slot_mapping: np.ndarray) -> tuple[tuple, dict]:
    """The host version's arguments (``slot_mapping``: its int64 buffer, written in place)."""
    return ((batch.block_table, req_indices(batch.query_start_loc), batch.positions, params.block_size, slot_mapping),
            params.scalars())


def device_args(batch: Batch, params: Params, slot_mapping, device: str) -> tuple[tuple, dict]:
    """The device version's arguments, tensors on ``device``; the table keeps its
    strides (a column slice stays a slice of its wider buffer)."""
    import torch

    table = torch.from_numpy(batch.table_buffer).to(device)[:, : batch.columns]
    qsl = torch.from_numpy(batch.query_start_loc.astype(np.int32)).to(device)
    return (qsl, torch.from_numpy(batch.positions.astype(np.int64)).to(device), table, params.block_size, slot_mapping), params.scalars()


# The A/B's one calling convention: the batch as tensors (the table's buffer and width,
# query_start_loc, positions), the caller's slot buffer and the scalars; each call gives
# back the whole buffer as that version leaves it (the caller's buffer is not written).
def call_host(table_buffer, columns, query_start_loc, positions, slot_mapping, params: Params):
    """The host version on host arrays (request rows from ``query_start_loc``), its buffer
    then copied to ``slot_mapping``'s device as vLLM copies it."""
    import torch

    from kernels_slotmap import host

    batch = Batch(table_buffer.cpu().numpy(), columns, query_start_loc.cpu().numpy(), positions.cpu().numpy(), 0)
    buf = slot_mapping.cpu().numpy().copy()
    args, kwargs = host_args(batch, params, buf)
    host.compute_slot_mapping(*args, **kwargs)
    return torch.from_numpy(buf).to(slot_mapping.device)


def host_as_vllm_runs_it(table_buffer, columns, query_start_loc, positions, slot_mapping, params: Params):
    """The host version as a model runner runs it, for timing: its host arrays made once
    (the runner has them from its input preparation), then each call computes into a pinned
    buffer and copies ``slot_mapping[:num_tokens]`` to the device (non_blocking). The call
    ignores its arguments and gives back the device buffer."""
    import torch

    from kernels_slotmap import host

    batch = Batch(table_buffer.cpu().numpy(), columns, query_start_loc.cpu().numpy(), positions.cpu().numpy(), 0)
    pinned = slot_mapping.cpu().pin_memory() if slot_mapping.is_cuda else slot_mapping.cpu().clone()
    target, n = slot_mapping.clone(), positions.shape[0]
    args, kwargs = host_args(batch, params, pinned.numpy())

    def call(**_) -> torch.Tensor:
        host.compute_slot_mapping(*args, **kwargs)
        target[:n].copy_(pinned[:n], non_blocking=True)
        return target

    return call


def call_device(table_buffer, columns, query_start_loc, positions, slot_mapping, params: Params, module=None):
    """The device kernel on the tensors as given (``module``: another build of
    kernels_slotmap.device with the same entry point, e.g. a mutant)."""
    if module is None:
        from kernels_slotmap import device as module
    buf = slot_mapping.clone()
    module.compute_slot_mapping(query_start_loc, positions, table_buffer[:, :columns], params.block_size, buf,
                                **params.scalars())
    return buf


def call_oracle(table_buffer, columns, query_start_loc, positions, slot_mapping, params: Params):
    """The oracle's slots, then PAD to the buffer's end."""
    import torch

    from kernels_slotmap.oracle import slot_mapping as defined

    slots = defined(table_buffer[:, :columns], query_start_loc, positions, params.block_size, *params.scalars().values())
    return torch.cat([slots, torch.full_like(slot_mapping, params.pad_slot_id)[slots.shape[0]:]])
