"""A pytest plugin for ``remap-ab mutants``: records, as JSON lines in the file named
by ``$REMAP_AB_MUTANT_PROBE``, every Hypothesis example (test, status, phase) and every
test outcome, so the mutant runner can say which property killed a mutant and after
how many examples. Loaded only on request (``-p remap_ab.mutants.probe``); inert when
the variable is unset.

Examples come from Hypothesis's observability callbacks (one observation per test
case), with line-coverage collection switched off.

With ``$REMAP_AB_MUTANT_NO_SHRINK=1`` the active profile loses its shrink phase: a
mutant is killed at its first failing example, and shrinking that example to a minimal
one (which can take longer than finding it) tells the kill matrix nothing. The
examples generated, and so the kill, are the same with or without it (the ci profile
is derandomized).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Optional, TypedDict

_path = os.environ.get("REMAP_AB_MUTANT_PROBE")
_lock = threading.Lock()


class _State(TypedDict):
    nodeid: Optional[str]  # the test running now
    seq: int  # records written so far


_state: _State = {"nodeid": None, "seq": 0}


def _write(record: dict) -> None:
    if not _path:
        return
    with _lock:
        _state["seq"] += 1
        record["seq"] = _state["seq"]
        with open(_path, "a") as f:
            f.write(json.dumps(record) + "\n")


def _observe(obs) -> None:
    if getattr(obs, "type", None) != "test_case":
        return
    _write(
        {
            "kind": "example",
            "nodeid": _state["nodeid"],
            "property": getattr(obs, "property", ""),
            "status": getattr(obs, "status", ""),
            "how": getattr(obs, "how_generated", ""),
            "reason": str(getattr(obs, "status_reason", ""))[:200],
        }
    )


def pytest_configure(config):
    if not _path:
        return
    try:
        from hypothesis.internal import observability
        from hypothesis.internal.observability import add_observability_callback
    except ImportError:  # an older Hypothesis: outcomes only, no example counts
        return
    # Observations without line coverage: tracing every line would slow the
    # interpreter-run kernels many times over. (The environment variable that does
    # this also turns on writing observations under .hypothesis/, which we do not want.)
    if hasattr(observability, "OBSERVABILITY_COLLECT_COVERAGE"):
        observability.OBSERVABILITY_COLLECT_COVERAGE = False
    add_observability_callback(_observe)


def pytest_runtest_logstart(nodeid, location):
    _state["nodeid"] = nodeid
    _write({"kind": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = (crash.message if crash is not None else str(report.longrepr)).strip().splitlines()
            message = " ".join(message[:3])[:400]
        _write(
            {
                "kind": "test",
                "nodeid": report.nodeid,
                "outcome": report.outcome,
                "duration": report.duration,
                "message": message,
            }
        )


def pytest_sessionstart(session):
    # After every pytest_configure (remap-ab's plugin loads the profile there), before
    # collection (the property tests read the profile when they are decorated).
    if os.environ.get("REMAP_AB_MUTANT_NO_SHRINK") != "1":
        return
    from hypothesis import Phase, settings

    name = os.environ.get("REMAP_AB_PROFILE", "ci")
    try:
        base = settings.get_profile(name)
    except Exception:
        return
    phases = tuple(p for p in base.phases if p is not Phase.shrink)
    settings.register_profile(name, parent=base, phases=phases)
    settings.load_profile(name)
