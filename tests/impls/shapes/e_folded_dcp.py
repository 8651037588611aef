"""Shape (e) of issue 40 (a fork that folds DCP into convert): vLLM main's wrappers,
and convert also takes dcp_size, dcp_rank, cp_kv_cache_interleave_size and
prefill_workspace_rank_stride; with dcp_size > 1 it keeps this rank's lanes and
compacts when counting. SPEC gives these four no meaning on convert (docs/spec.md
§9): remap-ab never passes them. Values from kernels_main's kernel and launcher."""

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
    dcp_size=1,
    dcp_rank=0,
    cp_kv_cache_interleave_size=1,
    prefill_workspace_rank_stride=0,
):
    result = _main.triton_convert_req_index_to_global_index(
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
    )
    if dcp_size == 1:
        return result
    # The fork's folded DCP path: this rank's lanes, compacted when counting, its
    # workspace rows offset by rank (what a caller means by it is not public).
    assert 0 <= dcp_rank < dcp_size and BLOCK_SIZE % cp_kv_cache_interleave_size == 0
    out = result[0] if return_valid_counts else result
    out.fill_(-1)
    counts = _kernel._valid_counts_buffer(token_indices, NUM_TOPK_TOKENS, BLOCK_N) if return_valid_counts else None
    starts = prefill_workspace_starts
    if HAS_PREFILL_WORKSPACE and prefill_workspace_rank_stride:
        starts = starts + dcp_rank * prefill_workspace_rank_stride
    _kernel._launch(
        req_id.contiguous(), block_table.contiguous(), token_indices.contiguous(), out, counts,
        prefill_workspace_request_ids if HAS_PREFILL_WORKSPACE else None,
        starts if HAS_PREFILL_WORKSPACE else None,
        BLOCK_SIZE, BLOCK_STRIDE_ROWS, NUM_TOPK_TOKENS, BLOCK_N, HAS_PREFILL=HAS_PREFILL_WORKSPACE,
        COUNT_VALID=return_valid_counts, COMPACT_TO_FRONT=return_valid_counts, DCP_SIZE=dcp_size,
        DCP_RANK=dcp_rank, CP_INTERLEAVE=cp_kv_cache_interleave_size,
    )
    return (out, counts) if return_valid_counts else out


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
