"""A sweep's run folder, ``<root>/<run>/``: what was asked, what was done, who holds it.

  run.json      what was asked (implementations, device, filters, token cap, selection)
  results.csv   one row per finished case, appended and flushed as each case finishes
  run.lock      held (flock) by the one process running the sweep in this folder
  summary.json  verdict counts and phase timings, written at the end
  <case-id>/    a report (report.py) for every case that did not pass

The results table stays CSV: one flushed line per case survives a kill (at worst one
half-written last line, which has no newline and is ignored), resumes by appending,
diffs against another run's table line by line, and pandas reads it.

Every check of a folder before resuming it is made before anything in it is written:
a refusal leaves the folder byte-identical.
"""

from __future__ import annotations

import datetime
import fcntl
import io
import json
import os
import re
import socket
from pathlib import Path
from typing import Optional

from remap_ab import command_line
from remap_ab.errors import InternalError, ReportError, UsageError
from remap_ab.options import MAX_SIZE
from remap_ab.status import Status

RUN_FORMAT = 2
# run.json keeps the size cap under its option's name (schema.run_meta).
SIZE_KEY = MAX_SIZE.flag.removeprefix("--").replace("-", "_")
# The columns every run's results.csv holds beside the subject's own (Subject.columns,
# which places them; ``result_columns`` appends any it leaves out).
SWEEP_COLUMNS = ("worker", "gpu")


def result_columns(axis_names: list[str], subject_columns) -> list[str]:
    """results.csv's header: the row's place and ID, the grid's labels, the subject's columns."""
    own = list(subject_columns)
    return ["index", "case_id", *axis_names, *own, *(c for c in SWEEP_COLUMNS if c not in own)]


def new_run_name(a: str, b: str, device: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")

    def safe(s: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[-40:]

    return f"{stamp}-{safe(a)}-vs-{safe(b)}-{device}"


def find_run(root, run: Optional[str]) -> Path:
    """A run folder by path, by name under ``root``, or the newest ("latest"/None)."""
    if run and Path(run).is_dir() and (Path(run) / "run.json").exists():
        return Path(run)
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"--root {root}: is a file, not a folder; give the folder holding the runs")
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


def resume_command(folder: Path) -> str:
    folder = Path(folder)
    return command_line.line("sweep", options=[("--resume", None), ("--run", folder.name), ("--root", str(folder.parent))])


# ------------------------------------------------------------------ run.json


def read_run_json(folder: Path) -> dict:
    """run.json, every known field checked: ReportError naming the file and the field."""
    path = Path(folder) / "run.json"
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{folder} is not a sweep run folder (run.json is missing)") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ReportError(f"{path} is corrupt (not JSON)") from None
    except OSError as exc:
        raise ReportError(f"{path} cannot be read ({exc.strerror})") from None
    from remap_ab import schema  # pydantic is loaded only when a file is read

    # Every known field (schema.run_meta); fields added by later versions are kept.
    schema.load(schema.run_meta(SIZE_KEY), meta, where=str(path), error=ReportError, remedy="; the run folder is corrupt")
    return meta


def write_run_json(folder: Path, meta: dict) -> None:
    """Written aside and renamed: a kill never leaves half a run.json."""
    path = Path(folder) / "run.json"
    tmp = path.with_name(f".run.json.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------ lock


class RunLock:
    """One process at a time in a run folder. An flock, not a pid file: the kernel
    drops it when its holder dies however it dies, so a lock left by a dead process
    never blocks, and a recycled pid can never look like a live holder."""

    NAME = "run.lock"

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / self.NAME
        self._fh: Optional[io.TextIOWrapper] = None

    def acquire(self) -> RunLock:
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            raise UsageError(
                f"run folder {self.folder} is in use by another remap-ab process ({holder or 'holder unknown'}); "
                "wait for it to finish (or stop it), then resume"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()} since "
                 f"{datetime.datetime.now().isoformat(timespec='seconds')}\n")
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing drops the flock; the file stays, harmless
            self._fh = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    @classmethod
    def holder(cls, folder: Path) -> Optional[str]:
        """Who holds the lock now (its line), or None if nobody does."""
        path = Path(folder) / cls.NAME
        try:
            fh = open(path)
        except OSError:
            return None
        with fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return fh.read().strip() or "holder unknown"
            return None


# ------------------------------------------------------------------ results table


def results_path(folder: Path) -> Path:
    return Path(folder) / "results.csv"


def complete_bytes(data: bytes) -> tuple[bytes, int]:
    """The table up to its last newline, and how many bytes after it were cut (a row
    half-written when the sweep was killed is not a case)."""
    if not data or data.endswith(b"\n"):
        return data, 0
    cut = data.rfind(b"\n") + 1
    return data[:cut], len(data) - cut


def read_results(folder: Path, columns: Optional[list] = None):
    """The results table (pandas, every cell a string), complete rows only; ReportError
    if it is missing or unreadable. ``df.attrs['partial_bytes']`` counts what was cut."""
    import pandas as pd

    path = results_path(folder)
    if not path.is_file():
        raise ReportError(f"{folder}: results.csv is missing (the run never finished a case?)")
    data, cut = complete_bytes(path.read_bytes())
    try:
        df = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)  # labels stay as written
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(columns=list(columns or ["case_id", "status"]))
    except Exception as exc:
        raise ReportError(f"{path} cannot be read as CSV ({type(exc).__name__}); it is corrupt") from None
    need = set(columns or ["case_id", "status"])
    if not need <= set(df.columns):
        raise ReportError(f"{path} is not a results table (missing {', '.join(sorted(need - set(df.columns)))})")
    df.attrs["partial_bytes"] = cut
    return df


def check_resumable(folder: Path, meta: dict, columns: list[str], case_ids: list[str], selection: str,
                    grid_version) -> set:
    """The case IDs already done, after checking that the run folder was written for
    exactly this selection and table layout. Reads only: a refusal (ReportError)
    leaves every file as it was."""
    where = Path(folder) / "run.json"
    if meta.get("grid_version", grid_version) != grid_version:
        raise ReportError(f"{where}: written with grid version {meta['grid_version']}, the grid is now version "
                          f"{grid_version}; start a new run")
    if meta["selected"] != len(case_ids) or meta.get("selection", selection) != selection:
        raise ReportError(f"{where}: the run selected {meta['selected']} cases, its settings now select "
                          f"{len(case_ids)} others (grid or selection changed); start a new run")
    path = results_path(folder)
    if not path.exists() or path.stat().st_size == 0:
        return set()
    data, _ = complete_bytes(path.read_bytes())
    header = data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
    if header != ",".join(columns):
        raise ReportError(f"{path}: its columns are not this version's results table "
                          f"({len(header.split(','))} columns, expected {len(columns)}); start a new run")
    df = read_results(folder, ["case_id"])
    done = set(df["case_id"].astype(str))
    stray = done - set(case_ids)
    if stray:
        raise ReportError(f"{path}: {len(stray)} row(s) are cases this run does not select (e.g. {sorted(stray)[0]}); "
                          "the table belongs to another selection or grid; start a new run")
    return done


class ResultsWriter:
    """Appends rows to results.csv, one flushed line per row. A row with a field the
    table has no column for is refused (InternalError), never dropped: a misspelt key
    would otherwise lose a verdict's detail without a word."""

    def __init__(self, folder: Path, columns: list[str]):
        import csv

        path = results_path(folder)
        if path.exists():
            data = path.read_bytes()
            kept, cut = complete_bytes(data)
            if cut:  # drop the half-written row so the next one starts on its own line
                with open(path, "r+b") as fh:
                    fh.truncate(len(kept))
        new_file = not path.exists() or path.stat().st_size == 0
        self._fh = open(path, "a", newline="")
        self._columns = set(columns)
        self._writer = csv.DictWriter(self._fh, fieldnames=columns)
        if new_file:
            self._writer.writeheader()
            self._fh.flush()

    def write(self, rows: list[dict]) -> None:
        for r in rows:
            unknown = set(r) - self._columns
            if unknown:
                raise InternalError(f"a results row has field(s) {', '.join(sorted(unknown))} that results.csv has no "
                                    f"column for (case {r.get('case_id', '?')}): the subject's rows and its columns disagree")
        for r in rows:
            self._writer.writerow({k: (v.value if isinstance(v, Status) else v) for k, v in r.items()})
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def selection_fingerprint(points: list) -> str:
    """A short hash of the selected case IDs, in order: a resumed run must select
    exactly the cases its results table was written for."""
    import hashlib

    return hashlib.sha256("\n".join(p.case_id for p in points).encode()).hexdigest()[:16]
