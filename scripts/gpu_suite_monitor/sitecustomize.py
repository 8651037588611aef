"""Loaded by every Python started with this folder on PYTHONPATH (run.sh puts it there).
In a compute-sanitizer child only (the one process that has
PYTORCH_NO_CUDA_MEMORY_CACHING=1, set by remap_ab.sanitizer), dump every thread's Python
stack every 30 s to /tmp/remap-stacks/<pid>.txt: a child that hangs says where."""

import os

if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
    import faulthandler
    import sys

    os.makedirs("/tmp/remap-stacks", exist_ok=True)
    _stacks = open(f"/tmp/remap-stacks/{os.getpid()}.txt", "w", buffering=1)  # noqa: SIM115 (open for the process's life)
    _stacks.write(" ".join(sys.argv) + "\n")
    faulthandler.dump_traceback_later(30, repeat=True, file=_stacks)
