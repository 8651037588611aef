"""The remap's seeded mutants: realistic bugs planted in the real kernels, which the
suite must catch; what ``remap-ab mutants`` reaches as the remap's part
(``commands/common.subject_part``), the kill-matrix driver (``remap_ab/mutants/``)
running it. One module per job:

    catalogue.toml  the mutants, as data (how to add one: docs/mutants.md)
    catalogue.py    reads and checks it: ``Mutant``, ``select()``, ``get()``
    generate.py     a mutant as package ``mutant_<id>``: the target kernel plus its edits
    subset.py       the cases the checks run: the sweep subset, the race cases
    witness.py      proof that a mutant changes an output of the real kernel
    checks.py       the in-process kill checks: sweep subset, race, call, memcheck,
                    rejection calls, speed
    properties.py   the property suite the kill check runs, and its order per mutant

A part run in worker processes (``remap_ab/mutants/worker.py``) declares ``WORKER``;
the driver asks it ``select``, ``get``, ``materialize``, ``import_roots``,
``mutated_source``, ``find_witness``, ``run_check``, ``suite_tests`` and
``SUITE_PACKAGE``; the command ``edit_diff``, ``Witness`` and ``subset``.
"""

from remap_ab.errors import MutantError
from remap_ab.subjects.remap.parts.mutants import catalogue, subset
from remap_ab.subjects.remap.parts.mutants.catalogue import Mutant, get, select
from remap_ab.subjects.remap.parts.mutants.checks import run as run_check
from remap_ab.subjects.remap.parts.mutants.generate import edit_diff, import_roots, kernel_source, materialize, mutated_source
from remap_ab.subjects.remap.parts.mutants.properties import SUITE_PACKAGE, suite_tests
from remap_ab.subjects.remap.parts.mutants.witness import Witness, compare_to_original, find_witness

WORKER = True  # each mutant runs in a worker process of its own (remap_ab/mutants/session.py)

__all__ = [
    "SUITE_PACKAGE",
    "WORKER",
    "Mutant",
    "MutantError",
    "Witness",
    "catalogue",
    "compare_to_original",
    "edit_diff",
    "find_witness",
    "get",
    "import_roots",
    "kernel_source",
    "materialize",
    "mutated_source",
    "run_check",
    "select",
    "subset",
    "suite_tests",
]
