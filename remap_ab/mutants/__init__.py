"""Seeded kernel mutants: realistic bugs planted in the real kernels, which the suite
must catch. One module per job:

    catalogue.toml  the mutants, as data (how to add one: docs/mutants.md)
    catalogue.py    reads and checks it: ``Mutant``, ``select()``, ``get()``
    generate.py     a mutant as package ``mutant_<id>``: the target kernel plus its edits
    subset.py       the cases the checks run: the sweep subset, the race cases
    witness.py      proof that a mutant changes an output of the real kernel
    checks.py       the in-process kill checks: sweep subset, race, memcheck
    properties.py   the property-suite kill check (pytest over remap_ab.properties)
    probe.py        the pytest plugin that records which test and example killed a mutant
    worker.py       one mutant end to end, in its own process
    session.py      which checks each mutant gets, the worker pool, each verdict

``remap-ab mutants`` (``remap_ab/commands/mutants.py``) prints the kill matrix.
"""

from remap_ab.errors import MutantError
from remap_ab.mutants import catalogue
from remap_ab.mutants.catalogue import Mutant, get, select
from remap_ab.mutants.checks import CHECKS, CheckResult
from remap_ab.mutants.generate import kernel_source, materialize, mutated_source
from remap_ab.mutants.session import MutantResult, plan, run_all
from remap_ab.mutants.witness import Witness, compare_to_original, find_witness

__all__ = [
    "CHECKS",
    "CheckResult",
    "Mutant",
    "MutantError",
    "MutantResult",
    "Witness",
    "catalogue",
    "compare_to_original",
    "find_witness",
    "get",
    "kernel_source",
    "materialize",
    "mutated_source",
    "plan",
    "run_all",
    "select",
]
