"""The property-suite kill check: a subject's suite is a package (the subject's
mutants part names it, ``SUITE_PACKAGE``; installed with remap-ab, ``tests/`` only
collects it), run through pytest with the mutant on its side, and the mutant-probe
plugin's records turned into a CheckResult.

The suite is found where Python imports it from, so the check needs no checkout and
never reads the repository's ``tests/`` folder.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Optional

from remap_ab.errors import MutantError
from remap_ab.mutants.results import CheckResult
from remap_ab.status import Outcome

PROFILE_FOR_DEVICE = {"cpu": "ci", "cuda": "gpu"}


def suite_dir(package: str) -> Path:
    """The folder of property-suite package ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MutantError(f"the property suite {package} is not importable; reinstall remap-ab")
    return Path(next(iter(spec.submodule_search_locations)))


def is_property_module(path: Path) -> bool:
    """A property module: a module of a subject's ``properties`` package defining a
    ``test_`` function. None is named ``test_*.py`` (no test file ships inside a
    subject's package), so pytest collects one named on its command line, and remap-ab's
    plugin collects the rest (``pytest --pyargs PACKAGE``)."""
    path = Path(path)
    subjects_dir = Path(__file__).resolve().parent.parent / "subjects"
    return (path.suffix == ".py" and not path.name.startswith("_") and path.parent.name == "properties"
            and path.resolve().is_relative_to(subjects_dir) and bool(_TEST.search(path.read_text())))


_TEST = re.compile(r"^(?:async\s+)?def test_\w+", re.M)


def property_files(package: str) -> list[Path]:
    """The suite's property modules (``is_property_module``), by name."""
    return sorted(f for f in suite_dir(package).glob("*.py") if is_property_module(f))


def property_tests(files: list[Path]) -> list[str]:
    """Node ids (``/path/test_file.py::test_name``) of the tests in ``files``, in file order."""
    ids: list[str] = []
    for f in files:
        names = re.findall(r"^(?:async\s+)?def (test_\w+)", f.read_text(), re.M)
        ids += [f"{f.as_posix()}::{n}" for n in names] if names else [f.as_posix()]
    return ids


def pytest_args(tests: list[str], root: Path, full: bool) -> list[str]:
    """pytest's arguments: an empty ini in the mutant folder (no checkout's settings
    apply), remap-ab's plugin and the probe, and ``tests`` in the order to run (every
    one to the end with ``full``, else up to the first failure)."""
    ini = Path(root) / "pytest.ini"
    if not ini.exists():
        ini.write_text("[pytest]\n")
    args = ["-q", "--no-header", "-c", str(ini), "--rootdir", str(root),
            "-p", "remap_ab.pytest.plugin", "-p", "remap_ab.mutants.probe", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-W", "ignore::DeprecationWarning"]
    if not full:
        args.append("-x")
    return args + tests


def summarize_probe(probe: Path, returncode: int, output: str) -> CheckResult:
    """Turn the probe's records and pytest's exit status into a CheckResult."""
    records = []
    if probe.exists():
        for line in probe.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    tests = [r for r in records if r.get("kind") == "test"]
    failed = [r for r in tests if r["outcome"] == "failed"]
    res = CheckResult("properties", Outcome.SURVIVED)
    if returncode < 0:
        # A signal (e.g. SIGSEGV from an out-of-bounds access): a crash is a kill.
        started = [r for r in records if r.get("kind") == "start"]
        res.status = Outcome.KILLED
        res.killer = started[-1]["nodeid"] if started else "(crash)"
        res.killers = [res.killer]
        res.detail = f"crashed (signal {-returncode}) " + " ".join(output.strip().splitlines()[-2:])[:300]
        return res
    if returncode not in (0, 1):
        res.status, res.detail = Outcome.BROKEN, f"pytest exit {returncode}: " + " ".join(output.strip().splitlines()[-3:])[:300]
        return res
    examples = [r for r in records if r.get("kind") == "example"]
    if failed:
        first = failed[0]
        res.status, res.killer, res.detail = Outcome.KILLED, first["nodeid"], first.get("message", "")
        res.killers = [r["nodeid"] for r in failed]
        # Valid examples of the killing test up to and including its first failing one,
        # and of the whole run up to that point.
        mine = [e for e in examples if e.get("nodeid") == first["nodeid"]]
        n, how = _examples_to_first_failure(mine)
        res.examples, res.how = n, how
        before = [e for e in examples if e["seq"] < first["seq"] and e.get("nodeid") != first["nodeid"]]
        if n is not None:
            res.examples_total = sum(1 for e in before if _counts_as_example(e)) + n
    elif returncode == 1:
        res.status = Outcome.BROKEN
        res.detail = "pytest failed without a failing test: " + " ".join(output.strip().splitlines()[-3:])[:300]
    else:
        res.examples_total = sum(1 for e in examples if _counts_as_example(e))
    return res


def _is_failure(e: dict) -> bool:
    # Hypothesis reports a failing explicit @example as "gave_up" (no "failed" record).
    return e["status"] == "failed" or (e["status"] == "gave_up" and e.get("how") == "explicit example")


def _counts_as_example(e: dict) -> bool:
    """A valid example: passed or failed (not a draw Hypothesis rejected)."""
    return e["status"] == "passed" or _is_failure(e)


def _examples_to_first_failure(examples: list) -> tuple[Optional[int], str]:
    """(valid examples up to and including the first failing one, how it was generated)."""
    n = 0
    for e in examples:
        if _counts_as_example(e):
            n += 1
        if _is_failure(e):
            return n, ("regression @example" if e.get("how") == "explicit example" else "generated")
    return None, ""
