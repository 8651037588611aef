"""Generating a mutant: the target kernel package copied under the name
``mutant_<id>``, with the mutant's edits applied to the copy's ``_remap.py``.

A mutant is generated, never hand-copied, so it always is the real kernel plus one
bug. The kernel packages are found where Python imports them from (a checkout or an
installed wheel), never by a path relative to this file.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import shutil
from pathlib import Path
from typing import Optional

from remap_ab.errors import MutantError
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.mutants.catalogue import TARGETS, Mutant

KERNEL_FILE = "_remap.py"


def package_name(target: str) -> str:
    """The importable package of a target: kernels_old or kernels_new."""
    if target not in TARGETS:
        raise MutantError(f"target {target!r} is not one of {', '.join(TARGETS)}")
    return registry.BUILTIN[target]


def kernel_dir(target: str) -> Path:
    """The folder of the target's kernel package, found without importing it."""
    name = package_name(target)
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise MutantError(f"kernel package {name} is not importable; install remap-ab or run from its checkout")
    return Path(next(iter(spec.submodule_search_locations)))


def import_roots() -> list[Path]:
    """The folders a child process needs on its path to import remap_ab and the kernel
    packages exactly as this process does."""

    roots = [Path(__file__).resolve().parents[5]]
    roots += [kernel_dir(t).resolve().parent for t in TARGETS]
    return list(dict.fromkeys(roots))


def kernel_source(target: str) -> str:
    return (kernel_dir(target) / KERNEL_FILE).read_text()


def mutated_source(m: Mutant, source: Optional[str] = None) -> str:
    """``kernels_<target>/_remap.py`` with the mutant's edits applied, each exactly once."""
    text = kernel_source(m.target) if source is None else source
    for i, (old, new) in enumerate(m.edits, 1):
        n = text.count(old)
        if n != 1:
            first = old.strip().splitlines()[0] if old.strip() else repr(old)
            raise MutantError(
                f"mutant {m.id}: edit {i} must match {package_name(m.target)}/{KERNEL_FILE} exactly once but matches "
                f"{n} times ({first!r}); the kernel changed: update the mutant's edit in "
                f"remap_ab/subjects/remap/parts/mutants/catalogue.toml"
            )
        text = text.replace(old, new)
    try:
        compile(text, f"{m.package}/{KERNEL_FILE}", "exec")
    except SyntaxError as exc:
        raise MutantError(f"mutant {m.id}: the edited kernel does not parse ({exc})") from None
    return text


def edit_diff(m: Mutant) -> list[str]:
    """The mutant's edits as unified-diff lines of its target's kernel file, without the
    two file-name lines' own header (``--list -v`` prints them)."""
    diff = difflib.unified_diff(kernel_source(m.target).splitlines(), mutated_source(m).splitlines(),
                                f"kernels_{m.target}/{KERNEL_FILE}", f"{m.package}/{KERNEL_FILE}", n=0, lineterm="")
    return list(diff)[2:]


def _rename_imports(text: str, src_pkg: str, dst_pkg: str) -> str:
    return re.sub(rf"\b{src_pkg}(?=[.\s])", dst_pkg, text)


def materialize(m: Mutant, root: Path) -> str:
    """Write package ``mutant_<id>`` under ``root`` (which goes on sys.path /
    PYTHONPATH) and return its module name."""
    src_pkg = package_name(m.target)
    src_dir = kernel_dir(m.target)
    dst = Path(root) / m.package
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for path in sorted(src_dir.glob("*.py")):
        text = mutated_source(m) if path.name == KERNEL_FILE else path.read_text()
        text = _rename_imports(text, src_pkg, m.package)
        (dst / path.name).write_text(text)
    leftover = [p.name for p in dst.glob("*.py") if re.search(rf"^\s*(from|import)\s+{src_pkg}\b", p.read_text(), re.M)]
    if leftover:
        raise MutantError(f"mutant {m.id}: {', '.join(leftover)} still import {src_pkg} after renaming")
    importlib.invalidate_caches()
    return m.package
