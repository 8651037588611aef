"""The remap's names on remap-ab's public surface. ``remap_ab/__init__.py`` serves the
default subject's ``NAMES`` as ``remap_ab.NAME`` (``from remap_ab import CaseConfig``),
importing a name's module on its first use. Kept free of imports: ``import remap_ab``
reads ``NAMES`` without loading torch or Triton."""

from __future__ import annotations

from typing import Any

# Each public name -> the module it lives in.
NAMES = {
    "CaseConfig": "remap_ab.subjects.remap.config",
    "case_id": "remap_ab.subjects.remap.config",
    "CaseInputs": "remap_ab.subjects.remap.inputs",
    "generate_inputs": "remap_ab.subjects.remap.inputs",
    "compare": "remap_ab.subjects.remap.compare",
    "Verdict": "remap_ab.subjects.remap.compare",
    "Output": "remap_ab.subjects.remap.compare",
    "Reference": "remap_ab.subjects.remap.compare",
    "Mismatch": "remap_ab.subjects.remap.compare",
    "OrderContract": "remap_ab.subjects.remap.compare",
    "run_case": "remap_ab.subjects.remap.public",
}


def run_case(*args: Any, **kwargs: Any) -> Any:
    """See :func:`remap_ab.subjects.remap.runner.run_case` (imported when called)."""
    # a library user pays for the runner's imports (call.py, the sanitizer, the
    # registry) only when running a case, not on `from remap_ab import run_case`
    from remap_ab.subjects.remap.runner import run_case as _run_case

    return _run_case(*args, **kwargs)
