"""What a process remap-ab started itself may change about itself, and the switches.

remap-ab is a guest in a process it did not start (the pytest plugin, a
subject's library call): there it changes nothing process-wide that outlives its own call.
The processes it starts (the command line, ``remap_ab.cli:main``, and its worker
processes) call ``tune_this_process()`` first; then, at the first device choice
(``runtime.select``), the CPU ones get the batched interpreter installed for the rest of
the process (a guest has it only around each call, ``interp_batched.installed``).

Five tweaks can be switched off, each kept because it saves at least 10 % of the job it
speeds: the first three the CPU sweep or the H200 sweep in-process (``python -m
remap_ab.subjects.remap.parts.bench.tweaks``), the fourth starting workers, the fifth a failing
GPU sweep (figures in docs/performance.md):

- ``heap`` (CPU, own processes): glibc keeps the memory a case freed for the next one
  (heap.py); on a GPU it saved nothing;
- ``triton_key`` (CUDA, own processes): Triton's hash of its installation computed in a
  thread beside the set-up (runtime.py, gil.py);
- ``hash_threads`` (every process): inputs hashed in threads beside the kernels
  (batch.py); it restores the switch interval before the call that started it returns.
- ``fork_server`` (own processes): workers start from a fork server that imported torch
  once (processes/start.py), not each from a fresh interpreter.
- ``report_helpers`` (GPU, in-process runs): failing cases' report folders drawn and
  written by helper processes while the run judges on (processes/background.py).

``REMAP_AB_TWEAKS_OFF=name[,name...]`` (or ``all``) turns them off, for measuring what each
saves; read here and nowhere else.
"""

from __future__ import annotations

import os

from remap_ab.errors import UsageError
from remap_ab.host import heap
from remap_ab.interpreter import batched as interp_batched

TWEAKS = ("heap", "triton_key", "hash_threads", "fork_server", "report_helpers")
OFF_VARIABLE = "REMAP_AB_TWEAKS_OFF"

_owned = False


def enabled(name: str) -> bool:
    """Whether tweak ``name`` is on (all are, unless ``$REMAP_AB_TWEAKS_OFF`` names it)."""
    if name not in TWEAKS:
        raise ValueError(f"unknown tweak {name!r}; one of {', '.join(TWEAKS)}")
    off = {w.strip() for w in os.environ.get(OFF_VARIABLE, "").split(",") if w.strip()}
    unknown = off - set(TWEAKS) - {"all"}
    if unknown:
        raise UsageError(f"{OFF_VARIABLE} names {', '.join(sorted(unknown))}: not a tweak; use any of "
                         f"{', '.join(TWEAKS)} or all")
    return name not in off and "all" not in off


def tune_this_process() -> None:
    """Mark this process as remap-ab's own: the command line's entry and the worker
    processes' start call it, nothing else. The tuning itself comes with the device
    choice (``runtime.select`` calls ``apply``)."""
    global _owned
    _owned = True


def owned() -> bool:
    """Whether remap-ab started this process (``tune_this_process`` was called)."""
    return _owned


def apply(device: str) -> list[str]:
    """What ``device`` ("cpu" or "cuda") changes in a process of remap-ab's own, once
    (``runtime.select``'s first choice); nothing in a guest. The parts applied."""
    if not _owned or device != "cpu":
        return []
    interp_batched.install()
    return ["batched interpreter"] + (["heap"] if enabled("heap") and heap.keep_freed_memory() else [])
