"""What a process remap-ab started itself may change about itself, and the switches.

remap-ab is a guest in a process it did not start (the pytest plugin, ``run_case``,
any library call): there it changes nothing process-wide that outlives its own call.
The processes it starts (the command line, ``remap_ab.cli:main``, and its worker
processes) call ``tune_this_process()`` first; then, at the first device choice
(``runtime.select``), they also get

- ``heap``: glibc keeps freed memory for the next case (heap.py; both devices);
- ``store_binary_only`` (CUDA): ``TRITON_STORE_BINARY_ONLY=1`` unless set, so a cache
  hit reads fewer files;
- ``triton_key`` (CUDA): Triton's hash of its installation computed in a thread,
  beside the set-up, under a short GIL switch interval (backend.py, gil.py);
- ``variant_loads`` (CUDA): a variant's metadata class and launcher module made once
  per process (variant_loads.py), patching ``collections.namedtuple`` and Triton's
  launcher loading;
- the batched interpreter (CPU) installed for the rest of the process; a guest has it
  only around each call (``interp_batched.installed``).

``hash_threads`` (inputs hashed in threads beside the kernels, inputs.py) runs in every
process: it restores the switch interval before the call that started it returns.

``REMAP_AB_TWEAKS_OFF=name[,name...]`` turns tweaks off, for measuring what each one
saves (``remap_ab.bench.tweaks``); read here and nowhere else.
"""

from __future__ import annotations

import os

from remap_ab.errors import UsageError
from remap_ab.interpreter import batched as interp_batched
from remap_ab.processes import heap, variant_loads

TWEAKS = ("heap", "store_binary_only", "triton_key", "variant_loads", "hash_threads")
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
    """The tweaks for ``device`` ("cpu" or "cuda") in a process of remap-ab's own, once
    (``runtime.select``'s first choice); nothing in a guest. The parts applied."""
    if not _owned:
        return []

    applied = []
    if enabled("heap") and heap.keep_freed_memory():
        applied.append("heap")
    if device == "cpu":
        interp_batched.install()
        applied.append("batched interpreter")
        return applied
    if enabled("store_binary_only"):
        os.environ.setdefault("TRITON_STORE_BINARY_ONLY", "1")
        applied.append("store_binary_only")
    if enabled("variant_loads"):
        applied += [f"variant_loads: {p}" for p in variant_loads.share()]
    return applied
