"""The remap's property suite as a kill check sees it: the package it runs
(``remap_ab.subjects.remap.parts.properties``) and the order of its tests for a mutant (those
named after the path of the mutant's witness case first). The running and the probe's
records are the driver's (``remap_ab/mutants/properties.py``).
"""

from __future__ import annotations

from remap_ab.mutants.properties import property_files, property_tests
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.parts.mutants.catalogue import Mutant

SUITE_PACKAGE = "remap_ab.subjects.remap.parts.properties"


def _path_keywords(config: CaseConfig) -> list[str]:
    """Words naming the SPEC path a case exercises, as property tests name it."""
    if config.mode == "convert":
        return ["convert"]
    if config.dcp_size == 1:
        return ["size_one", "delegat"]
    return ["compact"] if config.compact else ["in_place", "inplace"]


def order_for(m: Mutant, tests: list[str]) -> list[str]:
    """The property tests, those named after the mutant's witness path first (a stable
    sort: the rest keep their order). Only the time to the first kill depends on it."""
    words = _path_keywords(m.witness_config())

    def rank(nodeid: str) -> int:
        name = nodeid.rsplit("::", 1)[-1]
        return 0 if any(w in name for w in words) else 1

    return sorted(tests, key=rank)


def suite_tests(m: Mutant, full: bool) -> list[str]:
    """The suite's tests as the kill check runs them: in file order with ``full``, else
    those named after the mutant's witness path first."""
    tests = property_tests(property_files(SUITE_PACKAGE))
    return tests if full else order_for(m, tests)
