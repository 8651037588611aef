"""Shape (d) of issue 40 (two forks of vLLM main): the DCP wrapper takes caller buffers
named out= and valid_counts=; the convert wrapper takes output= with valid_counts_out=
(and main's BLOCK_STRIDE_ROWS). The buffers mean what convert's out= /
valid_counts_out= mean (SPEC §10). Values from kernels_main's kernel and launcher."""

import torch

import kernels_main as _main
from kernels_main import _remap as _kernel
from kernels_main import _remap_tiling  # noqa: F401  (its launch shape: the order contract)


def triton_convert_req_index_to_global_index(
    req_id,
    block_table,
    token_indices,
    BLOCK_SIZE=64,
    BLOCK_STRIDE_ROWS=None,
    NUM_TOPK_TOKENS=2048,
    BLOCK_N=128,
    HAS_PREFILL_WORKSPACE=False,
    prefill_workspace_request_ids=None,
    prefill_workspace_starts=None,
    return_valid_counts=False,
    output=None,
    valid_counts_out=None,
):
    return _main.triton_convert_req_index_to_global_index(
        req_id,
        block_table,
        token_indices,
        BLOCK_SIZE=BLOCK_SIZE,
        BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS,
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
        BLOCK_N=BLOCK_N,
        HAS_PREFILL_WORKSPACE=HAS_PREFILL_WORKSPACE,
        prefill_workspace_request_ids=prefill_workspace_request_ids,
        prefill_workspace_starts=prefill_workspace_starts,
        return_valid_counts=return_valid_counts,
        out=output,
        valid_counts_out=valid_counts_out,
    )


def triton_filter_and_convert_dcp_index(
    req_id,
    block_table,
    token_indices,
    dcp_size,
    dcp_rank,
    cp_kv_cache_interleave_size=1,
    BLOCK_SIZE=64,
    NUM_TOPK_TOKENS=2048,
    BLOCK_N=128,
    return_valid_counts=False,
    compact_valid_to_front=True,
    out=None,
    valid_counts=None,
):
    if out is None and valid_counts is None:
        return _main.triton_filter_and_convert_dcp_index(
            req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size,
            BLOCK_SIZE=BLOCK_SIZE, NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N,
            return_valid_counts=return_valid_counts, compact_valid_to_front=compact_valid_to_front,
        )
    assert dcp_size >= 1, f"dcp_size must be at least 1, not {dcp_size}"
    assert 0 <= dcp_rank < dcp_size, f"dcp_rank must lie in [0, {dcp_size}), not {dcp_rank}"
    assert BLOCK_SIZE % cp_kv_cache_interleave_size == 0, "cp_kv_cache_interleave_size must divide BLOCK_SIZE"
    assert token_indices.dtype == torch.int32 and token_indices.shape[1] == NUM_TOPK_TOKENS
    assert NUM_TOPK_TOKENS % BLOCK_N == 0, "NUM_TOPK_TOKENS must be divisible by BLOCK_N"
    if dcp_size == 1:
        return triton_convert_req_index_to_global_index(
            req_id,
            block_table,
            token_indices,
            BLOCK_SIZE=BLOCK_SIZE,
            NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
            BLOCK_N=BLOCK_N,
            return_valid_counts=return_valid_counts,
            output=out,
            valid_counts_out=valid_counts,
        )
    count_valid = return_valid_counts or compact_valid_to_front
    token_indices = token_indices.contiguous()
    if out is None:
        out = torch.full_like(token_indices, -1) if compact_valid_to_front else torch.empty_like(token_indices)
    elif compact_valid_to_front:
        out.fill_(-1)
    counts = None
    if count_valid:
        given = valid_counts if return_valid_counts else None
        counts = _kernel._valid_counts_buffer(token_indices, NUM_TOPK_TOKENS, BLOCK_N, given)
    _kernel._launch(
        req_id.contiguous(), block_table.contiguous(), token_indices, out, counts, None, None,
        BLOCK_SIZE, None, NUM_TOPK_TOKENS, BLOCK_N, HAS_PREFILL=False, COUNT_VALID=count_valid,
        COMPACT_TO_FRONT=compact_valid_to_front, DCP_SIZE=dcp_size, DCP_RANK=dcp_rank,
        CP_INTERLEAVE=cp_kv_cache_interleave_size,
    )
    return (out, counts) if return_valid_counts else out
