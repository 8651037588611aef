"""remap-ab's public Python surface (remap_ab/__init__.py): the errors, and the default
subject's public names (its ``public.NAMES``), served from the modules it names without
the top-level module naming any of them."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import remap_ab
from remap_ab import errors, subjects

PUBLIC = importlib.import_module(f"remap_ab.subjects.{subjects.DEFAULT}.public")
ERRORS = ("BackendError", "ConfigError", "DisagreementError", "ImplementationError", "InputError", "InternalError",
          "NeedsGPUError", "ProfileError", "RemapABError", "ReportError", "ResourceError", "UsageError")


def misplaced(names: dict) -> list[str]:
    """The names whose declared module is not where the object is defined."""
    return sorted(name for name, module in names.items()
                  if getattr(importlib.import_module(module), name).__module__ != module)


@pytest.mark.parametrize("name", sorted(PUBLIC.NAMES))
def test_each_public_name_is_the_subjects_object(name):
    namespace: dict = {}
    exec(f"from remap_ab import {name}", namespace)
    expected = getattr(importlib.import_module(PUBLIC.NAMES[name]), name)
    assert namespace[name] is expected and getattr(remap_ab, name) is expected
    assert name in remap_ab.__all__ and name in dir(remap_ab)


def test_each_name_lives_where_its_subject_says_and_a_wrong_entry_is_caught():
    assert misplaced(PUBLIC.NAMES) == []
    # inputs.py imports CaseConfig, so the name resolves there too: only its home is config.py
    assert misplaced({**PUBLIC.NAMES, "CaseConfig": "remap_ab.subjects.remap.case.inputs"}) == ["CaseConfig"]


def test_the_surface_is_the_errors_and_the_subjects_names():
    assert sorted(remap_ab.__all__) == sorted([*ERRORS, *PUBLIC.NAMES, "record"])  # record: docs/traces.md
    assert all(getattr(remap_ab, name) is getattr(errors, name) for name in ERRORS)
    assert set(remap_ab.__all__) <= set(dir(remap_ab))
    namespace: dict = {}
    exec("from remap_ab import *", namespace)
    assert set(remap_ab.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="has no attribute 'CaseConfigs'"):
        remap_ab.CaseConfigs  # noqa: B018


def test_the_top_level_module_names_no_subject_name():
    assert remap_ab.__file__
    source = Path(remap_ab.__file__).read_text()
    assert [name for name in PUBLIC.NAMES if re.search(rf"\b{name}\b", source)] == []


def test_importing_the_surface_loads_no_triton_and_running_a_case_stays_lazy():
    code = ("import sys, remap_ab\n"
            "from remap_ab import *\n"
            "print(sorted(m for m in sys.modules if m == 'triton' or m.startswith('triton.')"
            " or m == 'remap_ab.subjects.remap.judge.runner'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"
