"""A sweep's run folder, ``<root>/<run>/``: what was asked, what was done, who holds it.

  run.json      what was asked (implementations, device, filters, token cap, selection)
  results.csv   one row per finished case, appended and flushed to disk as each case
                finishes; every row is checked (``schema.ResultRow``) before a report
                or a resume reads it, and ``--resume --repair`` re-runs the rows that fail
  run.lock      held (flock) by the one process running the sweep in this folder
  summary.json  verdict counts and phase timings, written at the end
  <case-id>/    a report (report.py) for every case that did not pass

The results table stays CSV: whole lines written at once and fsynced survive a kill (at
worst one half-written last line, which has no newline and is ignored), resumes by appending,
diffs against another run's table line by line, and pandas reads it.

Every check of a folder before resuming it is made before anything in it is written:
a refusal leaves the folder byte-identical. ``--run`` is a name under ``--root``, never
a path (``checked_run_name``); run.json and summary.json are written whole
(``write_whole``: aside, fsync, rename).
"""

from __future__ import annotations

import datetime
import fcntl
import io
import json
import os
import re
import socket
import time
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


def checked_run_name(name: str, root=None) -> str:
    """``--run``'s value, the name of a folder directly under ``--root``; UsageError for
    anything else (a path, ``..``, an absolute folder, a link out of ``root``):
    everything a sweep writes lands under ``--root``."""
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name or Path(name).is_absolute():
        raise UsageError(f"--run {name!r}: a run is the name of a folder under --root, not a path; "
                         "give the folder with --root and the name alone with --run")
    if root is not None:
        folder = Path(root) / name
        if folder.exists() and not folder.resolve().is_relative_to(Path(root).resolve()):
            raise UsageError(f"--run {name!r}: {folder} leads outside --root {root} (a link to "
                             f"{folder.resolve()}); give another --run")
    return name


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


def resume_command(folder: Path, meta: Optional[dict] = None, *, repair: bool = False) -> str:
    """The line that resumes the run in ``folder`` (with ``--repair``: re-running the rows
    that fail validation too), from any working folder and any shell: the root made
    absolute, the PYTHONPATH the run recorded (run.json's ``python_path``) in front."""
    folder = Path(folder)
    if meta is None:
        try:
            meta = json.loads((folder / "run.json").read_text())
        except (OSError, ValueError):
            meta = {}
    entries = meta.get("python_path") if isinstance(meta, dict) else None
    flags = [("--resume", None), *([("--repair", None)] if repair else []), ("--run", folder.name),
             ("--root", os.path.abspath(folder.parent))]
    return command_line.line("sweep", options=flags, path_entries=entries if isinstance(entries, list) else ())


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


def write_whole(path: Path, text: str) -> None:
    """``text`` into ``path`` whole or not at all: written aside, flushed to disk and
    renamed over it, so a kill leaves the old file or the new one, never half of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_run_json(folder: Path, meta: dict) -> None:
    """Written whole (``write_whole``): a kill never leaves half a run.json."""
    write_whole(Path(folder) / "run.json", json.dumps(meta, indent=2, default=str) + "\n")


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


class RowProblem:
    """A results.csv row that is not a valid row (``ResultRow``, the right number of
    fields): its number among the rows (1: the first under the header), its case ID as
    written, and what is wrong, in words."""

    def __init__(self, row: int, case_id: str, problem: str):
        self.row, self.case_id, self.problem = row, case_id, problem

    def line(self, path: Path) -> str:
        case = f", case {self.case_id!r}" if self.case_id else ""
        return f"{path} row {self.row}{case}: {self.problem}"


def read_table(folder: Path) -> tuple[list[str], list[list[str]], int]:
    """results.csv as written: ``(header, rows, bytes cut)``, complete lines only (a row
    half-written when the sweep was killed is not a case: ``complete_bytes``); every
    cell a string. ReportError if the file is missing or no CSV."""
    import csv

    path = results_path(folder)
    if not path.is_file():
        raise ReportError(f"{folder}: results.csv is missing (the run never finished a case?)")
    data, cut = complete_bytes(path.read_bytes())
    try:
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ReportError(f"{path} cannot be read as CSV ({type(exc).__name__}); it is corrupt") from None
    if not lines:
        return [], [], cut
    return lines[0], lines[1:], cut


def row_problems(header: list[str], rows: list[list[str]], selected: Optional[set] = None) -> list[RowProblem]:
    """Every row that is not valid: the wrong number of fields, a field that breaks
    ``schema.ResultRow`` (status a verdict, index and worker numbers, a case ID), a case
    an earlier row holds already (a sweep writes each case once), or (``selected``: the
    run's case IDs) a case the run does not select."""
    from remap_ab import schema  # pydantic is loaded only when a file is read

    problems = []
    seen: dict[str, int] = {}
    at = {name: i for i, name in enumerate(header)}
    for n, row in enumerate(rows, 1):
        cid = row[at["case_id"]] if "case_id" in at and len(row) > at["case_id"] else ""
        if len(row) != len(header):
            problems.append(RowProblem(n, cid, f"has {len(row)} fields, the header {len(header)}"))
            continue
        fields = {k: row[i] for k, i in at.items() if k in schema.ResultRow.model_fields}
        try:
            schema.load(schema.ResultRow, fields, where="", error=ReportError)
        except ReportError as exc:
            problems.append(RowProblem(n, cid, str(exc).strip()))
            continue
        if selected is not None and cid not in selected:
            problems.append(RowProblem(n, "", f"is case {cid!r}, which this run does not select (a damaged row, or "
                                              "a row of another run)"))
        elif cid in seen:
            problems.append(RowProblem(n, cid, f"field 'case_id' names the case of row {seen[cid]} again"))
        else:
            seen[cid] = n
    return problems


def repair_line(folder: Path) -> str:
    """What an invalid row's error says to do."""
    return (f"repair with: {resume_command(folder, repair=True)} "
            "(re-runs the rows that fail validation, keeps the others)")


def checked_rows(folder: Path, header: list[str], rows: list[list[str]], selected: Optional[set] = None) -> None:
    """ReportError naming the file, the first invalid row and its field, and the repair
    line, if any row is not valid (``row_problems``)."""
    problems = row_problems(header, rows, selected)
    if problems:
        more = f" ({len(problems)} rows are not valid)" if len(problems) > 1 else ""
        raise ReportError(f"{problems[0].line(results_path(folder))}{more}; {repair_line(folder)}")


def read_results(folder: Path, columns: Optional[list] = None, *, validate: bool = True,
                 selected: Optional[list] = None):
    """The results table (pandas, every cell a string), complete rows only; ReportError
    if it is missing or unreadable, or (``validate``) if a row is not valid
    (``checked_rows``; ``selected``: the run's case IDs, run.json's ``case_ids``).
    ``df.attrs['partial_bytes']`` counts what was cut."""
    import pandas as pd

    path = results_path(folder)
    header, rows, cut = read_table(folder)
    need = set(columns or ["case_id", "status"])
    if not header:
        df = pd.DataFrame(columns=list(columns or ["case_id", "status"]))
    elif not need <= set(header):
        raise ReportError(f"{path} is not a results table (missing {', '.join(sorted(need - set(header)))})")
    else:
        if validate:
            checked_rows(folder, header, rows, set(selected) if selected is not None else None)
        df = pd.DataFrame([r for r in rows if len(r) == len(header)], columns=header, dtype=str)
    df.attrs["partial_bytes"] = cut
    return df


def check_resumable(folder: Path, meta: dict, columns: list[str], case_ids: list[str], selection: str,
                    grid_version, *, repair: bool = False) -> tuple[set, list[RowProblem]]:
    """The case IDs already done, after checking that the run folder was written for
    exactly this selection and table layout and that every row is valid; with
    ``repair``, the rows that are not (rows of no selected case among them: the
    selection's fingerprint matched, so they are damaged ones) are returned instead,
    to be dropped (``drop_rows``) and re-run. Reads only: a refusal (ReportError)
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
        return set(), []
    header, rows, _ = read_table(folder)
    if header != list(columns):
        raise ReportError(f"{path}: its columns are not this version's results table "
                          f"({len(header)} columns, expected {len(columns)}); start a new run")
    if not repair:
        checked_rows(folder, header, rows, set(case_ids))
    problems = row_problems(header, rows, set(case_ids))
    bad = {p.row for p in problems}
    at = header.index("case_id")
    return {row[at] for n, row in enumerate(rows, 1) if n not in bad}, problems


def drop_rows(folder: Path, rows: set) -> None:
    """results.csv without the rows numbered ``rows`` (1: the first under the header),
    every other line byte for byte, written whole (``write_whole``)."""
    import csv

    header, table, _ = read_table(folder)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")  # as ResultsWriter writes them
    writer.writerow(header)
    writer.writerows(r for n, r in enumerate(table, 1) if n not in rows)
    write_whole(results_path(folder), out.getvalue())


class ResultsWriter:
    """Appends rows to results.csv, each batch's rows as whole lines in one write: a
    killed writer leaves whole rows (at worst the last line cut, which has no newline
    and is ignored, and dropped here before the next row). The file is flushed to disk
    (fsync) at most once a ``SYNC_SECONDS`` and when closed: against a machine that goes
    down, not a killed process (whose written lines the kernel holds already); an
    fsync per row cost 4.5 ms on the shared CPU machine, 8 s over a CPU sweep's 1728
    cases, and a row lost that way is only run again by ``--resume``. A row with a
    field the table has no column for is refused (InternalError), never dropped: a
    misspelt key would otherwise lose a verdict's detail without a word."""

    SYNC_SECONDS = 1.0

    def __init__(self, folder: Path, columns: list[str]):
        path = results_path(folder)
        if path.exists():
            data = path.read_bytes()
            kept, cut = complete_bytes(data)
            if cut:  # drop the half-written row so the next one starts on its own line
                with open(path, "r+b") as fh:
                    fh.truncate(len(kept))
        new_file = not path.exists() or path.stat().st_size == 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._columns = list(columns)
        self._synced = float("-inf")
        if new_file:
            self._append([dict(zip(columns, columns))])

    def _append(self, rows: list[dict]) -> None:
        import csv

        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=self._columns, lineterminator="\r\n")
        writer.writerows(rows)
        data = out.getvalue().encode("utf-8")
        while data:  # one write for a whole batch; a short one (a full disk) goes on where it stopped
            data = data[os.write(self._fd, data):]
        if time.monotonic() - self._synced >= self.SYNC_SECONDS:
            os.fsync(self._fd)
            self._synced = time.monotonic()

    def write(self, rows: list[dict]) -> None:
        known = set(self._columns)
        for r in rows:
            unknown = set(r) - known
            if unknown:
                raise InternalError(f"a results row has field(s) {', '.join(sorted(unknown))} that results.csv has no "
                                    f"column for (case {r.get('case_id', '?')}): the subject's rows and its columns disagree")
        self._append([{k: (v.value if isinstance(v, Status) else v) for k, v in r.items()} for r in rows])

    def close(self) -> None:
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)


def selection_fingerprint(points: list) -> str:
    """A short hash of the selected case IDs, in order: a resumed run must select
    exactly the cases its results table was written for."""
    import hashlib

    return hashlib.sha256("\n".join(p.case_id for p in points).encode()).hexdigest()[:16]
