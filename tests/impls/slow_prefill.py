"""kernels_new, bit-exact, that runs a call eight times (and returns the last) when it
has more than 2048 token rows: as fast as new on decode batches, several times slower
on prefill-sized ones.

The speed gate must fail it on the prefill cells alone: on a GPU,
`remap-ab bench --sections pr --a new --b tests/impls/slow_prefill.py` exits 1 naming
the cells above 2048 rows (tests/test_envelope.py shows it on the CPU with the graph
timing replaced by wall-clock timing of the calls).
"""

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401

PREFILL_ROWS = 2048  # more rows than this: slow
_TIMES = 8


def _times(token_indices) -> int:
    return _TIMES if token_indices.shape[0] > PREFILL_ROWS else 1


def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    for _ in range(_times(token_indices) - 1):
        _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs)
    return _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs)


def triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, *args, **kwargs):
    for _ in range(_times(token_indices) - 1):
        _real.triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, *args, **kwargs)
    return _real.triton_filter_and_convert_dcp_index(req_id, block_table, token_indices, *args, **kwargs)
