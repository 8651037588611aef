"""The fused topology kernel off by one in the first element on chosen calls only (the
calls counted as tests/impls/flaky_first_call.py counts them): a topology B that fails
some calls and passes the others, as a race would (tests/test_replay_repeat.py)."""

import importlib.util
from pathlib import Path

from kernels_topology.fused import fused_topology_witness_merge as _real
from kernels_topology.fused import kernel_forced  # noqa: F401  (the CPU A/B runs the kernel itself)

_spec = importlib.util.spec_from_file_location("_flaky_counter", Path(__file__).with_name("flaky_first_call.py"))
assert _spec is not None and _spec.loader is not None
_counter = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_counter)


def fused_topology_witness_merge(*args, **kwargs):
    out = _real(*args, **kwargs)
    if _counter.failing_now() and out.numel():
        out = out.clone()
        out.view(-1)[0] += 1
    return out
