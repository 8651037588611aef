"""Subjects: the kernel pairs remap-ab tests, each declared as data plus a few functions
(``remap_ab.subject.Subject``; docs/layout.md).

A packaged subject is an entry point of the group ``remap_ab.subjects``
(pyproject.toml's ``[project.entry-points."remap_ab.subjects"]``: ``NAME =
"MODULE:ATTRIBUTE"``), read from the installed distributions' metadata; any
installed distribution may add one. remap-ab's own:

    remap     vLLM's sparse-MLA index remap (kernels_old, kernels_new, kernels_main)
    topology  vLLM's topology-witness merge (kernels_topology; docs/topology.md)
    slotmap   vLLM's slot mapping, host NumPy against device Triton (kernels_slotmap; docs/slotmap.md)

A subject of one's own is named ``MODULE:ATTRIBUTE`` (a dotted module on ``sys.path`` and
the object in it), as the suite's ``tests/sums_subject.py`` is. ``get(name)`` imports a
subject only when it is asked for.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib import metadata
from pathlib import Path

from remap_ab.errors import UsageError
from remap_ab.subject import Subject

GROUP = "remap_ab.subjects"
DEFAULT = "remap"


DISTRIBUTION = "remap-ab"


@cache
def packaged() -> dict[str, str]:
    """Packaged subject name -> its "MODULE:ATTRIBUTE", from the entry-point group.

    Where remap-ab's own metadata declares none (a checkout run from its folder without
    being installed, or whose metadata was written before the group existed: an editable
    install of an older revision, a stale ``remap_ab.egg-info`` in the working folder,
    which Python reads first), remap-ab's own would be missing: they are then the
    packages beside this file that hold a ``subject`` module, named as the entry points
    name them (tests/test_packaging.py checks the two agree)."""
    points = metadata.entry_points(group=GROUP)
    found = {ep.name: ep.value for ep in points}
    if not any(ep.dist is not None and ep.dist.name.replace("_", "-").lower() == DISTRIBUTION for ep in points):
        for path in sorted(Path(__file__).parent.glob("*/subject.py")):
            found.setdefault(path.parent.name, f"{__name__}.{path.parent.name}.subject:SUBJECT")
    return found


def names() -> tuple[str, ...]:
    """The packaged subjects' names, the default first."""
    return tuple(sorted(packaged(), key=lambda n: (n != DEFAULT, n)))


def get(name: str) -> Subject:
    """The subject called ``name``: a packaged one, or ``MODULE:ATTRIBUTE`` (UsageError
    naming the known ones otherwise)."""
    target = packaged().get(name, name)
    module, colon, attribute = target.partition(":")
    if not colon:
        raise UsageError(f"--subject {name!r}: no such subject; choose one of {', '.join(names())}, or MODULE:ATTRIBUTE")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--subject {name!r}: cannot load it ({type(exc).__name__}: {exc}); "
                         "name a module on sys.path and the subject object in it") from None
    if not isinstance(found, Subject):
        raise UsageError(f"--subject {name!r}: {type(found).__name__} is no remap_ab.subject.Subject; derive the "
                         "subject from it or from remap_ab.declare.Declared (docs/subjects.md)")
    return found
