"""The suite's shared set-up.

- The remap-ab pytest plugin (options, fixtures, profiles, GPU pinning, the backend):
  ``remap_ab/pytest/plugin.py``.
- ``remap_ab.strategies`` bound to this checkout's ``strategies/`` folder. An install
  maps it there through setuptools' package-dir (pyproject.toml); a checkout tested
  without installing it, or a worktree whose editable install points elsewhere, gets
  the same mapping here, so pytest always tests the strategies it runs beside.
- ``broken_impl``: the one fixture that writes an implementation module into a
  temporary folder on sys.path, for tests that feed remap-ab a broken kernel
  (``broken_impl_module``: the same, for a module-scoped fixture); ``badlane``: the
  one wrong in lane (0, 0) that the sweep and pytest-grid tests run in subprocesses
  (``badlane_module``: the same, for a module-scoped fixture).
- ``importable_mutants``: catalogue mutants built as packages on sys.path for a block;
  ``by_id``: their test ids.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import itertools
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ("remap_ab.pytest.plugin", "pytester")  # pytester: pytest sessions run in this process

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ROOT / "strategies"


class _CheckoutStrategies(importlib.abc.MetaPathFinder):
    """Finds ``remap_ab.strategies`` in this checkout's ``strategies/`` (its submodules
    are then found through the package's search path, like any package's)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "remap_ab.strategies":
            return None
        return importlib.util.spec_from_file_location(
            fullname, STRATEGIES / "__init__.py", submodule_search_locations=[str(STRATEGIES)]
        )


if not any(isinstance(f, _CheckoutStrategies) for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutStrategies())


# A wrapper around a real implementation whose ``_break(out, counts, compact, in_place)``
# spoils its result: compact says whether the call compacted, in_place whether it
# filtered without compacting (both: the DCP wrapper, size > 1).
_PATCH_TEMPLATE = '''
import torch
import {base} as _real
if hasattr(_real, "_remap_tiling"):  # the same launch shape, so the same order contract
    _remap_tiling = _real._remap_tiling

def _break(out, counts, compact, in_place):
{body}
    return out, counts

def triton_convert_req_index_to_global_index(*args, **kwargs):
    res = _real.triton_convert_req_index_to_global_index(*args, **kwargs)
    out, counts = res if isinstance(res, tuple) else (res, None)
    out, counts = _break(out, counts, False, False)
    return (out, counts) if counts is not None else out

def triton_filter_and_convert_dcp_index(*args, **kwargs):
    res = _real.triton_filter_and_convert_dcp_index(*args, **kwargs)
    out, counts = res if isinstance(res, tuple) else (res, None)
    size = args[3] if len(args) > 3 else kwargs["dcp_size"]
    compact = kwargs.get("compact_valid_to_front", True) and size > 1
    out, counts = _break(out, counts, compact, size > 1 and not compact)
    return (out, counts) if counts is not None else out
'''

_names = itertools.count()


class BrokenImpl:
    """``broken_impl(source)`` or ``broken_impl(patch=..., base=...)`` -> the dotted
    name of a fresh module in a temporary folder on sys.path.

    source  the whole module (dedented), e.g. one that raises at import or returns None;
    patch   the body of ``_break(out, counts, compact, in_place)`` applied to ``base``'s result
            (default kernels_new), e.g. ``"out = out.clone(); out[0, 0] += 1"``;
    name    the module name (default: a fresh ``broken_<n>``, so no cache aliases it).

    ``folder`` is the temporary folder and ``env()`` an environment whose PYTHONPATH
    has it, for tests that run remap-ab in a subprocess."""

    def __init__(self, folder: Path, monkeypatch):
        self.folder = folder
        self.names: list[str] = []
        monkeypatch.syspath_prepend(str(folder))

    def __call__(self, source: str | None = None, *, patch: str | None = None, base: str = "kernels_new",
                 name: str | None = None) -> str:
        if (source is None) == (patch is None):
            raise TypeError("give either source or patch")
        name = name or f"broken_{os.getpid()}_{next(_names)}"
        if patch is not None:
            source = _PATCH_TEMPLATE.format(base=base, body=textwrap.indent(textwrap.dedent(patch).strip(), "    "))
        assert source is not None
        (self.folder / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        self.names.append(name)
        return name

    def env(self) -> dict:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.folder), str(ROOT), env.get("PYTHONPATH", "")) if p)
        return env

    def forget(self) -> None:
        from remap_ab.subjects.remap.judge import registry
        for name in self.names:
            sys.modules.pop(name, None)
            registry.forget(name)


@pytest.fixture
def broken_impl(tmp_path, monkeypatch):
    """See BrokenImpl: a broken implementation module, by source or by patch."""
    folder = tmp_path / "impls"
    folder.mkdir()
    maker = BrokenImpl(folder, monkeypatch)
    yield maker
    maker.forget()


# kernels_new with lane (0, 0) one higher where it is valid: the first mismatch is at
# row 0, col 0, and a case whose lane (0, 0) is invalid passes.
BADLANE = """
out = out.clone()
if out.numel():  # without a host sync: the sync check runs on every CUDA call
    out[0, 0] = torch.where(out[0, 0] >= 0, out[0, 0] + 1, out[0, 0])
"""


@pytest.fixture
def badlane(broken_impl):
    """``broken_impl`` holding the module ``badlane`` (BADLANE); its ``env()`` runs it in a subprocess."""
    broken_impl(patch=BADLANE, name="badlane")
    return broken_impl


@pytest.fixture(scope="module")
def broken_impl_module(tmp_path_factory):
    """``broken_impl`` for a module-scoped fixture (e.g. one sweep that several tests
    read): the same maker, its folder kept on sys.path until the module's tests end."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        maker = BrokenImpl(tmp_path_factory.mktemp("impls"), monkeypatch)
        yield maker
        maker.forget()


@pytest.fixture(scope="module")
def badlane_module(broken_impl_module):
    """``badlane`` for a module-scoped fixture (one run that several tests read)."""
    broken_impl_module(patch=BADLANE, name="badlane")
    return broken_impl_module


def forget_mutant_packages() -> None:
    """Drop every generated ``mutant_*`` package from ``sys.modules`` and the registry.
    Several test modules generate the catalogue's packages (same names, their own
    folders); under xdist one worker may run them in turn, and an import must find this
    module's build."""
    from remap_ab.subjects.remap.judge import registry
    for name in [n for n in sys.modules if n.startswith("mutant_")]:
        del sys.modules[name]
        registry.forget(name)


def by_id(item) -> str:
    """A parametrised test's id: the item's ``id`` (a catalogue mutant, a rejection call)."""
    return item.id


@contextlib.contextmanager
def importable_mutants(root: Path, mutants) -> Iterator[dict[str, str]]:
    """``{mutant id: package name}``: each of ``mutants`` built under ``root``, which is
    on sys.path until the block ends; another build of the same names is forgotten
    before, and this one after."""
    from remap_ab.subjects.remap.parts.mutants.generate import materialize

    forget_mutant_packages()
    sys.path.insert(0, str(root))
    try:
        yield {m.id: materialize(m, root) for m in mutants}
    finally:
        sys.path.remove(str(root))
        forget_mutant_packages()


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS`` with a fixed author (the repositories tests build), its stdout."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout
