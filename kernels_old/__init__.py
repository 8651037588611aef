"""The sparse-MLA index remap as it was before vLLM #50365: every program owns one
BLOCK_N-wide column tile, and counting and compaction go through ``atomic_add``.

Written from ``docs/spec.md`` (the contract); see ``_remap.py``."""

from kernels_old._remap import (
    _convert_req_index_to_global_index_kernel,
    triton_convert_req_index_to_global_index,
    triton_filter_and_convert_dcp_index,
)

__all__ = [
    "_convert_req_index_to_global_index_kernel",
    "triton_convert_req_index_to_global_index",
    "triton_filter_and_convert_dcp_index",
]
