"""Collects the property suite's `remap_ab/subjects/remap/parts/properties/convert.py` (the suite ships in
the package, so `remap-ab mutants` runs the same tests from an installed remap-ab)."""

from remap_ab.subjects.remap.parts.properties.convert import *  # noqa: F401,F403
