"""remap-ab's pytest plugin, loaded by ``tests/conftest.py`` (or ``-p remap_ab.pytest_plugin``).

It is deliberately not a ``pytest11`` entry point: it turns the Triton interpreter on
and installs Hypothesis profiles, which must not leak into other projects' test runs
in an environment where remap-ab is installed.

Loading it, first thing, pins an xdist worker to its GPU and turns the Triton
interpreter on when there is no GPU — before any test module can import triton or
start CUDA — in the main process and in every xdist worker. (``import remap_ab``
itself changes nothing: a library does not pick its caller's backend.)

Options (each also settable by environment variable, for subprocesses):
  --remap-a / REMAP_AB_A        implementation A of the A/B properties (default old)
  --remap-b / REMAP_AB_B        implementation B (default new)
  --remap-profile / REMAP_AB_PROFILE
                                the property suite's profile: ci (default), dev,
                                nightly, gpu, mutants (see remap_ab/profiles.py)
"""

from __future__ import annotations

import os

import pytest

from remap_ab import backend, gpus

gpus.xdist_pin()  # pytest -n on several GPUs: pin this worker before CUDA starts
backend.choose_early()  # the interpreter on a machine without CUDA, before triton is imported


def pytest_addoption(parser):
    group = parser.getgroup("remap-ab")
    group.addoption("--remap-a", default=os.environ.get("REMAP_AB_A", "old"), help="implementation A (default old)")
    group.addoption("--remap-b", default=os.environ.get("REMAP_AB_B", "new"), help="implementation B (default new)")
    group.addoption(
        "--remap-profile",
        default=os.environ.get("REMAP_AB_PROFILE"),
        help="property-suite profile: ci (default; derandomized), dev, nightly, gpu, mutants (ci without shrinking)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")
    if not hasattr(config, "workerinput"):
        # The controller publishes the visible GPUs before xdist starts its workers;
        # each worker pins itself to GPU (i mod G) when it imports remap_ab (gpus.py).
        from remap_ab import gpus

        gpus.export_gpu_list()
    # Load the profile before test modules are imported: their @settings and
    # strategies read it at decoration time.
    from remap_ab import profiles

    # An explicit --hypothesis-profile keeps its Hypothesis settings; ours sets the sizes.
    explicit_hypothesis_profile = bool(config.getoption("hypothesis_profile", None))
    try:
        profiles.load(config.getoption("--remap-profile"), apply_settings=not explicit_hypothesis_profile)
    except profiles.ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config):
    from remap_ab import profiles

    a, b = config.getoption("--remap-a"), config.getoption("--remap-b")
    return [f"remap-ab: A={a} B={b}; {profiles.active().describe()}"]


def pytest_collection_modifyitems(config, items):
    if backend.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def impl_names(pytestconfig) -> tuple[str, str]:
    """(A, B): the implementations the A/B tests compare."""
    return pytestconfig.getoption("--remap-a"), pytestconfig.getoption("--remap-b")
