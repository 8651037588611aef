"""kernels_new whose outputs are off by one in every valid lane of rows 1024 and later
(on every path): a B that fails every case with more than 1024 token rows, in most of
their rows. For measuring report folder sizes and failing-run times at prefill scale:

    remap-ab run --b tests/impls/wrong_past_row_1024.py --tokens 2048 --topk 2048 --report /tmp/r
"""

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401  (the same launch shape, so the same order contract)

FIRST_WRONG_ROW = 1024


def _wrong(result):
    out = result[0] if isinstance(result, tuple) else result
    tail = out[FIRST_WRONG_ROW:]
    tail.add_((tail >= 0).to(tail.dtype))  # the caller's own output buffer, changed in place
    return result


def triton_convert_req_index_to_global_index(*args, **kwargs):
    return _wrong(_real.triton_convert_req_index_to_global_index(*args, **kwargs))


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    return _wrong(_real.triton_filter_and_convert_dcp_index(*args, **kwargs))
