"""The remap's side of a compute-sanitizer run on a GPU: ``run_cases``, the cases the
sanitizer's child runs (``remap_ab/processes/memcheck_child.py`` calls it; call.py's
``MEMCHECK_CHILD`` names it). The checking itself is the sanitizer's
(``remap_ab/sanitizer/``), which knows no kernel; the line that reruns a case under
memcheck is runner.py's ``memcheck_run_line``.
"""

from __future__ import annotations

from collections.abc import Callable

from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, in_layout
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import PrivateInputs
from remap_ab.subjects.remap.judge.runner import run_implementation


def run_cases(payload: dict, device, allocation: Callable[[str, object], None], case: Callable[[int, str], None],
              stage: Callable[[str], None]) -> list:
    """Every case of the payload once through its implementation on ``device``, in the
    sanitizer's child: ``case(k, case_id)`` before case ``k``, ``allocation(name, tensor)``
    for each tensor its kernels touch, ``stage(what)`` after each. Returns what must
    stay allocated to the end (no address is reused, so the allocation a finding names
    is one case's: sanitizer/compute.py's docstring)."""
    impl = registry.get(payload["impl"])
    alive = []
    for k, (config_dict, tensors) in enumerate(payload["cases"]):
        config = CaseConfig.from_dict(config_dict)
        inputs = CaseInputs(**{name: t.to(device) for name, t in tensors.items()})
        if config.layout != "contiguous":  # the payload's host copies are dense: lay them out again
            inputs = in_layout(config.layout, inputs)
        # The call gives the implementation its own copy of the inputs (call.py): the
        # copy's allocations are the ones its kernels touch, so they are the ones named.
        private = PrivateInputs([inputs])
        case(k, config.case_id)
        for name, t in private.cases[0].tensors().items():
            allocation(name, t)
        out = run_implementation(impl, config, inputs, private=private, index=0)
        stage(f"case {k} ran")
        for name, result in (("out", out.out), ("valid_counts", out.counts)):
            if result is not None:
                allocation(name, result)
        if out.error:
            case(k, f"raised: {out.error}")
        alive.append((inputs, private, out))
    return alive
