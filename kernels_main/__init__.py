"""The sparse-MLA index remap as vLLM main runs it: kernels_new (#50365) plus
``BLOCK_STRIDE_ROWS`` on both wrappers and caller-owned ``out`` / ``valid_counts_out``
on the convert wrapper (docs/spec.md §9, §10). kernels_new stays the #50365 snapshot,
so the two are an A/B of the merge against today's API.

Written from ``docs/spec.md`` (the contract); see ``_remap.py``."""

from kernels_main._remap import (
    _convert_req_index_to_global_index_kernel,
    _remap_tiling,
    triton_convert_req_index_to_global_index,
    triton_filter_and_convert_dcp_index,
)

__all__ = [
    "_convert_req_index_to_global_index_kernel",
    "_remap_tiling",
    "triton_convert_req_index_to_global_index",
    "triton_filter_and_convert_dcp_index",
]
