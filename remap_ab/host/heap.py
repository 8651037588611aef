"""Host memory a process that runs kernels frees is kept for its next case.

Every case allocates its inputs, each implementation's private copies and the
outputs, megabytes each, and frees them after. glibc's malloc serves a block that
large with a fresh ``mmap`` (or returns the heap's free top to the system), so the
next case's block is new memory again and the kernel zero-fills it page by page: on
the CPU the sweep then spends more time in page faults than in the copies themselves.
Blocks under ``MMAP_THRESHOLD`` from the heap, and a free top kept up to
``TRIM_THRESHOLD``, let the next case reuse the same pages.
"""

from __future__ import annotations

import ctypes
import platform

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20  # glibc's upper limit for it on 64-bit systems
TRIM_THRESHOLD = 1 << 30

_kept = False


def keep_freed_memory() -> bool:
    """Tune this process's malloc as above, once; False where the C library is not
    glibc (nothing is changed there)."""
    global _kept
    if _kept:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    _kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _kept
