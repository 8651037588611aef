"""Host-side timing, for any subject's bench: host µs per call of a callable (no
synchronisation between calls), and the sweep of the default subject timed in this
process (through the sweep's API) or as a fresh process (``python -m remap_ab sweep -j 0``:
its wall time includes the interpreter start and every import), with its phase split
from the run's run.json.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from remap_ab.errors import RemapABError
from remap_ab.sweep.run import Sweep, SweepOptions
from remap_ab.sweep.summary import format_summary


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def host_us_per_call(fn: Callable[[], object], calls: int, device: str, warmup: int = 20, repeats: int = 3) -> list:
    """Host µs per call of ``fn`` over ``calls`` calls with no synchronisation between
    them, for each of ``repeats`` rounds (the device is synchronised between rounds)."""
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        end = time.perf_counter()
        sync(device)
        out.append((end - start) / calls * 1e6)
    return out


def _read_session(run_dir: Path) -> dict:
    try:
        meta = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    session = meta.get("last_session") or {}
    return {
        "cases": session.get("cases"),
        "phase_seconds": session.get("phase_seconds") or meta.get("phase_seconds") or {},
        "sweep_wall_s": session.get("wall_seconds", meta.get("wall_seconds")),
    }


def sweep_in_process(root: Path, name: str, filters: Sequence[str] = ()) -> dict:
    """``remap-ab sweep -j 0`` in this process, through the sweep's own API (not the
    command line: the bench sits below it); its printout is kept, not shown."""

    opts = SweepOptions(filters=tuple(filters), workers=0, root=str(root), run=name, progress=False)
    start = time.perf_counter()
    rc: int
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            sweep = Sweep(opts)
            sweep.prepare()
            summary = sweep.run()
            print(format_summary(summary))
            rc = 0 if summary["passed"] else 1
        except RemapABError as exc:  # a refused filter, say: a result to report, not the end of the bench
            print(f"remap-ab sweep: error: {exc}")
            rc = exc.exit_code
    wall = time.perf_counter() - start
    return {"how": "in-process (-j 0)", "rc": rc, "wall_s": wall, **_read_session(root / name),
            "printout_tail": buffer.getvalue()[-600:]}


def sweep_subprocess(root: Path, name: str, filters: Sequence[str] = (), timeout_s: float = 300.0) -> dict:
    """The same sweep as a fresh process: wall time from exec to exit (imports included)."""
    cmd = [sys.executable, "-m", "remap_ab", "sweep", "-j", "0", "--root", str(root), "--run", name, "--no-progress"]
    for f in filters:
        cmd += ["--filter", f]
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # this checkout, so the child runs the same code
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-600:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"killed after {timeout_s:.0f} s"
    wall = time.perf_counter() - start
    return {"how": "fresh process (python -m remap_ab sweep -j 0)", "rc": rc, "wall_s": wall, **_read_session(root / name),
            "printout_tail": tail}


def phase_row(label: str, result: dict) -> dict:
    ph = result.get("phase_seconds") or {}
    return {
        "run": label, "how": result.get("how"), "rc": result.get("rc"), "cases": result.get("cases"),
        "gen_s": ph.get("gen"), "kernels_s": ph.get("kernels"), "compare_s": ph.get("compare"), "write_s": ph.get("write"),
        "phases_sum_s": sum(v for v in ph.values() if isinstance(v, (int, float))) if ph else None,
        "sweep_wall_s": result.get("sweep_wall_s"), "wall_s": result.get("wall_s"),
    }
