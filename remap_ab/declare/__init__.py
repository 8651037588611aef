"""Declaring a subject as data (docs/subjects.md): a grid, its implementations, its
named outputs and what equal means for each, how a case becomes inputs; the machinery
derives every command from them. Knows no kernel and imports no Triton.

    grid.py      Axis, Grid, from_toml: selection, filters, the size cap, case IDs, failure tables
    compare.py   Output, bit_for_bit, close: equality per output and its evidence
    calls.py     the one call primitive and the call checks on tensor outputs
    subject.py   Declared: the Subject answered from the declarations
    report.py    the report folder of a failing case (templates/case.md.j2)
    mutants.py   Mutant, from_edits (mutants as source edits), and the kill loop
    parts.py     the run, replay and mutants command parts
"""

from remap_ab.declare.compare import Output, bit_for_bit, close
from remap_ab.declare.grid import Axis, Grid, failures_by_dimension, from_toml
from remap_ab.declare.mutants import Mutant, from_edits
from remap_ab.declare.subject import Declared, Property

__all__ = ["Axis", "Declared", "Grid", "Mutant", "Output", "Property", "bit_for_bit", "close", "failures_by_dimension",
           "from_edits", "from_toml"]
