"""kernels_new whose outputs are off by one in every valid lane on chosen calls only: a
B that fails some calls and passes the others, as a race would. For the replay of a
nondeterministic failure (tests/test_replay_repeat.py):

- with ``REMAP_AB_FLAKY_COUNTER=FILE``, calls are counted in FILE across processes and
  the calls numbered in ``REMAP_AB_FLAKY_CALLS`` (comma-separated, default ``1``) fail;
- without it, the first call in each process fails.
"""

import os

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401  (the same launch shape, so the same order contract)

_in_process = [0]


def failing_now() -> bool:
    path = os.environ.get("REMAP_AB_FLAKY_COUNTER")
    if not path:
        _in_process[0] += 1
        return _in_process[0] == 1
    try:
        with open(path) as f:
            n = int(f.read().strip() or 0) + 1
    except FileNotFoundError:
        n = 1
    with open(path, "w") as f:
        f.write(str(n))
    wanted = {int(c) for c in os.environ.get("REMAP_AB_FLAKY_CALLS", "1").split(",") if c.strip()}
    return n in wanted


def _maybe_wrong(result):
    if failing_now():
        out = result[0] if isinstance(result, tuple) else result
        out.add_((out >= 0).to(out.dtype))  # the caller's own output buffer, changed in place
    return result


def triton_convert_req_index_to_global_index(*args, **kwargs):
    return _maybe_wrong(_real.triton_convert_req_index_to_global_index(*args, **kwargs))


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    return _maybe_wrong(_real.triton_filter_and_convert_dcp_index(*args, **kwargs))
