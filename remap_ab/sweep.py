"""The sweep: every configuration of the grid (grid.toml) through A, B and the oracle.

A run lives in one folder, ``<root>/<run>/`` (root defaults to ``reports``):

  run.json      what was asked (implementations, device, filters, token cap, workers)
  results.csv   one row per case, appended as each case (on a GPU: each batch) finishes
  summary.json  verdict counts and phase timings, written at the end
  <case-id>/    a report (report.py) for every case that did not pass

Cases run in worker *processes* (spawned, never threads: the Triton interpreter is not
thread-safe), one per GPU by default, each pinned to its GPU before CUDA starts
(gpus.py). A worker that dies (SIGSEGV, a sticky CUDA error) takes no result with it:
its batch is re-run one case at a time, and a case that kills a worker on its own gets
the verdict "crash" and a crash report. ``-j 0`` runs in this process instead (no
isolation; the fastest start-up).

On the CPU (Triton interpreter, ~10 ms per program) the default keeps the grid's
points with at most CPU_MAX_TOKENS token rows, so the default CPU sweep stays within a
few minutes on 2 cores; ``--max-tokens`` changes the cap (``--max-tokens 1024`` runs
everything) and the summary names what was left out.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import multiprocessing as mp
import os
import queue
import re
import signal
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from remap_ab import gpus, grid as gridmod
from remap_ab.errors import ConfigError, ReportError, exception_line

CPU_MAX_TOKENS = 3
GPU_BATCH = 64
STATUSES = ("pass", "fail", "error", "crash")
RESULT_FIELDS = (
    "status", "check", "first_mismatch", "mismatch_lanes", "mismatch_rows", "order_differs",
    "order_differs_rows", "a_ms", "b_ms", "inputs_sha256", "worker", "gpu", "report",
)


def result_columns(g: gridmod.Grid) -> list[str]:
    return ["index", "case_id", *[a.name for a in g.axes], *RESULT_FIELDS]


@dataclass
class SweepOptions:
    a: str = "old"
    b: str = "new"
    device: str = "auto"
    filters: list = field(default_factory=list)
    max_tokens: Optional[int] = None  # None: the device's default
    workers: Optional[int] = None  # None: one per GPU / per CPU core; 0: in-process
    batch: Optional[int] = None
    root: str = "reports"
    run: Optional[str] = None
    resume: bool = False
    grid_file: Optional[str] = None
    progress: bool = True


# ------------------------------------------------------------------ selection


def default_max_tokens(device: str) -> Optional[int]:
    return CPU_MAX_TOKENS if device == "cpu" else None


def select(g: gridmod.Grid, filters: list, max_tokens: Optional[int]) -> list:
    parsed = gridmod.parse_filters(g, filters)
    points = g.select(parsed, max_tokens=max_tokens)
    if not points:
        raise ConfigError(
            "the filters select no configuration"
            + (f" with tokens <= {max_tokens} (raise --max-tokens)" if max_tokens is not None else "")
        )
    return points


def cap_note(g: gridmod.Grid, filters: list, max_tokens: Optional[int], device: str) -> str:
    """One sentence on what the token cap left out ('' when nothing)."""
    if max_tokens is None:
        return ""
    everything = g.select(gridmod.parse_filters(g, filters))
    left = [p for p in everything if p.config.tokens > max_tokens]
    if not left:
        return ""
    tok = sorted({p.config.tokens for p in left})
    why = "CPU default" if device == "cpu" else "--max-tokens"
    return (
        f"{why}: tokens <= {max_tokens}; {len(left)} of {len(everything)} selected configurations "
        f"(tokens {', '.join(map(str, tok))}) not run — --max-tokens {max(tok)} runs them"
    )


# ------------------------------------------------------------------ run folder


def _run_name(a: str, b: str, device: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[-40:]
    return f"{stamp}-{safe(a)}-vs-{safe(b)}-{device}"


def find_run(root, run: Optional[str]) -> Path:
    """A run folder by path, by name under ``root``, or the newest ("latest"/None)."""
    if run and Path(run).is_dir() and (Path(run) / "run.json").exists():
        return Path(run)
    root = Path(root)
    if run and run != "latest":
        folder = root / run
        if not folder.is_dir():
            raise ReportError(f"no run {run!r} (looked for {run} and {folder})")
        if not (folder / "run.json").is_file():
            raise ReportError(f"{folder} is not a sweep run folder (run.json is missing)")
        return folder
    runs = [p for p in root.glob("*/run.json")] if root.is_dir() else []
    if not runs:
        raise ReportError(f"no sweep run under {root}/")
    return max(runs, key=lambda p: p.stat().st_mtime).parent


def read_run_json(folder: Path) -> dict:
    try:
        return json.loads((folder / "run.json").read_text())
    except FileNotFoundError:
        raise ReportError(f"{folder} is not a sweep run folder (run.json is missing)") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ReportError(f"{folder}/run.json is corrupt") from None


def _repair_csv(path: Path) -> None:
    """Drop a last line cut short by a kill, so appending continues cleanly."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        with open(path, "r+b") as fh:
            fh.truncate(cut + 1 if cut >= 0 else 0)


def read_results(folder: Path, columns: Optional[list] = None):
    """The results table (pandas), one row per case; ReportError if unreadable."""
    import pandas as pd

    path = Path(folder) / "results.csv"
    if not path.is_file():
        raise ReportError(f"{folder}: results.csv is missing (the run never finished a case?)")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)  # labels stay as written
    except Exception as exc:
        raise ReportError(f"{path} cannot be read as CSV ({type(exc).__name__}); it is corrupt") from None
    need = set(columns or ["case_id", "status"])
    if not need <= set(df.columns):
        raise ReportError(f"{path} is not a results table (missing {', '.join(sorted(need - set(df.columns)))})")
    return df


# ------------------------------------------------------------------ progress


class Progress:
    """One status line on stderr: bar, count, rate, ETA, verdict counts."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total = total
        self.done = 0
        self.counts: Counter = Counter()
        self.start = time.perf_counter()
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0
        self._last_line_pct = -1

    def update(self, statuses) -> None:
        now = time.perf_counter()
        if self.done == 0:
            self.first = (now, len(statuses))  # start-up (imports, workers) ends here
        for s in statuses:
            self.done += 1
            self.counts[s] += 1
        self.draw()

    def rate(self) -> float:
        """Cases per second since the first result (start-up excluded)."""
        now = time.perf_counter()
        first = getattr(self, "first", None)
        if first is None:
            return 0.0
        if now - first[0] < 1e-3 or self.done <= first[1]:
            return self.done / max(now - self.start, 1e-9)
        return (self.done - first[1]) / (now - first[0])

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        rate = self.rate()
        left = self.total - self.done
        eta = _fmt_s(left / rate) if rate > 0 else "?"
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        verdicts = " ".join(f"{s} {self.counts[s]}" for s in STATUSES if self.counts[s])
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{rate:.1f} cases/s, elapsed {_fmt_s(elapsed)}, ETA {eta}  {verdicts}"
        )

    def draw(self, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            if final or now - self._last > 0.1:
                self.stream.write("\r" + self.line() + "\x1b[K" + ("\n" if final else ""))
                self.stream.flush()
                self._last = now
        else:
            pct = int(10 * self.done / self.total) if self.total else 10
            if (final and pct != self._last_line_pct) or pct > self._last_line_pct:
                self._last_line_pct = pct
                self.stream.write(self.line() + "\n")
                self.stream.flush()


def _fmt_s(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s}s"


# ------------------------------------------------------------------ workers


def _outcome_row(o) -> dict:
    v = o.verdict
    first = v.first
    return {
        "case_id": o.config.case_id,
        "status": v.status,
        "check": first.check if first else "",
        "first_mismatch": first.line() if first else "",
        "mismatch_lanes": v.mismatch_lanes,
        "mismatch_rows": v.mismatch_rows,
        "order_differs": bool(v.order_differs),
        "order_differs_rows": v.order_differs_rows,
        "a_ms": "" if o.a_ms is None else round(o.a_ms, 4),
        "b_ms": "" if o.b_ms is None else round(o.b_ms, 4),
        "inputs_sha256": o.inputs_sha256,
        "report": o.report,
    }


def _gpu_label(device: str) -> str:
    """The results table's ``gpu`` column for this process: its CUDA_VISIBLE_DEVICES."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "") if device == "cuda" else ""


def _worker_main(wid: int, device: str, a: str, b: str, run_dir: str, task_q, result_q) -> None:
    """A worker process: its CUDA_VISIBLE_DEVICES was set by the parent at spawn."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    from remap_ab import backend
    from remap_ab.batch import BatchTimes, run_batch
    from remap_ab.config import CaseConfig

    backend.select(device)
    result_q.put(("ready", wid, _gpu_label(device)))
    parent = mp.parent_process()
    while True:
        try:
            task = task_q.get(timeout=1.0)
        except queue.Empty:
            # The sweep was killed (SIGKILL leaves no goodbye): do not linger.
            if parent is not None and not parent.is_alive():
                os._exit(0)
            continue
        if task is None:
            return
        batch_id, items = task
        times = BatchTimes()
        try:
            outcomes = run_batch([CaseConfig.from_dict(d) for d in items], a, b, device, run_dir, times)
            rows = [_outcome_row(o) for o in outcomes]
        except BaseException as exc:  # the context may be unusable (sticky CUDA error)
            result_q.put(("failed", wid, batch_id, exception_line(exc)[:400]))
            time.sleep(0.2)
            os._exit(3)
        result_q.put(("done", wid, batch_id, rows, times.seconds))


@dataclass
class _Worker:
    wid: int
    env: dict
    proc: object = None
    task_q: object = None
    batch: Optional[int] = None
    ready: bool = False
    restarts: int = 0
    gpu: str = ""  # what the worker reported when ready
    last_error: Optional[str] = None  # its last "failed" message, for the crash row


def _start_worker(ctx, w: _Worker, device, a, b, run_dir, result_q) -> None:
    w.task_q = ctx.Queue()
    saved = {k: os.environ.get(k) for k in w.env}
    os.environ.update(w.env)  # the child inherits this environment at spawn
    try:
        w.proc = ctx.Process(
            target=_worker_main, args=(w.wid, device, a, b, run_dir, w.task_q, result_q), daemon=True,
            name=f"remap-ab-worker-{w.wid}",
        )
        w.proc.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    w.batch = None
    w.ready = False


def _describe_exit(code) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"


# ------------------------------------------------------------------ the sweep


class Sweep:
    def __init__(self, opts: SweepOptions):
        self.opts = opts
        self.grid = gridmod.load(opts.grid_file)
        self.phases = {"gen": 0.0, "kernels": 0.0, "compare": 0.0, "write": 0.0}
        self.startup = None  # seconds until every worker had imported and started

    # -- setup
    def prepare(self):
        from remap_ab import backend, registry

        o = self.opts
        if o.resume:
            self.folder = find_run(o.root, o.run)
            meta = read_run_json(self.folder)
            try:
                meta["a"], meta["b"], meta["device"], meta["filters"], meta["max_tokens"]
            except KeyError as exc:
                raise ReportError(f"{self.folder}/run.json lacks {exc}; cannot resume it") from None
            o.a, o.b, o.filters, o.max_tokens = meta["a"], meta["b"], meta["filters"], meta["max_tokens"]
            o.device = meta["device"]
            if meta.get("grid_file"):
                o.grid_file = meta["grid_file"]
                self.grid = gridmod.load(o.grid_file)
        # Fixes the backend (TRITON_INTERPRET) before any kernel is imported.
        self.device = backend.select(o.device)
        if not o.resume and o.max_tokens is None:
            o.max_tokens = default_max_tokens(self.device)
        self.points = select(self.grid, o.filters, o.max_tokens)
        self.note = cap_note(self.grid, o.filters, o.max_tokens, self.device)
        self.columns = result_columns(self.grid)

        # Implementations must import before any worker starts (one clear error, once).
        registry.get(o.a)
        registry.get(o.b)

        self.gpu_list = gpus.visible_gpus(os.environ, gpus.count_gpus()) if self.device == "cuda" else []
        if o.workers is None:
            if self.device == "cuda":
                o.workers = max(1, len(self.gpu_list))
            else:
                o.workers = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        if o.workers < 0:
            raise ConfigError(f"-j {o.workers}: use 0 (in this process) or a positive number of worker processes")
        o.workers = min(o.workers, len(self.points)) if o.workers else 0
        if o.batch is None:
            o.batch = GPU_BATCH if self.device == "cuda" else 1
        if o.batch < 1:
            raise ConfigError(f"--batch {o.batch} must be at least 1")

        if not o.resume:
            name = o.run or _run_name(o.a, o.b, self.device)
            self.folder = Path(o.root) / name
            if self.folder.exists() and any(self.folder.iterdir()):
                raise ConfigError(f"run folder {self.folder} already exists; use --resume --run {name} or another --run")
            self.folder.mkdir(parents=True, exist_ok=True)
            meta = {
                "format": 1,
                "run": name,
                "a": o.a,
                "b": o.b,
                "device": self.device,
                "filters": list(o.filters),
                "max_tokens": o.max_tokens,
                "grid_file": o.grid_file,
                "grid_version": self.grid.version,
                "grid_total": len(self.grid.points()),
                "selected": len(self.points),
                "cap_note": self.note,
                "created": datetime.datetime.now().isoformat(timespec="seconds"),
                "command": " ".join(sys.argv),
                "phase_seconds": {},
                "wall_seconds": 0.0,
            }
            (self.folder / "run.json").write_text(json.dumps(meta, indent=2) + "\n")

        csv_path = self.folder / "results.csv"
        done: set = set()
        if csv_path.exists():
            _repair_csv(csv_path)
            if csv_path.stat().st_size:
                done = set(read_results(self.folder)["case_id"].astype(str))
        self.todo = [p for p in self.points if p.case_id not in done]
        self.already = len(self.points) - len(self.todo)
        new_file = not csv_path.exists() or csv_path.stat().st_size == 0
        self.csv = open(csv_path, "a", newline="")
        self.writer = csv.DictWriter(self.csv, fieldnames=self.columns, extrasaction="ignore")
        if new_file:
            self.writer.writeheader()
            self.csv.flush()
        self.by_id = {p.case_id: p for p in self.points}

    # -- recording
    def record(self, rows: list, worker: int, gpu: str) -> None:
        for r in rows:
            p = self.by_id[r["case_id"]]
            full = {"index": p.index, "case_id": p.case_id, **dict(p.labels), **r, "worker": worker, "gpu": gpu}
            self.writer.writerow(full)
        self.csv.flush()
        self.last_result_at = time.perf_counter()
        self.progress.update([r["status"] for r in rows])

    def crash_row(self, point, message: str, worker: int, gpu: str) -> dict:
        from remap_ab.report import write_crash_report

        try:
            path = write_crash_report(point.config, self.opts.a, self.opts.b, message, self.folder, self.device)
            rep = path.name
        except Exception:  # the crash row matters more than its report
            rep = ""
        return {
            "case_id": point.case_id, "status": "crash", "check": "crash", "first_mismatch": f"[crash] {message}",
            "mismatch_lanes": 0, "mismatch_rows": 0, "order_differs": False, "order_differs_rows": 0,
            "a_ms": "", "b_ms": "", "inputs_sha256": "", "report": rep,
        }

    # -- running
    def run(self) -> dict:
        self.progress = Progress(len(self.todo), self.opts.progress)
        self.wall0 = time.perf_counter()
        try:
            if self.todo:
                if self.opts.workers == 0:
                    self._run_inline()
                else:
                    self._run_workers()
        finally:
            self.csv.close()
            self.progress.draw(final=True)
        # Wall time up to the last result (worker shutdown excluded; it loses nothing).
        wall = getattr(self, "last_result_at", time.perf_counter()) - self.wall0
        meta = read_run_json(self.folder)
        acc = meta.get("phase_seconds") or {}
        for k, v in self.phases.items():
            acc[k] = acc.get(k, 0.0) + v
        meta["phase_seconds"] = acc
        meta["wall_seconds"] = meta.get("wall_seconds", 0.0) + wall
        meta["last_session"] = {
            "cases": len(self.todo), "wall_seconds": wall, "phase_seconds": self.phases,
            "workers": self.opts.workers, "batch": self.opts.batch, "gpus": self.gpu_list,
            "startup_seconds": self.startup,
        }
        (self.folder / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
        summary = summarise(self.folder, self.grid)
        (self.folder / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return summary

    def _batches(self) -> deque:
        pts = self.todo
        size = self.opts.batch
        return deque(pts[i : i + size] for i in range(0, len(pts), size))

    def _run_inline(self) -> None:
        from remap_ab.batch import BatchTimes, run_batch

        pending = self._batches()
        while pending:
            batch = pending.popleft()
            times = BatchTimes()
            try:
                outcomes = run_batch([p.config for p in batch], self.opts.a, self.opts.b, self.device, self.folder, times)
            except Exception as exc:
                if len(batch) > 1:
                    pending.extendleft(reversed([[p] for p in batch]))
                    continue
                self.record([self.crash_row(batch[0], exception_line(exc)[:400], 0, "")], 0, "")
                continue
            for k, v in times.seconds.items():
                self.phases[k] += v
            self.record([_outcome_row(o) for o in outcomes], 0, _gpu_label(self.device))

    def _run_workers(self) -> None:
        ctx = mp.get_context("spawn")
        result_q = ctx.Queue()
        envs = gpus.worker_environments(self.opts.workers, self.device, self.gpu_list)
        workers = [_Worker(i, env) for i, env in enumerate(envs)]
        pending = self._batches()
        inflight: dict = {}  # batch id -> list of points
        next_id = 0
        try:
            for w in workers:
                _start_worker(ctx, w, self.device, self.opts.a, self.opts.b, str(self.folder), result_q)
            while pending or inflight:
                for w in workers:
                    if w.ready and w.batch is None and pending:
                        batch = pending.popleft()
                        inflight[next_id] = batch
                        w.batch = next_id
                        w.task_q.put((next_id, [p.config.to_dict() for p in batch]))
                        next_id += 1
                try:
                    msg = result_q.get(timeout=0.25)
                except queue.Empty:
                    msg = None
                if msg is not None:
                    kind, wid = msg[0], msg[1]
                    w = workers[wid]
                    if kind == "ready":
                        w.ready = True
                        w.gpu = msg[2]
                        if self.startup is None and all(x.ready for x in workers):
                            self.startup = time.perf_counter() - self.wall0
                    elif kind == "done":
                        _, _, bid, rows, secs = msg
                        inflight.pop(bid, None)
                        w.batch = None
                        for k, v in secs.items():
                            self.phases[k] = self.phases.get(k, 0.0) + v
                        self.record(rows, wid, w.gpu)
                    elif kind == "failed":
                        _, _, bid, message = msg
                        w.last_error = message
                    continue
                # Nothing arrived: check for dead workers.
                for w in workers:
                    if w.proc.exitcode is None:
                        continue
                    message = w.last_error or _describe_exit(w.proc.exitcode)
                    w.last_error = None
                    bid = w.batch
                    if bid is None and not w.ready:
                        w.restarts += 1
                        if w.restarts > 3:
                            raise ConfigError(f"worker {w.wid} keeps dying before its first case ({message})")
                    if bid is not None:
                        batch = inflight.pop(bid)
                        if len(batch) > 1:
                            pending.extendleft(reversed([[p] for p in batch]))
                        else:
                            self.record([self.crash_row(batch[0], message, w.wid, w.gpu)], w.wid, w.gpu)
                    _start_worker(ctx, w, self.device, self.opts.a, self.opts.b, str(self.folder), result_q)
        finally:
            for w in workers:
                if w.proc is not None and w.proc.exitcode is None:
                    try:
                        w.task_q.put(None)
                    except Exception:
                        pass
            # Workers hold no state worth a slow interpreter teardown: give them a
            # moment to leave on their own, then stop the ones still there.
            deadline = time.time() + 1.0
            for w in workers:
                if w.proc is not None:
                    w.proc.join(timeout=max(0.05, deadline - time.time()))
            for w in workers:
                if w.proc is not None and w.proc.exitcode is None:
                    w.proc.terminate()
                    w.proc.join(timeout=2)


# ------------------------------------------------------------------ summary


def summarise(folder: Path, g: Optional[gridmod.Grid] = None) -> dict:
    """Verdict counts, failures per dimension value, timings: from the run folder."""
    import pandas as pd

    meta = read_run_json(folder)
    g = g or gridmod.load(meta.get("grid_file"))
    df = read_results(folder)
    dupes = int(df["case_id"].duplicated().sum())
    counts = {s: int((df["status"] == s).sum()) for s in STATUSES}
    other = int((~df["status"].isin(STATUSES)).sum())
    failed = df[df["status"] != "pass"]
    by_dim = {}
    for axis in g.axes:
        if axis.name not in df.columns or failed.empty:
            continue
        total = df.groupby(df[axis.name].astype(str)).size()
        bad = failed.groupby(failed[axis.name].astype(str)).size()
        by_dim[axis.name] = {str(k): [int(v), int(total[k])] for k, v in bad.items()}
    order_differs = int(df["order_differs"].astype(str).str.lower().eq("true").sum()) if "order_differs" in df else 0
    first = [
        {"case_id": r.case_id, "status": r.status, "first_mismatch": r.first_mismatch, "report": r.report}
        for r in failed.assign(_i=pd.to_numeric(failed["index"], errors="coerce")).sort_values("_i").itertuples()
    ]
    return {
        "run": meta.get("run", folder.name),
        "folder": str(folder),
        "a": meta.get("a"),
        "b": meta.get("b"),
        "device": meta.get("device"),
        "selected": meta.get("selected"),
        "grid_total": meta.get("grid_total"),
        "cases": int(len(df)),
        "duplicates": dupes,
        "missing": max(0, int(meta.get("selected") or 0) - int(df["case_id"].nunique())),
        "counts": counts,
        "unknown_status": other,
        "order_differs": order_differs,
        "cap_note": meta.get("cap_note", ""),
        "filters": meta.get("filters", []),
        "failures_by_dimension": by_dim,
        "failures": first,
        "phase_seconds": meta.get("phase_seconds", {}),
        "wall_seconds": meta.get("wall_seconds", 0.0),
        "last_session": meta.get("last_session", {}),
        "passed": counts["pass"] == len(df) and len(df) > 0 and dupes == 0,
    }


def format_summary(s: dict, show: int = 10) -> str:
    c = s["counts"]
    lines = [
        f"run {s['run']}: {s['a']} vs {s['b']} (oracle checked) on {s['device']} — {s['folder']}",
        f"  cases: {s['cases']} run of {s['selected']} selected ({s['grid_total']} in the grid)"
        + (f"; filters: {' '.join(s['filters'])}" if s["filters"] else "")
        + (f"; {s['missing']} not run yet (--resume)" if s["missing"] else ""),
    ]
    if s.get("cap_note"):
        lines.append(f"  capped: {s['cap_note']}")
    lines.append(
        "  verdicts: " + ", ".join(f"{k} {v}" for k, v in c.items())
        + (f"; compacted order differs (allowed) in {s['order_differs']} passing cases" if s["order_differs"] else "")
    )
    if s["duplicates"]:
        lines.append(f"  WARNING: {s['duplicates']} case IDs appear more than once in results.csv")
    if s["failures_by_dimension"]:
        lines.append("  failures by dimension (failed/total):")
        for axis, vals in s["failures_by_dimension"].items():
            lines.append(f"    {axis:>10}: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in vals.items()))
    sess = s.get("last_session", {})
    if not sess.get("cases"):  # e.g. a resume that found nothing left: show the totals
        sess = {"cases": s["cases"], "wall_seconds": s.get("wall_seconds", 0.0), "phase_seconds": s.get("phase_seconds", {})}
    ph = sess.get("phase_seconds") or {}
    if ph:
        wall = sess.get("wall_seconds", s.get("wall_seconds", 0.0))
        n = sess.get("cases", s["cases"])
        rate = f" ({n / wall:.1f} cases/s)" if wall else ""
        lines.append(
            f"  time: wall {wall:.2f} s for {n} cases{rate}, {sess.get('workers', '?')} worker(s), batch {sess.get('batch', '?')}; "
            + (f"worker start-up (spawn, imports, device init) {sess['startup_seconds']:.2f} s; " if sess.get("startup_seconds") else "")
            + "phases summed over workers: " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items())
        )
    if s["failures"]:
        lines.append(f"  failing cases ({len(s['failures'])}; first {min(show, len(s['failures']))}):")
        for f in s["failures"][:show]:
            rep = f"  report: {Path(s['folder']) / f['report'] / 'diff.md'}" if f["report"] else ""
            lines.append(f"    {f['case_id']} {f['status'].upper()} {f['first_mismatch']}{rep}")
    lines.append("  result: " + ("PASS — every case passed" if s["passed"] else "FAIL — not every case passed"))
    return "\n".join(lines)
