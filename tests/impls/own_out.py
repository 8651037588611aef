"""kernels_main whose convert wrapper takes ``out=`` and returns a tensor of its own: the
right values, never in the caller's buffer (docs/spec.md §10). A soak against it fails
every case that passes a buffer; on a GPU it once overran its deadline
(tests/test_deadlines.py's GPU test).
"""

import kernels_main as _real
from kernels_main import _remap_tiling, triton_filter_and_convert_dcp_index  # noqa: F401


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
    return _real.triton_convert_req_index_to_global_index(
        req_id, block_table, token_indices, BLOCK_SIZE=BLOCK_SIZE, BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS,
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N, HAS_PREFILL_WORKSPACE=HAS_PREFILL_WORKSPACE,
        prefill_workspace_request_ids=prefill_workspace_request_ids, prefill_workspace_starts=prefill_workspace_starts,
        return_valid_counts=return_valid_counts, out=None, valid_counts_out=valid_counts_out)
