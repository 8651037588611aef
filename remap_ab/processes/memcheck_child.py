"""The process that compute-sanitizer runs (``python -m remap_ab.processes.memcheck_child
PAYLOAD``): every case of the payload once through its implementation on the GPU,
printing the address of every tensor so the parent (``sanitizer/compute.py``) can name
the allocations in the sanitizer's findings.

A process remap-ab starts, so it sits with them above the pipeline: it runs cases
through the runner and call.py, which import the sanitizer (its parent side imports
nothing that runs an implementation)."""

from __future__ import annotations

import faulthandler
import sys
import time

from remap_ab import runtime
from remap_ab.host import tuning
from remap_ab.sanitizer.compute import CASE_MARK, DONE_MARK, READY, STACK_AFTER_S, STAGE_MARK, TENSOR_MARK
from remap_ab.subjects.remap import registry
from remap_ab.subjects.remap.call import PrivateInputs
from remap_ab.subjects.remap.config import CaseConfig
from remap_ab.subjects.remap.inputs import CaseInputs, in_layout
from remap_ab.subjects.remap.runner import run_implementation


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
    impl = registry.get(payload["impl"])
    # Every case's tensors stay allocated to the end: no address is reused, so the
    # allocation a finding names is one case's (sanitizer/compute.py's docstring).
    alive = []
    for k, (config_dict, tensors) in enumerate(payload["cases"]):
        config = CaseConfig.from_dict(config_dict)
        inputs = CaseInputs(**{name: t.to(device) for name, t in tensors.items()})
        if config.layout != "contiguous":  # the payload's host copies are dense: lay them out again
            inputs = in_layout(config.layout, inputs)
        # The call gives the implementation its own copy of the inputs (call.py): the
        # copy's allocations are the ones its kernels touch, so they are the ones named.
        private = PrivateInputs([inputs])
        print(f"{CASE_MARK} {k} {config.case_id}", flush=True)
        for name, t in private.cases[0].tensors().items():
            _allocation(name, t)
        out = run_implementation(impl, config, inputs, private=private, index=0)
        stage(f"case {k} ran")
        for name, result in (("out", out.out), ("valid_counts", out.counts)):
            if result is not None:
                _allocation(name, result)
        if out.error:
            print(f"{CASE_MARK} {k} raised: {out.error}", flush=True)
        alive.append((inputs, private, out))
    print(f"{DONE_MARK} {len(payload['cases'])}", flush=True)
    return 0


def _allocation(name: str, t) -> None:
    """Print the allocation holding ``t`` (its storage: a view of a layout's wider
    buffer starts inside it), as the sanitizer names a finding's nearest allocation."""
    storage = t.untyped_storage()
    print(f"{TENSOR_MARK} {name} {storage.data_ptr():#x} {storage.nbytes()}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
