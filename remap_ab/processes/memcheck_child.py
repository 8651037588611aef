"""The process that compute-sanitizer runs (``python -m remap_ab.processes.memcheck_child
PAYLOAD``): every case of the payload once through its implementation on the GPU, by
the subject's function the payload names (``child``: "module:function", e.g.
``remap_ab/subjects/remap/parts/memcheck.py``), printing the address of every tensor so the
parent (``sanitizer/compute.py``) can name the allocations in the sanitizer's findings.

A process remap-ab starts, so it sits with them above the pipeline: the subject's
function runs cases through the subject's calls, which import the sanitizer (its parent
side imports nothing that runs an implementation)."""

from __future__ import annotations

import faulthandler
import importlib
import sys
import time

from remap_ab import runtime
from remap_ab.host import tuning
from remap_ab.sanitizer.compute import CASE_MARK, DONE_MARK, READY, STACK_AFTER_S, STAGE_MARK, TENSOR_MARK


def main(payload_path: str) -> int:
    started = time.monotonic()

    def stage(what: str) -> None:
        print(f"{STAGE_MARK} {time.monotonic() - started:.1f} s: {what}", flush=True)

    stage("started")
    # A start that stalls (sanitizer/compute.py's START_TIMEOUT_S) prints where it is before the kill.
    faulthandler.dump_traceback_later(STACK_AFTER_S, exit=False, file=sys.stderr)

    tuning.tune_this_process()
    runtime.select("cuda")
    import torch

    payload = torch.load(payload_path, weights_only=False)
    device = torch.device("cuda", payload["device_index"])
    torch.zeros(1, device=device)
    faulthandler.cancel_dump_traceback_later()
    stage(f"torch imported, {device}: {READY}")
    module, _, function = payload["child"].partition(":")
    run = getattr(importlib.import_module(module), function)

    def case(k: int, what: str) -> None:
        print(f"{CASE_MARK} {k} {what}", flush=True)

    # Every case's tensors stay allocated to the end (what the function returns): no
    # address is reused, so the allocation a finding names is one case's.
    alive = run(payload, device, _allocation, case, stage)
    print(f"{DONE_MARK} {len(payload['cases'])}", flush=True)
    del alive
    return 0


def _allocation(name: str, t) -> None:
    """Print the allocation holding ``t`` (its storage: a view of a layout's wider
    buffer starts inside it), as the sanitizer names a finding's nearest allocation."""
    storage = t.untyped_storage()
    print(f"{TENSOR_MARK} {name} {storage.data_ptr():#x} {storage.nbytes()}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
