"""remap-ab as a guest: a Python process that runs the pytest plugin's grid
(``pytest.main(["-p", "remap_ab.pytest.plugin", "--remap-grid", ...])``) and then
``run_case`` is, afterwards, as it was before: ``collections.namedtuple``, the GIL
switch interval, the environment but for the interpreter switch, Triton's interpreter
executor, builder, launcher, hooks and listener, torch's deterministic switches, the
signal handlers, the Hypothesis profile; and glibc's malloc was never tuned (its
thresholds cannot be read back, so the call is watched).

Each check runs in a fresh Python process of its own, on the CPU (the Triton
interpreter, CUDA hidden) and on CUDA where there is a device. The same script with
the process marked as remap-ab's own (``tuning.tune_this_process``, what the command
line does) must show the changes: the check sees what it is there to see."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from remap_ab import runtime

REPO = Path(__file__).resolve().parents[1]

# The grid's 8 smallest convert cases (as tests/test_pytest_grid.py), old against new.
GRID = ["--remap-grid", "--remap-grid-max-tokens=1", "--remap-grid-filter=path=convert", "--remap-grid-filter=k=128"]

SCRIPT = r'''
import collections, json, os, signal, sys, warnings

OWN = sys.argv[1] == "own"
DEVICE = sys.argv[2]
REPORTS = sys.argv[3]
GRID = json.loads(sys.argv[4])

from remap_ab import runtime
from remap_ab.host import heap

runtime.choose_early()  # the interpreter switch, as loading the plugin sets it (the one change allowed)
import hypothesis
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.runtime import interpreter, jit

tuned = []
_real_keep = heap.keep_freed_memory


def keep_freed_memory():
    tuned.append("mallopt")
    return _real_keep()


heap.keep_freed_memory = keep_freed_memory


def name(obj):
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}@{id(obj):x}"


def hooks(ns, names):
    out = {}
    for n in names:
        h = getattr(ns, n, None)
        out[n] = [name(h)] + [name(c) for c in getattr(h, "calls", [])]
    return out


def snapshot():
    s = {
        "collections.namedtuple": name(collections.namedtuple),
        "sys.getswitchinterval()": sys.getswitchinterval(),
        "os.environ (but TRITON_INTERPRET)": {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
        "interpreter.GridExecutor": name(interpreter.GridExecutor),
        "interpreter.GridExecutor's attributes": {k: name(v) for k, v in vars(interpreter.GridExecutor).items()},
        # Its callables: a launch leaves its grid in data attributes, a patch is a callable.
        "interpreter.interpreter_builder's own methods": {
            k: name(v) for k, v in vars(interpreter.interpreter_builder).items() if callable(v)},
        "triton.runtime.interpreter's functions": {k: name(v) for k, v in vars(interpreter).items() if callable(v)},
        "triton.language's functions": {k: name(v) for k, v in vars(tl).items() if callable(v)},
        "JITFunction.run": name(jit.JITFunction.run),
        "knobs.runtime hooks": hooks(knobs.runtime, ("launch_enter_hook", "launch_exit_hook", "kernel_load_start_hook",
                                                     "kernel_load_end_hook", "jit_cache_hook", "jit_post_compile_hook")),
        "knobs.compilation.listener": name(getattr(knobs.compilation, "listener", None)),
        "torch deterministic": [torch.are_deterministic_algorithms_enabled(),
                                torch.is_deterministic_algorithms_warn_only_enabled(),
                                torch.utils.deterministic.fill_uninitialized_memory],
        "signal handlers": [name(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)],
        "hypothesis profile": hypothesis.settings.get_current_profile_name(),
        "glibc malloc tuned": list(tuned) + (["heap._kept"] if heap._kept else []),
    }
    if DEVICE == "cuda":
        from triton.backends.nvidia import driver

        s["nvidia driver.compile_module_from_src"] = name(getattr(driver, "compile_module_from_src", None))
        s["CudaLauncher.__init__"] = name(getattr(getattr(driver, "CudaLauncher", None), "__init__", None))
        s["torch sync debug mode"] = torch.cuda.get_sync_debug_mode()
    return s


before = snapshot()
if OWN:
    from remap_ab.host import tuning

    tuning.tune_this_process()
import pytest

status = pytest.main(["-p", "remap_ab.pytest.plugin", *GRID, f"--remap-grid-reports={REPORTS}", "-q",
                      "-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider"])
after_plugin = snapshot()

from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.runner import run_case

config = CaseConfig(mode="convert", tokens=3, topk=256, counts=True, num_reqs=2, blocks_per_req=16, block_size=16)
if DEVICE == "cpu":
    from remap_ab.interpreter.schedule import interpreter_schedule

    # memcheck and a program schedule: both hook the interpreter for the call.
    result = run_case(config, "old", "new", device="cpu", memcheck=True, schedule=lambda: interpreter_schedule("random", 3))
else:
    result = run_case(config, "old", "new", device="cuda", production=True)  # graph, stream and sync checks
after_case = snapshot()


def changed(after):
    return {k: [before[k], after[k]] for k in before if before[k] != after[k]}


print("GUEST " + json.dumps({"pytest": int(status), "passed": bool(result.verdict.passed),
                             "device": runtime.chosen(), "info": result.verdict.info,
                             "after pytest.main": changed(after_plugin), "after run_case": changed(after_case)}))
'''


def _guest(tmp_path: Path, device: str, own: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (
        "TRITON_INTERPRET", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_CURRENT_TEST",
        "REMAP_AB_GPUS", "REMAP_AB_PINNED_GPU", "REMAP_AB_REPO", "TRITON_STORE_BINARY_ONLY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the interpreter, also on a machine with a GPU
    script = tmp_path / "guest.py"
    script.write_text(SCRIPT)
    argv = [sys.executable, str(script), "own" if own else "guest", device, str(tmp_path / "reports"), json.dumps(GRID)]
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("GUEST ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-3000:]
    found = json.loads(lines[-1][len("GUEST "):])
    assert found["device"] == device
    assert found["pytest"] == 0, r.stdout[-3000:]  # the 8 grid cases ran and passed
    assert re.search(r"^8 passed\b", r.stdout, re.M), r.stdout[-3000:]
    assert found["passed"], found["info"]
    return found


DEVICES = [
    pytest.param("cpu"),
    pytest.param("cuda", marks=pytest.mark.skipif(not runtime.cuda_available(), reason="needs a CUDA device")),
]


@pytest.mark.parametrize("device", DEVICES)
def test_the_plugin_and_run_case_leave_the_process_as_they_found_it(tmp_path, device):
    found = _guest(tmp_path, device)
    assert found["after pytest.main"] == {}
    assert found["after run_case"] == {}


@pytest.mark.parametrize("device", DEVICES)
def test_the_check_sees_a_process_that_remap_ab_tunes(tmp_path, device):
    # The command line's tuning, in the same script. On the CPU the batched interpreter
    # stays installed and malloc is tuned: the changes the guest check must catch. On CUDA
    # a process of remap-ab's own keeps nothing (its tweaks there restore what they set).
    changed = _guest(tmp_path, device, own=True)["after pytest.main"]
    if device == "cpu":
        assert "BatchedGridExecutor" in changed["interpreter.GridExecutor"][1], changed
        assert changed.get("glibc malloc tuned", [None, []])[1][:1] == ["mallopt"], changed
        assert {k for k in changed if "interpreter" not in k.split("'")[0]} == {"glibc malloc tuned"}, changed
    else:
        assert changed == {}


PINNED = r'''
import json, os, sys
import pytest

status = pytest.main(["-p", "remap_ab.pytest.plugin", sys.argv[1], "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                      "-p", "no:randomly"])
print("PIN " + json.dumps([int(status)] + [os.environ.get(k) for k in
                                            ("CUDA_VISIBLE_DEVICES", "REMAP_AB_PINNED_GPU", "REMAP_AB_GPUS")]))
'''


def test_an_xdist_workers_gpu_pin_is_put_back_when_its_session_ends(tmp_path):
    # As pytest-xdist starts worker gw1 of a controller that listed GPUs 3 and 5: the plugin
    # pins it to GPU 5 at import, for the whole session, and puts the environment back after.
    (tmp_path / "test_pin.py").write_text(
        "import os\n\ndef test_pinned():\n    assert os.environ['CUDA_VISIBLE_DEVICES'] == '5'\n")
    env = {k: v for k, v in os.environ.items() if k not in (
        "TRITON_INTERPRET", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "REMAP_AB_PINNED_GPU", "CUDA_VISIBLE_DEVICES")}
    env.update({"PYTEST_XDIST_WORKER": "gw1", "REMAP_AB_GPUS": "3,5",
                "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])})
    r = subprocess.run([sys.executable, "-c", PINNED, str(tmp_path / "test_pin.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("PIN ")]
    assert lines, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads(lines[-1][4:]) == [0, None, None, "3,5"], r.stdout[-3000:]
