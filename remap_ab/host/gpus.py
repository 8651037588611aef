"""One worker per GPU: which GPU each worker process gets, decided before CUDA starts.

CUDA reads ``CUDA_VISIBLE_DEVICES`` once, when a process first initialises it, so a
worker is pinned by giving it that variable in its environment at start-up. Worker i
of N on a machine with G visible GPUs gets GPU ``i mod G``; "visible" honours an outer
``CUDA_VISIBLE_DEVICES`` (its entries, indices or UUIDs, are passed through as they
are). With G = 0 the workers run on the CPU (Triton interpreter) and see no GPU.

The same rule pins pytest-xdist workers (``pytest -n``): the controller exports the
visible list as ``REMAP_AB_GPUS`` before the workers start, and each worker, when it
imports remap_ab (which the plugin does first thing), sets its own
``CUDA_VISIBLE_DEVICES`` from its worker id ``gw<i>`` — before torch touches CUDA.

This module must not import torch at import time.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping, MutableMapping
from typing import Optional

GPU_LIST_VAR = "REMAP_AB_GPUS"
PINNED_VAR = "REMAP_AB_PINNED_GPU"


def visible_gpus(env: Mapping[str, str], count: int) -> list[str]:
    """The GPUs a process with environment ``env`` may use, as CUDA_VISIBLE_DEVICES
    entries. ``count`` is how many torch sees (used when the variable is unset)."""
    outer = env.get("CUDA_VISIBLE_DEVICES")
    if outer is None:
        return [str(i) for i in range(count)]
    entries = [e.strip() for e in outer.split(",")]
    # CUDA stops at the first empty or invalid entry; an empty string hides every GPU.
    out = []
    for e in entries:
        if not e or e == "-1":
            break
        out.append(e)
    return out[:count]


def gpu_for_worker(worker: int, gpus: list[str]) -> Optional[str]:
    """The CUDA_VISIBLE_DEVICES value for worker ``worker``: GPU i mod G, or None
    (CPU) when there is no GPU."""
    if worker < 0:
        raise ValueError(f"worker index {worker} is negative")
    if not gpus:
        return None
    return gpus[worker % len(gpus)]


def worker_environments(workers: int, device: str, gpus: list[str]) -> list[dict]:
    """Environment overrides for each of ``workers`` worker processes.

    device "cuda": worker i sees only GPU i mod G (as its cuda:0).
    device "cpu":  every worker sees no GPU and runs the Triton interpreter.
    """
    envs = []
    for i in range(workers):
        if device == "cpu":
            envs.append({"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"})
        else:
            gpu = gpu_for_worker(i, gpus)
            if gpu is None:
                raise ValueError("device cuda but no GPU is visible")
            envs.append({"CUDA_VISIBLE_DEVICES": gpu, PINNED_VAR: gpu})
    return envs


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def start_process(ctx, env: Mapping[str, str], **process_args):
    """Start ``ctx.Process(**process_args)`` with ``env`` in its environment (a worker's
    CUDA_VISIBLE_DEVICES pin): a spawned child inherits the parent's environment at
    start, so it is set around ``start()`` and put back as it was. The child also starts
    with SIGINT and SIGTERM blocked (``STOP_SIGNALS``; a signal mask survives the exec):
    a Ctrl-C to the process group while it imports cannot raise in it. The worker
    unblocks them once it ignores them; here they stay pending until ``start()`` returns."""
    if ctx.get_start_method() != "fork":
        # multiprocessing starts its resource tracker at the first such start, and
        # unblocks every signal in this thread while doing so: started first, it cannot.
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        proc = ctx.Process(**process_args)
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return proc


def host_cores() -> int:
    """The cores this process may run on (its affinity; else the machine's): what the
    worker, compile and helper processes are counted against."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def count_gpus() -> int:
    """GPUs torch sees in this process (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


_XDIST_ID = re.compile(r"gw(\d+)$")


def xdist_pin(env: Optional[MutableMapping[str, str]] = None) -> Optional[str]:
    """In a pytest-xdist worker, pin this process to its GPU (before CUDA starts).

    Uses ``REMAP_AB_GPUS`` (set by the controller, see ``export_gpu_list``) and the
    worker id ``PYTEST_XDIST_WORKER=gw<i>``. Returns the GPU set, or None when there
    is nothing to do (not an xdist worker, no GPUs, or already pinned)."""
    env = os.environ if env is None else env
    worker = _XDIST_ID.match(env.get("PYTEST_XDIST_WORKER", ""))
    listed = env.get(GPU_LIST_VAR)
    if not worker or not listed or env.get(PINNED_VAR):
        return None
    gpus = [g for g in listed.split(",") if g]
    gpu = gpu_for_worker(int(worker.group(1)), gpus)
    if gpu is None:
        return None
    env["CUDA_VISIBLE_DEVICES"] = gpu
    env[PINNED_VAR] = gpu
    return gpu


def export_gpu_list(env: Optional[MutableMapping[str, str]] = None, count: Optional[int] = None) -> list[str]:
    """In the pytest controller: publish the visible GPUs for the workers it starts."""
    env = os.environ if env is None else env
    if env.get(GPU_LIST_VAR) is not None or env.get(PINNED_VAR):
        return [g for g in env.get(GPU_LIST_VAR, "").split(",") if g]
    gpus = visible_gpus(env, count_gpus() if count is None else count)
    env[GPU_LIST_VAR] = ",".join(gpus)
    return gpus
