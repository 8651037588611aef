"""kernels_new whose `out` comes back column-major (strides (1, T)), every value right.

The layout class: `remap-ab sweep --b tests/impls/column_major.py` must fail
the `layout` check on every case with more than one token row, on every device.
"""

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401  (the same launch shape, so the same order contract)


def _column_major(result):
    if isinstance(result, tuple):
        return result[0].t().contiguous().t(), result[1]
    return result.t().contiguous().t()


def triton_convert_req_index_to_global_index(*args, **kwargs):
    return _column_major(_real.triton_convert_req_index_to_global_index(*args, **kwargs))


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    return _column_major(_real.triton_filter_and_convert_dcp_index(*args, **kwargs))
