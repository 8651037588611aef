"""Packaging and the library's manners: what installs, under which names, and that
importing remap_ab leaves its caller's process alone."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_installed():
    # The package list is explicit (strategies/ installs under another name), so a
    # new subpackage must be added to it; this names the one that was forgotten.
    tool = _pyproject()["tool"]["setuptools"]
    listed = set(tool["packages"])
    mapped = {folder: name for name, folder in tool["package-dir"].items()}
    found = set()
    for init in ROOT.glob("**/__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts[0] in ("tests", "build", ".venv") or rel.parts[0].startswith("."):
            continue
        name = mapped.get(rel.parts[0], rel.parts[0])
        found.add(".".join([name, *rel.parts[1:]]))
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert "strategies" not in listed and mapped == {"strategies": "remap_ab.strategies"}


def test_python_floor_matches_the_standard_library_used():
    assert _pyproject()["project"]["requires-python"] == ">=3.11"  # tomllib (grid.py) is 3.11+


def test_test_extra_installs_the_ci_tools():
    extra = " ".join(_pyproject()["project"]["optional-dependencies"]["test"])
    for tool in ("pytest", "pytest-xdist", "hypothesis", "ruff", "mypy", "matplotlib"):
        assert tool in extra


def test_import_changes_nothing_in_the_environment():
    # On a CPU machine the interpreter used to be switched on by the import itself.
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "REMAP_AB_PINNED_GPU")}
    code = ("import os; before = dict(os.environ); import remap_ab, remap_ab.runner, remap_ab.report; "
            "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items()); "
            "assert 'triton' not in __import__('sys').modules")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
