"""The remap's names on remap-ab's public surface. ``remap_ab/__init__.py`` serves the
default subject's ``NAMES`` as ``remap_ab.NAME`` (``from remap_ab import CaseConfig``),
importing a name's module on its first use. Kept free of imports: ``import remap_ab``
reads ``NAMES`` without loading torch or Triton."""

from __future__ import annotations

from typing import Any

# Each public name -> the module it lives in.
NAMES = {
    "CaseConfig": "remap_ab.subjects.remap.case.config",
    "case_id": "remap_ab.subjects.remap.case.config",
    "CaseInputs": "remap_ab.subjects.remap.case.inputs",
    "generate_inputs": "remap_ab.subjects.remap.case.inputs",
    "compare": "remap_ab.subjects.remap.judge.compare",
    "Verdict": "remap_ab.subjects.remap.judge.compare",
    "Output": "remap_ab.subjects.remap.judge.compare",
    "Reference": "remap_ab.subjects.remap.judge.compare",
    "Mismatch": "remap_ab.subjects.remap.judge.compare",
    "OrderContract": "remap_ab.subjects.remap.judge.compare",
    "run_case": "remap_ab.subjects.remap.public",
}


def run_case(*args: Any, **kwargs: Any) -> Any:
    """See :func:`remap_ab.subjects.remap.judge.runner.run_case` (imported when called)."""
    # a library user pays for the runner's imports (call.py, the sanitizer, the
    # registry) only when running a case, not on `from remap_ab import run_case`
    from remap_ab.subjects.remap.judge.runner import run_case as _run_case

    return _run_case(*args, **kwargs)
