"""kernels_main whose convert wrapper ignores BLOCK_STRIDE_ROWS: it takes the keyword
(so remap-ab hands it the stride) and launches with BLOCK_SIZE as the stride, the break
of vLLM issue 40 (a convert launch passing ``BLOCK_SIZE`` where main passes
``BLOCK_STRIDE_ROWS if BLOCK_STRIDE_ROWS is not None else BLOCK_SIZE``). The DCP wrapper
is main's. Right on every dense cache (stride = block size), wrong on every packed one.

The soak must find it: tests/test_envelope.py runs a short seeded soak of main against it.
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
        req_id, block_table, token_indices, BLOCK_SIZE=BLOCK_SIZE, BLOCK_STRIDE_ROWS=None,
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS, BLOCK_N=BLOCK_N, HAS_PREFILL_WORKSPACE=HAS_PREFILL_WORKSPACE,
        prefill_workspace_request_ids=prefill_workspace_request_ids, prefill_workspace_starts=prefill_workspace_starts,
        return_valid_counts=return_valid_counts, out=out, valid_counts_out=valid_counts_out)
