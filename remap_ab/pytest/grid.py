"""The sweep's grid as pytest items: ``pytest --remap-grid [FILE]`` collects one item per
grid case (and nothing else), so pytest's own machinery serves sweep cases: ``-k CASEID``,
``--lf``, ``--junitxml``, and pytest-xdist's distribution (``-n N``, ``--tx``).

Items do not run one case each. The first item of a batch judges it, and the batch is
the items this process will run next (under xdist: the ones the controller has handed
this worker and it has not run yet), up to ``--remap-grid-batch``, through the sweep's
own engine (``recording.judge_and_record``: ``batch.run_batch``, then a report for each
case that did not pass). Deselected items (``-k``, ``--lf``) are never judged.

Registered by ``pytest_plugin`` when ``--remap-grid`` is given.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Optional

import pytest

from remap_ab import command_line, options, report_cap, runtime
from remap_ab.errors import RemapABError
from remap_ab.processes import precompile
from remap_ab.subjects.remap import grid as gridmod
from remap_ab.subjects.remap.recording import Judge
from remap_ab.subjects.remap.selection import select

BATCH_PROPERTY = "remap_ab_batch"  # an item's user property (also in --junitxml): which batch judged it
CPU_BATCH = 16
CAP_OPTION = str(options.REPORTS.plugin)
GPU_BATCH = 64


def add_options(group) -> None:
    group.addoption("--remap-grid", nargs="?", const="", default=None, metavar="FILE",
                    help="collect one item per case of the sweep's grid (FILE, default the packaged grid.toml) "
                         "instead of the test suite")
    options.add_to_pytest(group, options.FILTER, options.MAX_TOKENS,
                          options.BATCH.but(default_text=f"{GPU_BATCH} on cuda, {CPU_BATCH} on cpu"))
    group.addoption("--remap-grid-reports", default=None, metavar="DIR",
                    help="where reports of failing cases go (default <rootdir>/reports/pytest-grid)")
    options.add_to_pytest(group, options.REPORTS)


class GridCaseFailed(Exception):
    """A grid case whose verdict is not pass (its results row)."""

    def __init__(self, row: dict):
        super().__init__(row.get("first_mismatch", ""))
        self.row = row


class GridCase(pytest.Item):
    def __init__(self, *, point, **kwargs):
        super().__init__(**kwargs)
        self.point = point
        self.case_id: str = point.case_id

    def runtest(self) -> None:
        judge = self.config.stash[_VERDICTS]
        row = judge.row(self)
        # Which batch judged it (process and batch number, its size): in --junitxml too.
        self.user_properties.append((BATCH_PROPERTY, judge.batch_of[self.case_id]))
        if str(row["status"]) != "pass":
            raise GridCaseFailed(row)

    def repr_failure(self, excinfo, style=None):
        if not isinstance(excinfo.value, GridCaseFailed):
            return super().repr_failure(excinfo, style)
        return self.config.stash[_VERDICTS].explain(self, excinfo.value.row)

    def reportinfo(self):
        return self.path, None, f"grid case {self.case_id}"


class GridCases(pytest.File):
    """The grid file, collected as its selected cases (grid order)."""

    def __init__(self, *, points, **kwargs):
        super().__init__(**kwargs)
        self.points = points

    def collect(self):
        for p in self.points:
            labels = ",".join(f"{k}={v}" for k, v in p.labels)
            name = f"{p.case_id}[{labels}]"
            # The node ID given as the string pytest writes to its cache: pytest >= 9.2 otherwise
            # derives it with the bracket inside the name, which never equals the ID it reads
            # back from the cache (bracket as parameters), so --lf would rerun every case.
            yield GridCase.from_parent(self, name=name, nodeid=f"{self.nodeid}::{name}", point=p)


class _Verdicts:
    """This process's grid items' rows: each batch picked from the items it runs next,
    judged by ``recording.Judge``."""

    def __init__(self, config):
        self.config = config
        self.a = config.getoption("--remap-a")
        self.b = config.getoption("--remap-b")
        self.size = config.getoption("--remap-grid-batch")
        reports = config.getoption("--remap-grid-reports")
        self.folder = Path(reports) if reports else Path(config.rootpath) / "reports" / "pytest-grid"
        self.cap = config.getoption(CAP_OPTION)
        self.rows: dict[str, dict] = {}
        self.batch_of: dict[str, str] = {}  # case ID -> "pid:batch number/size"
        self._judge_of: Any = None  # the recording.Judge, made where the first case runs
        self._positions: Optional[dict] = None
        self.device = ""  # chosen where the first case runs (an xdist controller runs none)
        self.batch = 0

    def row(self, item: GridCase) -> dict:
        if not self.device:
            self.device = runtime.select("auto")
            self.batch = self.size or (GPU_BATCH if self.device == "cuda" else CPU_BATCH)
        if item.case_id not in self.rows:
            self._judge([item, *self._upcoming(item)])
        return self.rows[item.case_id]

    def _upcoming(self, item: GridCase) -> list:
        """The grid items this process runs after ``item``, not yet judged, in order."""
        items = item.session.items
        worker = _xdist_worker(self.config)
        if worker is not None:
            # pytest-xdist's worker loop: the next item it took and the ones queued for it.
            indices = [worker.nextitem_index, *_queued(worker.torun)]
            following = [items[i] for i in indices if isinstance(i, int)]
        else:
            if self._positions is None:
                self._positions = {id(x): n for n, x in enumerate(items)}
            following = items[self._positions.get(id(item), len(items)) + 1:]
        out = []
        for x in following:
            if isinstance(x, GridCase) and x.case_id not in self.rows and x is not item:
                out.append(x)
                if len(out) >= self.batch - 1:
                    break
        return out

    def _judge(self, batch: list) -> None:
        if self._judge_of is None:
            # On a GPU, the variants of the items still to come compile ahead on the host's
            # cores when the first batch finds a cold cache (precompile.py); under xdist
            # each worker compiles its own at launch (the workers share the cores already).
            session = batch[0].session
            self._compiling = precompile.InOrder(
                self.a, self.b, self.device if _xdist_worker(self.config) is None else "",
                coming=lambda: [x.point.config for x in session.items if isinstance(x, GridCase)
                                and x.case_id not in self.rows])
            self.config.add_cleanup(self._compiling.close)
            # A case that raises alone raises here (the item's error), after the rows of its batch that were judged.
            self._judge_of = Judge(self.a, self.b, self.device, self.folder, raises=(RemapABError,), on_rows=self._keep,
                                   reports=self.cap)
        with self._compiling.judging([x.point.config for x in batch]):
            self._judge_of.judge([x.point.config for x in batch])

    def _keep(self, rows: list) -> None:
        assert self._judge_of is not None
        for r in rows:
            self.rows[str(r["case_id"])] = r
            self.batch_of[str(r["case_id"])] = f"{os.getpid()}:{self._judge_of.batches}/{len(rows)}"

    def explain(self, item: GridCase, row: dict) -> str:
        import json

        lines = [f"{str(row['status']).upper()} {row.get('first_mismatch', '')}"]
        report = str(row.get("report") or "")
        if report:
            folder = self.folder / report
            try:
                replay = json.loads((folder / "verdict.json").read_text())["replay"]
            except (OSError, ValueError, KeyError):
                replay = ""
            lines.append(f"report: {folder / 'diff.md'}")
            if replay:
                lines.append(f"replay: {replay}")
        else:
            lines.append(f"no report folder: {report_cap.describe(self.cap, CAP_OPTION)} got one; "
                         f"the command below writes this case's")
        sweep = command_line.line("sweep", a=self.a, b=self.b, options=[("--filter", f"case={item.case_id}"),
                                                                        ("--reports", "all")])
        lines.append(f"run it alone: pytest --remap-grid --remap-a={self.a} --remap-b={self.b} -k {item.case_id}  "
                     f"(or: {sweep})")
        return "\n".join(lines)


_VERDICTS = pytest.StashKey[_Verdicts]()


def _xdist_worker(config) -> Any:
    """pytest-xdist's WorkerInteractor in a worker process (None elsewhere). Its queue of
    item indices is not a public API; without it each item is judged as it comes."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def _queued(torun) -> list:
    """What an xdist worker's queue holds now (item indices, and its markers), oldest first."""
    if hasattr(torun, "lock"):  # pytest-xdist >= 3.7: a queue to read under its lock
        with torun.lock() as queued:
            return list(queued)
    # pytest-xdist 3.5 and 3.6: a queue.Queue of the standard library (execnet hands it out).
    mutex, queued = getattr(torun, "mutex", None), getattr(torun, "queue", None)
    if mutex is None or queued is None:
        return []
    with mutex:
        return list(queued)


class GridPlugin:
    def __init__(self, config):
        self.config = config
        self.file = config.getoption("--remap-grid") or None
        try:
            self.grid = gridmod.load(self.file)
            self.points = select(self.grid, config.getoption("--remap-grid-filter"),
                                 config.getoption("--remap-grid-max-tokens"))
        except RemapABError as exc:
            raise pytest.UsageError(f"--remap-grid: {exc}") from None
        config.stash[_VERDICTS] = _Verdicts(config)
        if not hasattr(config, "workerinput"):
            # A session counts its own report slots (report_cap.py); its xdist workers share them.
            shutil.rmtree(config.stash[_VERDICTS].folder / report_cap.SLOTS_FOLDER, ignore_errors=True)
        # What pytest collects is the grid file, and nothing else: the grid's cases are
        # then ordinary collected items (counted, -k, --lf, xdist's node IDs).
        self.path = (Path(self.file) if self.file else Path(gridmod.__file__).with_name("grid.toml")).resolve()
        config.args[:] = [str(self.path)]

    def pytest_collect_file(self, file_path, parent):
        if file_path == self.path:
            return GridCases.from_parent(parent, path=file_path, points=self.points)
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report) -> None:
        """A failing grid case's JUnit message is its whole explanation, down to how to run
        it alone: pytest >= 9.2 cuts a message at 500 characters (the element text keeps all),
        which a report's paths and replay command exceed. Runs after --junitxml's writer,
        in the process that writes the file (the xdist controller)."""
        if report.when != "call" or not report.failed or BATCH_PROPERTY not in dict(report.user_properties):
            return
        from _pytest import junitxml  # its writer's state: no public API sets a message

        xml = self.config.stash.get(junitxml.xml_key, None)
        if xml is None:
            return
        for node in xml.node_reporter(report).nodes:
            if node.tag == "failure":
                node.set("message", junitxml.bin_xml_escape(str(report.longrepr)))

    def pytest_report_header(self, config):
        source = self.file or "remap_ab/subjects/remap/grid.toml"
        judge = config.stash[_VERDICTS]
        size = judge.size or f"{GPU_BATCH} on cuda, {CPU_BATCH} on cpu"
        return [f"remap-ab grid: {len(self.points)} cases of {source}, judged in batches of up to {size}; "
                f"report folders for {report_cap.describe(judge.cap, CAP_OPTION)} "
                f"under {judge.folder}",
                # What a PASS covers of the call envelope, and the grids it leaves out.
                f"remap-ab grid: a PASS covers {gridmod.coverage(self.grid, [p.config for p in self.points])}"]
