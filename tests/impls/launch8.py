"""kernels_new that runs every call eight times and returns the last: bit-exact, and
several times slower.

The speed class: `remap-ab bench --b tests/impls/launch8.py` must fail the pr
cells' speed gate (exit 1, the cells named); the sweep passes and its summary shows
the ratio (indicative).
"""

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401

_TIMES = 8


def triton_convert_req_index_to_global_index(*args, **kwargs):
    for _ in range(_TIMES - 1):
        _real.triton_convert_req_index_to_global_index(*args, **kwargs)
    return _real.triton_convert_req_index_to_global_index(*args, **kwargs)


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    for _ in range(_TIMES - 1):
        _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
    return _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
