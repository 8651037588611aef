"""The sparse-MLA index remap as it is after vLLM #50365: when counting at a
power-of-two width one program owns the whole row, the count is a plain store and
the compaction base is 0 (stable, column-ordered); otherwise the old tiled path.

Written from ``docs/spec.md`` (the contract); see ``_remap.py``."""

from kernels_new._remap import (
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
