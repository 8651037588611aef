"""The remap's part of compile-ahead (``remap_ab/processes/precompile.py``): A's and
B's wrappers called on a small stand-in of a case, made on the CPU, in a compile
worker whose every Triton launch is a warm-up (compile, do not launch)."""

from __future__ import annotations

from remap_ab.errors import exception_line
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry


def stand_in(config: CaseConfig) -> CaseConfig:
    """A case with ``config``'s kernels and specialisations but at most two rows and
    requests (two, not one: a dimension of size 1 changes what is contiguous), of
    which at most one is CUDA-graph padding (a case keeps a real row)."""
    tokens = min(config.tokens, 2)
    return config.replace(tokens=tokens, num_reqs=min(config.num_reqs, 2),
                          graph_padding=min(config.graph_padding, tokens - 1))


def warm_up(a: str, b: str, config: CaseConfig) -> list[str]:
    """Call A's and B's wrappers on ``config``'s stand-in; the errors, ``name: error``
    each (the device process compiles a failed variant itself at its launch)."""
    small = stand_in(config)  # the same kernels (tests/test_precompile.py), inputs made in no time
    inputs = generate_inputs(small, device="cpu")
    errors = []
    # The sides the device runs (runner.sides): one lacking a parameter the case passes
    # is the oracle there, which compiles nothing.
    runs = registry.feature_plan(a, b).runs(small)
    for name, side_runs in zip((a, b), runs):
        if not side_runs:
            continue
        try:
            registry.get(name)(small, inputs)
        except Exception as exc:  # the device process compiles it itself then
            errors.append(f"{name}: {exception_line(exc)}")
    return errors
