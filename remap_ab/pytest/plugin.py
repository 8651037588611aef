"""remap-ab's pytest plugin, loaded by ``tests/conftest.py`` (or ``-p remap_ab.pytest.plugin``).

It is deliberately not a ``pytest11`` entry point: it turns the Triton interpreter on
and installs Hypothesis profiles, which must not leak into other projects' test runs
in an environment where remap-ab is installed.

Loading it, first thing, pins an xdist worker to its GPU and turns the Triton
interpreter on when there is no GPU — before any test module can import triton or
start CUDA — in the main process and in every xdist worker. (``import remap_ab``
itself changes nothing: a library does not pick its caller's backend.)

Options (one with a variable below is also set by it, for subprocesses; the ones the
command line has too are declared once, in remap_ab/options.py, with its help text):
  --remap-a / REMAP_AB_A        implementation A of the A/B properties (default old):
                                any name --a takes (old, new, oracle, a dotted module,
                                a .py file, REV:PATH in the git repository below)
  --remap-b / REMAP_AB_B        implementation B (default new)
  --remap-repo / REMAP_AB_REPO  the repository REV:PATH is read from (default: the
                                current directory)
  --remap-subject               the kernel pair under test: remap (default), topology, or
                                MODULE:ATTRIBUTE; --remap-a/--remap-b default to its A and B
  --remap-profile / REMAP_AB_PROFILE
                                the property suite's profile: ci (default), dev,
                                nightly, gpu, mutants (see remap_ab/properties/profiles.py)
  --remap-fail-slower / REMAP_AB_FAIL_SLOWER
                                the speed gate of ``remap-ab bench`` (remap_ab/speed.py)
                                on the pull request's cells, as the property suite's
                                properties/speed.py: fail a cell where B is slower than A by
                                more than PCT beyond noise (5%, or 0.05); default off.
                                GPU only: on the CPU speed is not judged
  --remap-grid [FILE]           the subject's grid as one item per case, nothing else
                                (remap_ab/pytest/grid.py; --remap-grid-filter, the
                                grid's size cap (options.MAX_SIZE), --remap-grid-batch,
                                --remap-grid-reports, --remap-grid-report-cases)
"""

from __future__ import annotations

import os
import re

import pytest

from remap_ab import options, runtime, sources, subjects
from remap_ab.errors import ImplementationError, UsageError
from remap_ab.host import gpus
from remap_ab.mutants.properties import is_property_module
from remap_ab.properties import profiles
from remap_ab.pytest import grid as pytest_grid
from remap_ab.speed import parse_fail_slower

# pytest -n on several GPUs: pin this worker before CUDA starts (put back at unconfigure).
_before_pin = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", gpus.PINNED_VAR)}
gpus.xdist_pin()
runtime.choose_early()  # the interpreter on a machine without CUDA, before triton is imported


def pytest_addoption(parser):
    group = parser.getgroup("remap-ab")
    options.add_to_pytest(group, options.A, options.B, options.REPO, options.SUBJECT)
    group.addoption(
        "--remap-profile",
        default=os.environ.get("REMAP_AB_PROFILE"),
        help="property-suite profile: ci (default; derandomized), dev, nightly, gpu, mutants (ci without shrinking)",
    )
    # The property suite's speed gate is off unless asked for (remap-ab bench's is on).
    options.add_to_pytest(group, options.FAIL_SLOWER.but(default="off", default_text="off"))

    pytest_grid.add_options(group)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")
    _remember_process(config)
    if not hasattr(config, "workerinput"):
        # The controller publishes the visible GPUs before xdist starts its workers;
        # each worker pins itself to GPU (i mod G) when it imports remap_ab (gpus.py).

        gpus.export_gpu_list()
    _resolve_implementations(config)
    if config.getoption("--remap-grid") is not None:
        grid = pytest_grid.GridPlugin(config, config._remap_ab_subject_name, *config._remap_ab_impls)
        config.pluginmanager.register(grid, "remap-ab-grid")

    try:
        config._remap_ab_fail_slower = parse_fail_slower(config.getoption("--remap-fail-slower"))
    except UsageError as exc:
        raise pytest.UsageError(str(exc).replace("--fail-slower", "--remap-fail-slower")) from None
    # Load the profile before test modules are imported: their @settings and
    # strategies read it at decoration time.

    # An explicit --hypothesis-profile keeps its Hypothesis settings; ours sets the sizes.
    explicit_hypothesis_profile = bool(config.getoption("hypothesis_profile", None))
    try:
        profiles.load(config.getoption("--remap-profile"), apply_settings=not explicit_hypothesis_profile)
    except profiles.ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None


def _remember_process(config) -> None:
    """What the session sets for its xdist workers and its tests (the repository and GPU
    list variables, a worker's GPU pin, the Hypothesis profile), put back by
    ``pytest_unconfigure``: the process that ran ``pytest.main`` is left as it was."""
    from hypothesis import settings

    names = (sources.REPO_VARIABLE, gpus.GPU_LIST_VAR)
    environment = {**{k: os.environ.get(k) for k in names}, **_before_pin}
    config._remap_ab_before = (environment, settings.get_current_profile_name())


def pytest_unconfigure(config):
    before = getattr(config, "_remap_ab_before", None)
    if before is None:
        return
    environment, profile = before
    for k, v in environment.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    from hypothesis import settings

    settings.load_profile(profile)


def _resolve_implementations(config) -> None:
    """The subject (--remap-subject), and --remap-a/--remap-b in canonical form (a revision
    pinned to its commit, a file by its absolute path; the subject's own A and B where
    neither is given) for the whole session; the repository exported, so worker
    processes read the same one. An unknown subject, a missing file or revision is a
    usage error."""

    os.environ[sources.REPO_VARIABLE] = sources.repo_dir(config.getoption("--remap-repo"))
    name = config.getoption("--remap-subject")
    try:
        subject = subjects.get(name)
        extras = pytest_grid.SubjectExtras(subject)
        config._remap_ab_impls = tuple(extras.implementation(n) for n in pytest_grid.defaults_of(config, subject))
    except (ImplementationError, UsageError) as exc:
        raise pytest.UsageError(str(exc).replace("--subject", "--remap-subject")) from None
    config._remap_ab_subject_name, config._remap_ab_extras = name, extras


def pytest_report_header(config):
    a, b = config._remap_ab_impls
    subject = config._remap_ab_subject_name
    lines = [f"remap-ab: {'' if subject == subjects.DEFAULT else f'subject {subject}; '}A={a} B={b}; "
             f"{profiles.active().describe()}"]
    for role, name in (("A", a), ("B", b)):
        if re.fullmatch(r"[A-Za-z_][\w.]*", name):  # a name or a dotted module: no file or revision to show
            continue
        spec = sources.parse(name)
        if spec is not None:
            lines.append(f"remap-ab: {role} loaded: {spec.source.line()}")
    if config.getoption("--remap-grid") is None:
        lines += [f"remap-ab: {line}" for line in config._remap_ab_extras.header(None, [])]
    return lines


def pytest_collect_file(file_path, parent):
    # A subject's property modules are not named test_*.py (none ships as a test file),
    # so `pytest --pyargs remap_ab.subjects.remap.parts.properties` collects them here; a
    # module named on the command line pytest collects itself.
    if not parent.session.isinitpath(file_path) and is_property_module(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config, items):
    if runtime.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def impl_names(pytestconfig) -> tuple[str, str]:
    """(A, B): the implementations the A/B tests compare (canonical names)."""
    return pytestconfig._remap_ab_impls


@pytest.fixture(scope="session")
def remap_fail_slower(pytestconfig):
    """The speed gate's margin (a fraction), or None when the gate is off."""
    return pytestconfig._remap_ab_fail_slower
