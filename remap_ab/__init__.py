"""remap-ab: bit-exact A/B differential testing of the sparse-MLA index remap kernels.

The public surface is what this module exports; everything else is internal. The
core (configs, inputs, comparators, reports) imports without Triton; running a case
imports the kernels lazily, after the backend is chosen.

Importing remap_ab changes nothing in the process: not the environment, not torch's
settings. The command line and the pytest plugin choose the Triton backend up front;
a library user's first ``run_case`` (or ``registry.get``) chooses it then.
"""

from remap_ab.errors import (
    BackendError,
    ConfigError,
    DisagreementError,
    ImplementationError,
    InputError,
    InternalError,
    NeedsGPUError,
    ProfileError,
    RemapABError,
    ReportError,
    ResourceError,
    UsageError,
)
from remap_ab.subjects.remap.compare import Mismatch, OrderContract, Output, Reference, Verdict, compare
from remap_ab.subjects.remap.config import CaseConfig, case_id
from remap_ab.subjects.remap.inputs import CaseInputs, generate_inputs

__all__ = [
    "BackendError",
    "CaseConfig",
    "CaseInputs",
    "ConfigError",
    "DisagreementError",
    "ImplementationError",
    "InternalError",
    "InputError",
    "Mismatch",
    "NeedsGPUError",
    "OrderContract",
    "Output",
    "ProfileError",
    "Reference",
    "RemapABError",
    "ReportError",
    "ResourceError",
    "UsageError",
    "Verdict",
    "case_id",
    "compare",
    "generate_inputs",
    "run_case",
]


def run_case(*args, **kwargs):
    """See :func:`remap_ab.subjects.remap.runner.run_case` (imported lazily: it may load Triton)."""
    # keeps `import remap_ab` (so `remap-ab --help`) light: a library user pays for the runner's
    # imports (call.py, the sanitizer, the registry) only when running a case
    from remap_ab.subjects.remap.runner import run_case as _run_case

    return _run_case(*args, **kwargs)
