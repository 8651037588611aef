"""remap-ab's pytest plugin (registered through the ``pytest11`` entry point).

Loading it imports ``remap_ab`` first thing, which turns the Triton interpreter on
when there is no GPU — before any test module can import triton — in the main
process and in every xdist worker.

Options (each also settable by environment variable, for subprocesses):
  --remap-a / REMAP_AB_A        implementation A of the A/B properties (default old)
  --remap-b / REMAP_AB_B        implementation B (default new)
"""

from __future__ import annotations

import os

import pytest

import remap_ab  # noqa: F401  (chooses the backend before triton is imported)


def pytest_addoption(parser):
    group = parser.getgroup("remap-ab")
    group.addoption("--remap-a", default=os.environ.get("REMAP_AB_A", "old"), help="implementation A (default old)")
    group.addoption("--remap-b", default=os.environ.get("REMAP_AB_B", "new"), help="implementation B (default new)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")


def pytest_collection_modifyitems(config, items):
    from remap_ab import backend

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
