"""The sweep's grid as pytest items: ``pytest --remap-grid [FILE]`` collects one item per
grid case of the subject (``--remap-subject NAME``, default remap), and nothing else, so
pytest's own machinery serves sweep cases: ``-k CASEID``, ``--lf``, ``--junitxml``, and
pytest-xdist's distribution (``-n N``, ``--tx``).

The subject is asked only through ``remap_ab.subject.Subject`` (``select`` for the items,
``judge`` for their rows, ``summary_lines`` for the report file, and its optional
``pytest_hooks``, ``SubjectExtras`` below).

Items do not run one case each. The first item of a batch judges it, and the batch is
the items this process will run next (under xdist: the ones the controller has handed
this worker and it has not run yet), up to ``--remap-grid-batch``, through the subject's
``judge``, which writes a report for each failing case the cap allows. Deselected items
(``-k``, ``--lf``) are never judged.

Registered by ``pytest_plugin`` when ``--remap-grid`` is given.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
from pathlib import Path
from typing import Any, Optional

import pytest

from remap_ab import command_line, options, report_cap, runtime, subjects
from remap_ab.errors import RemapABError
from remap_ab.subject import BatchTimes, JudgeSettings, Subject, judge_split, replay_line_of

BATCH_PROPERTY = "remap_ab_batch"  # an item's user property (also in --junitxml): which batch judged it
CPU_BATCH = 16
CAP_OPTION = str(options.REPORTS.plugin)
GPU_BATCH = 64


def add_options(group) -> None:
    group.addoption("--remap-grid", nargs="?", const="", default=None, metavar="FILE",
                    help="collect one item per case of the sweep's grid (FILE or a shipped grid's name, default the "
                         "subject's own grid) instead of the test suite")
    options.add_to_pytest(group, options.FILTER, options.MAX_SIZE,
                          options.BATCH.but(default_text=f"{GPU_BATCH} on cuda, {CPU_BATCH} on cpu"))
    group.addoption("--remap-grid-reports", default=None, metavar="DIR",
                    help="where reports of failing cases go (default <rootdir>/reports/pytest-grid)")
    options.add_to_pytest(group, options.REPORTS)


class SubjectExtras:
    """A subject's ``PytestHooks``, each with a default for a subject that leaves it None:
    a subject of one's own (``MODULE:ATTRIBUTE``) needs none of them."""

    def __init__(self, subject: Subject):
        self.subject = subject
        self.hooks = subject.pytest_hooks()

    def grid_file(self, grid: Optional[str]) -> Path:
        """The file a grid run collects (its items' node IDs hold its path)."""
        own = self.hooks.grid_file
        if own is not None:
            return Path(own(grid))
        return Path(grid) if grid and Path(grid).is_file() else Path(inspect.getfile(type(self.subject)))

    def implementation(self, name: str) -> str:
        """``name`` in the subject's canonical form (``Subject.implementation``, as on the
        command line); ImplementationError for one that does not exist."""
        return self.subject.implementation(name)

    def header(self, selection: Any, points: list) -> list[str]:
        own = self.hooks.header
        return list(own(selection, points)) if own is not None else []


def defaults_of(config, subject: Subject) -> tuple[str, str]:
    """--remap-a/--remap-b: the subject's own A and B where the option keeps its declared
    default (neither flag nor environment variable gave one)."""
    names = []
    for declared, own in ((options.A, subject.default_a), (options.B, subject.default_b)):
        given = config.getoption(str(declared.plugin))
        keeps_default = given == declared.default and not (declared.env and declared.env in os.environ)
        names.append(own if keeps_default else given)
    return names[0], names[1]


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
    judged by the subject."""

    def __init__(self, config, plugin: GridPlugin):
        self.config = config
        self.plugin = plugin
        self.size = config.getoption("--remap-grid-batch")
        reports = config.getoption("--remap-grid-reports")
        self.folder = Path(reports) if reports else Path(config.rootpath) / "reports" / "pytest-grid"
        self.cap = config.getoption(CAP_OPTION)
        self.rows: dict[str, dict] = {}
        self.batch_of: dict[str, str] = {}  # case ID -> "pid:batch number/size"
        self.batches = 0
        self._positions: Optional[dict] = None
        self._compiling: Any = None  # the compile-ahead, made where the first case runs
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
        if self._compiling is None:
            session = batch[0].session
            self._compiling = self._compile_ahead(
                lambda: [x.point.config for x in session.items if isinstance(x, GridCase) and x.case_id not in self.rows])
        with self._compiling.judging([x.point.config for x in batch]):
            self._judge_split([x.point.config for x in batch])

    def _compile_ahead(self, coming) -> Any:
        """On a GPU, for a subject whose cases name the kernels they compile (its
        ``variant``), the variants of the items still to come compile ahead on the host's
        cores when the first batch finds a cold cache (precompile.py); under xdist each
        worker compiles its own at launch (the workers share the cores already)."""
        first = next(iter(self.plugin.points), None)
        if self.device != "cuda" or _xdist_worker(self.config) is not None or first is None \
                or self.plugin.subject.variant(first.config) is None:
            return _NoCompileAhead()
        from remap_ab.processes import precompile  # compile-ahead loads where a GPU grid run judges

        ahead = precompile.InOrder(self.plugin.a, self.plugin.b, self.device, coming=coming,
                                   subject=self.plugin.subject_name)
        self.config.add_cleanup(ahead.close)
        return ahead

    def _judge_split(self, configs: list) -> None:
        """Judge ``configs`` (``subject.judge_split``): a batch that raises is judged again
        case by case, so one bad case does not hide the others, and a case that raises
        alone raises (its item's error) after the rows of its batch that were judged.
        remap-ab's own errors (no case's doing) raise as they come."""
        settings = JudgeSettings(self.plugin.a, self.plugin.b, self.device, str(self.folder), reports=self.cap)

        def judged(batch: list) -> list:
            rows = self.plugin.subject.judge(batch, settings, BatchTimes())
            self.batches += 1
            for r in rows:
                self.rows[str(r["case_id"])] = r
                self.batch_of[str(r["case_id"])] = f"{os.getpid()}:{self.batches}/{len(rows)}"
            return rows

        judge_split(judged, configs, raises=(RemapABError,))

    def explain(self, item: GridCase, row: dict) -> str:
        plugin = self.plugin
        check, first = str(row.get("check") or ""), str(row.get("first_mismatch") or "")
        # The failing check names the property or side (a subject whose line names it already keeps it as is).
        tag = f"[{check}] " if check and f"[{check}]" not in first else ""
        lines = [f"{str(row['status']).upper()} {tag}{first}"]
        report = str(row.get("report") or "")
        if report:
            lines.append(f"report: {self.folder / report / plugin.report_file}")
        else:
            lines.append(f"no report folder: {report_cap.describe(self.cap, CAP_OPTION, plugin.subject)} got one; "
                         f"the command below writes this case's")
        replay = replay_line_of(plugin.subject, item.point.config, row, str(self.folder), plugin.a, plugin.b,
                                plugin.subject_name)
        if replay:
            lines.append(f"replay: {replay}")
        lines.append(f"run it alone: {plugin.alone(item.case_id)}")
        return "\n".join(lines)


class _NoCompileAhead:
    def judging(self, configs: list):
        return contextlib.nullcontext()

    def close(self) -> None:
        pass


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
    def __init__(self, config, subject_name: str, a: str, b: str):
        self.config = config
        self.subject_name = subject_name
        self.subject = subjects.get(subject_name)
        self.extras = SubjectExtras(self.subject)
        self.file = config.getoption("--remap-grid") or None
        try:
            self.selection = self.subject.select(self.file, config.getoption("--remap-grid-filter"),
                                                 config.getoption(str(options.MAX_SIZE.plugin)), a, b,
                                                 runtime.current(), None)
        except RemapABError as exc:
            raise pytest.UsageError(f"--remap-grid: {exc}") from None
        # The grid's points only: a sweep's extra calls (the remap's rejection calls) are not grid items.
        self.points = self.selection.points[:self.selection.grid_points]
        self.a, self.b = self.selection.a, self.selection.b
        # The file a person opens in a report folder (the subject's summary lines say which).
        self.report_file = self.subject.summary_lines({"a": self.a, "b": self.b, "device": runtime.current()}).report_file
        config.stash[_VERDICTS] = _Verdicts(config, self)
        if not hasattr(config, "workerinput"):
            # A session counts its own report slots (report_cap.py); its xdist workers share them.
            shutil.rmtree(config.stash[_VERDICTS].folder / report_cap.SLOTS_FOLDER, ignore_errors=True)
        # What pytest collects is the grid file, and nothing else: the grid's cases are
        # then ordinary collected items (counted, -k, --lf, xdist's node IDs).
        self.path = self.extras.grid_file(self.file).resolve()
        config.args[:] = [str(self.path)]

    def alone(self, case_id: str) -> str:
        """The commands that run one case again: this plugin, or a sweep."""
        grid = f"--remap-grid={self.file}" if self.file else "--remap-grid"
        subject = f" --remap-subject={self.subject_name}" if self.subject_name != subjects.DEFAULT else ""
        more = [("--subject", self.subject_name)] if self.subject_name != subjects.DEFAULT else []
        more += [("--grid", self.file)] if self.file else []
        sweep = command_line.line("sweep", a=self.a, b=self.b,
                                  options=[*more, ("--filter", f"case={case_id}"), ("--reports", "all")])
        return f"pytest {grid}{subject} --remap-a={self.a} --remap-b={self.b} -k {case_id}  (or: {sweep})"

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
        judge = config.stash[_VERDICTS]
        size = judge.size or f"{GPU_BATCH} on cuda, {CPU_BATCH} on cpu"
        source = self.file or f"{self.subject_name}'s {self.path.name}"
        lines = [f"remap-ab grid: {len(self.points)} {self.subject_name} cases of {source}, judged in batches of up "
                 f"to {size}; report folders for {report_cap.describe(judge.cap, CAP_OPTION, self.subject)} under {judge.folder}"]
        if self.selection.note:
            lines.append(f"remap-ab grid: capped: {self.selection.note}")
        # The subject's lines a sweep prints before it runs (the remap: the points neither side can take), then its own.
        own = [*self.selection.header, *self.extras.header(self.selection, self.points)]
        return lines + [f"remap-ab grid: {line.strip()}" for line in own]
