"""Class coverage of the property suite, and the plumbing a failure report relies on.

The coverage test replays every property's example generation without running a
kernel (strategies.coverage.drawn_examples): under the derandomized ci profile those
are exactly the examples the properties run, so the test fails, deterministically and
in any xdist worker, when the ci run leaves an equivalence class unvisited.
"""

import importlib
import pathlib
import shlex

import pytest
from hypothesis import given, settings
from remap_ab.strategies import REQUIRED_CLASSES, case_configs, replay_command, schedules
from remap_ab.strategies.coverage import coverage_of, drawn_examples

from remap_ab.cli import build_parser
from remap_ab.properties import profiles
from remap_ab.subjects.remap.parts.run_command import config_from_args

PROPERTY_MODULES = sorted(p.stem for p in pathlib.Path(__file__).parent.glob("test_properties_*.py"))


def property_tests():
    """Every @given test of the tests/test_properties_*.py modules that runs here
    (the schedule properties are skipped on a GPU, so they cover nothing there)."""
    tests = []
    for name in PROPERTY_MODULES:
        module = importlib.import_module(name)
        if _skipped_here(module):
            continue
        tests += [obj for attr, obj in vars(module).items() if attr.startswith("test_") and hasattr(obj, "hypothesis")]
    return tests


def _skipped_here(module) -> bool:
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return any(m.name == "skipif" and m.args and m.args[0] is True for m in marks)


def test_the_profile_visits_every_equivalence_class(impl_names, request):
    tests = property_tests()
    # 9 properties on the interpreter, 6 on a GPU (no schedule properties there).
    assert len(tests) >= 6, f"expected the property tests of {PROPERTY_MODULES}, found {len(tests)}"
    coverage = coverage_of(tests, impl_names=impl_names)
    table = coverage.table()
    # Kept beside the run for the record (and printed with -rA / on failure).
    out = pathlib.Path(request.config.rootpath, "reports", f"class-coverage-{profiles.active().name}.txt")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"{profiles.active().describe()}\n{table}\n")
    except OSError:
        pass
    print(table)
    missing = coverage.missing()
    if missing and not settings.default.derandomize:
        # A random profile's replay is a fresh sample, not the run itself: report, don't fail.
        pytest.skip(f"random profile {profiles.active().name}: this sample missed {', '.join(missing)}")
    assert not missing, (
        f"the {profiles.active().name} profile never visits {len(missing)} class(es): {', '.join(missing)}\n{table}"
    )


def test_the_coverage_check_fails_on_a_narrow_strategy():
    # The check above must be able to fail: a convert-only, in-place strategy cannot
    # reach DCP ranks or compaction, and the coverage says so.
    @given(config=case_configs(modes=("convert",), counts=False))
    @settings(max_examples=10, derandomize=True, database=None)
    def narrow(config):
        pass

    cov = coverage_of([narrow])
    assert cov.cases == 10
    missing = cov.missing()
    assert "placement: compacted" in missing and "dcp: size 4 rank 3" in missing
    assert "counts: returned" in missing


def test_replay_stub_sees_the_same_examples_twice():
    # Derandomized generation is a function of the test alone: two replays agree.
    @given(config=case_configs())
    @settings(max_examples=8, derandomize=True, database=None)
    def probe(config):
        pass

    first = [kw["config"] for kw in drawn_examples(probe)]
    second = [kw["config"] for kw in drawn_examples(probe)]
    assert first == second and len(first) == 8


@given(config=case_configs(), schedule=schedules())
@settings(max_examples=25, derandomize=True, database=None)
def test_replay_command_rebuilds_the_exact_case(config, schedule):
    # The printed command is the contract of a failure report: parsing it with the
    # real CLI must give back the same configuration (hence the same case ID).
    command = replay_command(config, "old", "some.module.path", schedule)
    argv = shlex.split(command)
    assert argv[:2] == ["remap-ab", "run"]
    args = build_parser().parse_args(argv[1:])
    rebuilt = config_from_args(args)
    assert rebuilt == config and rebuilt.case_id == config.case_id
    assert (args.a, args.b) == ("old", "some.module.path")
    assert args.schedule == f"{schedule[0]}:{schedule[1]}"


def test_every_required_class_name_is_unique():
    assert len(set(REQUIRED_CLASSES)) == len(REQUIRED_CLASSES)
