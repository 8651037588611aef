"""Subjects: the kernel pairs remap-ab tests, each declared as data plus a few functions
in a package of its own (``remap_ab.subject.Subject``; docs/layout.md):

    remap     vLLM's sparse-MLA index remap (kernels_old, kernels_new, kernels_main)
    topology  vLLM's topology-witness merge (kernels_topology; docs/topology.md)
    slotmap   vLLM's slot mapping, host NumPy against device Triton (kernels_slotmap; docs/slotmap.md)

``get(name)`` imports a subject's ``subject`` module only when it is asked for. A
subject of one's own is named ``MODULE:ATTRIBUTE`` (a dotted module on ``sys.path`` and
the object in it), as the suite's ``tests/sums_subject.py`` is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from remap_ab.errors import UsageError

if TYPE_CHECKING:
    from remap_ab.subject import Subject

NAMES = ("remap", "topology", "slotmap")
DEFAULT = "remap"


def get(name: str) -> Subject:
    """The subject called ``name`` (UsageError naming the known ones otherwise)."""
    if name in NAMES:
        return importlib.import_module(f"remap_ab.subjects.{name}.subject").SUBJECT
    module, colon, attribute = name.partition(":")
    if not colon:
        raise UsageError(f"--subject {name!r}: no such subject; choose one of {', '.join(NAMES)}, or MODULE:ATTRIBUTE")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--subject {name!r}: cannot load it ({type(exc).__name__}: {exc}); "
                         "name a module on sys.path and the subject object in it") from None
    from remap_ab.subject import Subject

    if not isinstance(found, Subject):
        raise UsageError(f"--subject {name!r}: {type(found).__name__} is no remap_ab.subject.Subject; derive the "
                         "subject from it or from remap_ab.declare.Declared (docs/subjects.md)")
    return found
