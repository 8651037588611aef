"""remap-ab: bit-exact A/B differential testing of GPU kernel pairs.

The public surface is what this module exports: the errors, the default subject's
public names (its ``public.NAMES``: a case's config and ID, its inputs, the verdict, one
case run) and ``record`` (the calls a process makes, recorded: docs/traces.md), each
served on first use from the module named for it. The core
(configs, inputs, comparators, reports) imports without Triton; running a case imports
the kernels lazily, after the backend is chosen.

Importing remap_ab changes nothing in the process: not the environment, not torch's
settings. The command line and the pytest plugin choose the Triton backend up front;
a library user's first case run (or ``registry.get``) chooses it then.
"""

import importlib
from typing import Any

from remap_ab import subjects
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

# The default subject's public names -> the modules holding them (imported on first use).
_PUBLIC: dict[str, str] = {
    **importlib.import_module(f"remap_ab.subjects.{subjects.DEFAULT}.public").NAMES,
    "record": "remap_ab.traces.recorder",  # ``with remap_ab.record(DIR):`` (docs/traces.md)
}

__all__ = [
    "BackendError",
    "ConfigError",
    "DisagreementError",
    "ImplementationError",
    "InternalError",
    "InputError",
    "NeedsGPUError",
    "ProfileError",
    "RemapABError",
    "ReportError",
    "ResourceError",
    "UsageError",
]
__all__ += _PUBLIC


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # found once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
