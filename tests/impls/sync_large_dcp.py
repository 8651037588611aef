"""kernels_new that reads the counts back to the host, only when a DCP batch has 256 rows
or more: a host synchronisation small batches never make.

The sampling class: on a GPU the default sweep (`--call-checks sample`) must fail
the `sync` check on exactly the DCP cases with counts and >= 256 token rows. On the CPU
it passes (a read-back there is an ordinary read).
"""

import kernels_new as _real
from kernels_new import (
    _remap_tiling,  # noqa: F401
    triton_convert_req_index_to_global_index,  # noqa: F401
)


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    result = _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
    counts = result[1] if isinstance(result, tuple) else None
    if counts is not None and counts.shape[0] >= 256:
        assert int(counts.max()) >= 0, "debug: a negative count"
    return result
