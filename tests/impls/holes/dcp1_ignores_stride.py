"""kernels_main, but the DCP wrapper at DCP size 1 delegates to convert without its
BLOCK_STRIDE_ROWS (the block size stands in): right on every dense cache (stride = block
size), and on every DCP size above 1; wrong at size 1 with any other stride, which no
grid called the DCP wrapper with."""

import kernels_main as _main
from kernels_main import _remap_tiling, triton_convert_req_index_to_global_index  # noqa: F401


def triton_filter_and_convert_dcp_index(
    req_id,
    block_table,
    token_indices,
    dcp_size,
    dcp_rank,
    cp_kv_cache_interleave_size=1,
    BLOCK_SIZE=64,
    BLOCK_STRIDE_ROWS=None,
    NUM_TOPK_TOKENS=2048,
    BLOCK_N=128,
    return_valid_counts=False,
    compact_valid_to_front=True,
):
    return _main.triton_filter_and_convert_dcp_index(
        req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size, BLOCK_SIZE=BLOCK_SIZE,
        BLOCK_STRIDE_ROWS=None if dcp_size == 1 else BLOCK_STRIDE_ROWS, NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
        BLOCK_N=BLOCK_N, return_valid_counts=return_valid_counts, compact_valid_to_front=compact_valid_to_front)
