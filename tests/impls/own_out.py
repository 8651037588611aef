"""kernels_main whose convert wrapper takes ``out=`` and returns a tensor of its own: the
right values, never in the caller's buffer (docs/spec.md §10). A soak against it fails
every case that passes a buffer; on a GPU it once overran its deadline
(tests/test_deadlines.py's GPU test).
"""

import functools

import kernels_main as _real
from kernels_main import _remap_tiling, triton_filter_and_convert_dcp_index  # noqa: F401


@functools.wraps(_real.triton_convert_req_index_to_global_index)  # main's signature, out= included
def triton_convert_req_index_to_global_index(*args, out=None, **kwargs):
    return _real.triton_convert_req_index_to_global_index(*args, **kwargs)
