"""The kill-matrix driver of seeded kernel mutants: it knows no kernel. A subject's
mutants, their catalogue and checks are its part (the module its ``parts["mutants"]``
names, e.g. ``remap_ab/subjects/remap/parts/mutants``); this package runs them:

    session.py      which checks each mutant gets, the worker pool, each verdict
    worker.py       one mutant end to end, in its own process
    results.py      what one check found: ``CheckResult``
    properties.py   the property-suite kill check (pytest over the part's suite package)
    probe.py        the pytest plugin that records which test and example killed a mutant

``remap-ab mutants`` (``remap_ab/commands/mutants.py``) prints the kill matrix.
"""

from remap_ab.errors import MutantError
from remap_ab.mutants.results import CheckResult, not_run
from remap_ab.mutants.session import CHECKS, FAILING, MutantResult, MutantSettings, plan, run_all

__all__ = [
    "CHECKS",
    "FAILING",
    "CheckResult",
    "MutantError",
    "MutantResult",
    "MutantSettings",
    "not_run",
    "plan",
    "run_all",
]
