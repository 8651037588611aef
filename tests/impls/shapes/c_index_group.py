"""Shape (c) of issue 40 (the fork carrying vLLM's index-group convert): convert takes
BLOCK_STRIDE_ROWS, out= and valid_counts_out=; the DCP wrapper is vLLM main's (no
stride, no buffers). Values from kernels_main."""

import kernels_main as _main
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
    out=None,
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
        out=out,
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
):
    return _main.triton_filter_and_convert_dcp_index(
        req_id,
        block_table,
        token_indices,
        dcp_size,
        dcp_rank,
        cp_kv_cache_interleave_size,
        BLOCK_SIZE=BLOCK_SIZE,
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
        BLOCK_N=BLOCK_N,
        return_valid_counts=return_valid_counts,
        compact_valid_to_front=compact_valid_to_front,
    )
