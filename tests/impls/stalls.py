"""kernels_new that stalls: from its ``REMAP_AB_STALL_AFTER``-th call in a process on
(default 1: every call), each call sleeps ``REMAP_AB_STALL_SECONDS`` (default an hour)
before returning the right output; with ``REMAP_AB_STALL_IN_C=1`` it sleeps in libc
instead, SIGALRM blocked and the GIL released (a stand-in for a CUDA synchronize on a
kernel that never ends: a C call no signal brings back to Python). For the soak's
deadline (tests/test_deadlines.py)."""

import ctypes
import os
import signal
import time

import kernels_new as _real
from kernels_new import _remap_tiling  # noqa: F401  (the same launch shape, so the same order contract)

_calls = [0]


def _stall() -> None:
    _calls[0] += 1
    if _calls[0] < int(os.environ.get("REMAP_AB_STALL_AFTER", "1")):
        return
    if os.environ.get("REMAP_AB_STALL_IN_C") == "1":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        ctypes.CDLL(None).sleep(int(float(os.environ.get("REMAP_AB_STALL_SECONDS", "3600"))))
    time.sleep(float(os.environ.get("REMAP_AB_STALL_SECONDS", "3600")))


def triton_convert_req_index_to_global_index(*args, **kwargs):
    _stall()
    return _real.triton_convert_req_index_to_global_index(*args, **kwargs)


def triton_filter_and_convert_dcp_index(*args, **kwargs):
    _stall()
    return _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
