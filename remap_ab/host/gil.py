"""The GIL's switch interval while a helper thread works beside a busy main thread.

A thread waiting for the GIL gets it when the holder releases it or, at the latest,
after the switch interval (5 ms by default). A helper that needs the GIL back after
every C call that released it (hashing a large buffer, reading a file) waits that
long each time beside a main thread that runs Python without pause. With a short
interval it waits microseconds; the main thread pays a context switch per handover,
not per interval, since the helper holds the GIL only between its C calls.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

QUICK_INTERVAL = 0.0002  # seconds

_lock = threading.Lock()
_holders = 0
_before = 0.0


def hand_over_quickly() -> Callable[[], None]:
    """Lower the switch interval until the function returned is called (idempotent).
    Holders nest: the last one to finish restores the interval found by the first."""
    global _holders, _before
    with _lock:
        if _holders == 0:
            _before = sys.getswitchinterval()
            sys.setswitchinterval(min(_before, QUICK_INTERVAL))
        _holders += 1
    released = False

    def release() -> None:
        nonlocal released
        global _holders
        with _lock:
            if released:
                return
            released = True
            _holders -= 1
            if _holders == 0:
                sys.setswitchinterval(_before)

    return release
