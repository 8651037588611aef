"""kernels_main with caller-owned buffers on the DCP wrapper (``out=``, ``valid_counts=``),
but compacting into ``out`` at prefill scale (more than 1024 rows) it skips a row whose
count is 0 (nothing to copy, it reckons): the row keeps whatever the caller's buffer held,
not -1. Right wherever every row has a valid lane, up to 1024 rows, and wherever it does
not compact; the grids called it with compaction and caller buffers only at one row with
valid lanes, the CPU soak up to 512 rows."""

import kernels_main as _main
from kernels_main import _remap_tiling, triton_convert_req_index_to_global_index  # noqa: F401


# A DCP wrapper taking caller-owned out= / valid_counts= (one fork's, SPEC §10) over
# kernels_main's: ``keep(row, rows, count, K, compacting)`` says how many of a row's lanes go
# into out (every one, in a right wrapper).
def dcp_with_buffers(keep, req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size=1,
                     BLOCK_SIZE=64, BLOCK_STRIDE_ROWS=None, NUM_TOPK_TOKENS=2048, BLOCK_N=128,
                     return_valid_counts=False, compact_valid_to_front=True, out=None, valid_counts=None):
    compacting = compact_valid_to_front and dcp_size > 1
    got = _main.triton_filter_and_convert_dcp_index(
        req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size, BLOCK_SIZE=BLOCK_SIZE,
        BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS, NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N,
        return_valid_counts=return_valid_counts or (out is not None and compacting),
        compact_valid_to_front=compact_valid_to_front)
    values, counts = got if isinstance(got, tuple) else (got, None)
    if out is None:
        return (values, counts) if return_valid_counts else values
    for row in range(values.shape[0]):
        n = keep(row, values.shape[0], int(counts[row]) if counts is not None else NUM_TOPK_TOKENS,
                 NUM_TOPK_TOKENS, compacting)
        if n:
            out[row, :n].copy_(values[row, :n])
    if not return_valid_counts:
        return out
    if valid_counts is not None:
        valid_counts.copy_(counts)
        return out, valid_counts
    return out, counts


def _keep(row, rows, count, k, compacting):
    return 0 if compacting and rows > 1024 and count == 0 else k


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
    out=None,
    valid_counts=None,
):
    return dcp_with_buffers(_keep, req_id, block_table, token_indices, dcp_size, dcp_rank,
                            cp_kv_cache_interleave_size, BLOCK_SIZE, BLOCK_STRIDE_ROWS, NUM_TOPK_TOKENS, BLOCK_N,
                            return_valid_counts, compact_valid_to_front, out, valid_counts)
