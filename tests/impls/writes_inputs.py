"""kernels_new, except that the convert wrapper writes its result into the caller's
``token_indices`` as well: every convert case fails (input written), the DCP wrapper
passes. A failing B for measuring how fast a failing sweep or soak runs:

    PYTHONPATH=$PWD/tests/impls remap-ab sweep --b writes_inputs
"""

import kernels_new as _real
from kernels_new import triton_filter_and_convert_dcp_index  # noqa: F401  (passes, unchanged)

if hasattr(_real, "_remap_tiling"):  # the same launch shape, so the same order contract
    _remap_tiling = _real._remap_tiling


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    res = _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs)
    out = res[0] if isinstance(res, tuple) else res
    token_indices.copy_(out)
    return res
