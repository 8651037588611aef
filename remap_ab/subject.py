"""What a kernel pair under test declares, and all the machinery may ask of it.

A subject is an instance of ``Subject`` (the base below, every optional member with its
default): a packaged one is the ``SUBJECT`` of a package under ``remap_ab/subjects/``,
a user's own any ``MODULE:ATTRIBUTE``. Most derive from ``remap_ab.declare.Declared``,
which answers every member from a grid, inputs, implementations and outputs declared
as data. The sweep, the run folder, the worker pool and
the summary call only these; what a case is, how its inputs are made, how its outputs
are judged and what a report shows are the subject's own. ``remap_ab.subjects.get``
loads one by name (``--subject NAME``).

Cases cross process boundaries as dicts (``case_dict`` / ``case_from_dict``), rows as
dicts keyed by ``columns`` (the run folder's ``results.csv``).

A subject's part of a command (``remap-ab run``, ``replay``, ``soak``, ``bench``,
``mutants``, or a command of its own such as the remap's ``nondet``) is a module it
names in ``parts``; ``command_part`` imports it when that command runs, and a command
without the subject's part refuses it in one line naming what to declare.

A subject may also be soaked (``remap-ab soak``): its ``soak(settings)`` answers a
``SoakPlan`` (what it draws, how a batch of draws is judged); the driver
(``remap_ab/soak/``) owns the rest. The base's ``soak`` refuses in one line. A failing
case's replay line, whoever prints it, is the subject's ``replay_line``.
"""

from __future__ import annotations

import importlib
import json
import random
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Optional

from remap_ab import command_line, sources
from remap_ab.errors import UsageError
from remap_ab.status import plural

# Where a batch's time goes, summed over workers in the run's summary.
PHASES = ("gen", "kernels", "compare", "write")


@dataclass
class BatchTimes:
    """A judged batch's seconds per phase (``PHASES``; a subject may add its own)."""

    seconds: dict = field(default_factory=lambda: {p: 0.0 for p in PHASES})


@dataclass(frozen=True)
class Point:
    """One row a sweep runs: its place in the selection, its ID, its case (the subject's
    own type) and the labels of the grid values it holds (results.csv's axis columns)."""

    index: int
    case_id: str
    config: Any
    labels: tuple[tuple[str, str], ...] = ()


@dataclass
class Selection:
    """What a sweep runs, decided before anything is written: the points (grid cases
    first, then any calls of the subject's own, such as the remap's rejection calls),
    the canonical implementation names, and the run-level facts run.json keeps."""

    points: list
    grid_points: int  # how many of ``points`` are the grid's (the rest: the subject's extra calls)
    grid_total: int  # the grid's size before filters and caps
    grid_version: Any  # what tells the grid's revisions apart (a resume refuses another)
    axes: list[str]  # results.csv's label columns, in order
    a: str
    b: str
    note: str = ""  # what a cap or the device left out (empty: nothing)
    meta: dict = field(default_factory=dict)  # the subject's run-level facts, kept in run.json
    grid: Any = None  # the subject's grid, loaded (handed back to its summarise)
    header: list[str] = field(default_factory=list)  # lines the sweep prints (stderr) before it runs


@dataclass(frozen=True)
class JudgeSettings:
    """How a batch is judged, the same in every process that judges it."""

    a: str
    b: str
    device: str
    folder: Optional[str]
    memcheck: bool = False
    call_checks: str = "sample"
    reports: Any = None  # report_cap.Cap; None: every failing case gets a report folder


@dataclass
class SummaryLines:
    """The subject's lines of a printed run summary, each where it belongs."""

    cases_note: str = ""  # appended inside the cases line's parentheses
    setup: list[str] = field(default_factory=list)  # run-level checks, after the caps
    verdicts_note: str = ""  # appended to the verdicts line
    findings: list[str] = field(default_factory=list)  # after the report folders line
    other_report: str = ""  # another way to a failing case's report than a new run (a replay)
    report_file: str = "diff.md"  # the file a person opens in a case's report folder


@dataclass
class SoakSettings:
    """What ``remap-ab soak`` was asked, as its subject's ``soak`` sees it."""

    device: str  # "cuda" or "cpu" (the interpreter)
    a: str
    b: str
    workers: int
    gpus: list = field(default_factory=list)  # the visible GPUs, on "cuda"
    # The command's size and schedule options by their names in ``remap-ab soak``'s
    # arguments (commands/soak.py); None: not given. Each subject reads those it honours.
    options: dict = field(default_factory=dict)
    # The flag of each of the subject's soak part's options (name -> "--flag"): a subject
    # below the command line words its repeat line with them.
    flags: dict = field(default_factory=dict)
    # The shared size cap (``options.MAX_SIZE``'s flag), whatever the soak part names it; None: not given.
    size_cap: Optional[int] = None


@dataclass
class SoakPlan:
    """A subject's soak, as the driver runs it.

    ``draws(rng)`` is the endless stream of one seeded ``random.Random`` (the driver's,
    ``soak_random``): the same rng, the same cases in the same order. Each item drawn
    has ``config`` (a case ``judge`` takes), ``case_id`` (its results row's),
    ``extra`` (handed to the judge beside it; None for none) and ``labels()`` (a dict
    of short strings: the summary counts the draws and the failures under them)."""

    draws: Callable[[random.Random], Iterator[Any]]
    describe: str  # the header line after "soak A vs B for M min, seed S: "
    repeat: list = field(default_factory=list)  # (flag, value) pairs the repeat line adds
    batch: int = 1  # draws judged together in one process
    # "module:function": fn(configs, JudgeSettings, times, extras) -> rows, a batch judged
    # where it runs, in this process or a pool worker; "": the subject's judge.
    judge: str = ""
    compile_ahead: int = 0  # processes compiling the coming variants ahead on a GPU (``variant``); 0: none
    facts: Optional[Callable[[Any], dict]] = None  # a drawn item -> what soak.json keeps of it besides its labels
    # The records' ``facts`` -> (summary lines after the distribution, soak.json's keys).
    summary: Optional[Callable[[list], tuple[list, dict]]] = None


def soak_random(seed: int, worker: int = 0, generation: int = 0) -> random.Random:
    """The seeded stream soak ``seed`` draws worker ``worker``'s cases from (a restarted
    worker's ``generation`` gets one of its own)."""
    key = f"remap-ab soak {seed} worker {worker}" + (f" restart {generation}" if generation else "")
    return random.Random(key)


def bucket(value: int, tops: tuple) -> str:
    """The range of ``tops`` (ascending upper bounds) that holds ``value``, e.g. "9-64":
    a soak's label for a drawn size."""
    low = 1
    for top in tops:
        if value <= top:
            return str(top) if low == top else f"{low}-{top}"
        low = top + 1
    return f"> {tops[-1]}"


class ProcessUnusable(Exception):
    """Raised by a soak's judge when this process can judge nothing more (a lost CUDA
    context): the driver records it and stops that worker."""


@dataclass
class PytestHooks:
    """What the pytest plugin (``pytest --remap-grid``) asks a subject beyond the members
    below; each is optional, with a default that needs nothing of the subject's own.

    ``grid_file(grid)``: the file a grid run collects (its items' node IDs hold its path);
    ``header(selection, points)``: the session header's lines (``selection`` None: no grid
    run). ``--remap-a``/``--remap-b`` are resolved and a failing item's replay line made
    by the subject's ``implementation`` and ``replay_line``, as on the command line."""

    grid_file: Optional[Callable[[Optional[str]], Any]] = None
    header: Optional[Callable[[Any, list], list]] = None


class Subject:
    """The base every subject derives from. The five members without a default (``name``,
    ``title``, ``default_a``, ``default_b``, ``columns``) and the six methods that raise
    ``NotImplementedError`` are the subject's own; every other member has a default
    here, so no caller asks whether a subject has it. ``remap_ab.declare.Declared`` is
    a subclass that answers all of them from a declared grid, inputs, implementations
    and outputs (docs/subjects.md)."""

    name: str
    title: str  # a few words: what the pair computes
    default_a: str
    default_b: str
    columns: Sequence[str]  # results.csv's columns after ``index``, ``case_id`` and the axes
    # What one failure class gathers, in words ("check"), for report_cap.describe; "":
    # the summaries do not name the class.
    failure_classes: str = ""
    # Whether --memcheck (the sanitizer around every call) reaches this subject's calls;
    # False: the sweep refuses --memcheck in one line instead of claiming a check it did not run.
    memcheck: bool = False

    # The subject's part of each command that has one, command -> the module holding it,
    # imported only when that command runs (what each command asks of its part: the
    # command's module, remap_ab/commands/). Default: none (``command_part`` may still
    # answer with an object).
    parts: Mapping[str, str] = MappingProxyType({})

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        """The points a sweep of ``grid`` runs (``resume``: the run.json of a resumed run)."""
        raise NotImplementedError

    def case_dict(self, config: Any) -> dict:
        raise NotImplementedError

    def case_from_dict(self, d: dict) -> Any:
        raise NotImplementedError

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        """A row each, in order; a report folder for each failing case ``settings`` allows."""
        raise NotImplementedError

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        """The row of a case whose worker died or ran out of time."""
        raise NotImplementedError

    def cost(self, config: Any) -> int:
        """A case's relative size, for the progress line's estimate (default: every case 1)."""
        return 1

    def variant(self, config: Any) -> Optional[Hashable]:
        """What decides the kernels a case compiles (default None: compiled at launch, never ahead)."""
        return None

    def warm_up(self, a: str, b: str, config: Any) -> list[str]:
        """Call A's and B's implementations on a case of ``config``'s variant, its inputs
        made on the CPU, in a compile-ahead worker (``processes/precompile.py``) where
        every Triton launch compiles and launches nothing; the errors, one line each
        (asked only of a subject whose ``variant`` is ever not None; default: nothing)."""
        return []

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        """The subject's keys of a run's summary (``rows``: results.csv as a DataFrame;
        ``grid``: the subject's grid when the caller holds it loaded, else None). Keys
        the machinery reads: ``failing_cases`` (those a report folder may go to),
        ``failures_by_dimension`` ({axis: {label: [failed, total]}}), ``coverage`` (what a
        PASS covers), ``run_failure`` (a run-level failure beside the cases', "" none).
        Default: none of its own."""
        return {}

    def summary_lines(self, summary: dict) -> SummaryLines:
        """The subject's lines of the printed summary (``summary``: summarise's dict; default none)."""
        return SummaryLines()

    def listing(self, selection: Selection, filters: list, max_size: Optional[int], device: str,
                command: str) -> tuple[list[str], str]:
        """``sweep --list``: a line per point of ``selection`` (what ``select`` chose; its
        case ID first) and the closing sentence on stderr (``command``: the sweep's words,
        "sweep --subject NAME"). Default: ``default_listing``."""
        return default_listing(selection, command, device)

    def replay_line(self, case: Any, row: dict, folder: Optional[str], a: str, b: str) -> str:
        """The one command that replays a judged ``case``, whoever prints it (the soak, the
        pytest grid): ``row`` its results row, ``folder`` the run or soak folder its report
        folder (``row["report"]``) is in, ``a`` and ``b`` its implementations' canonical
        names. "" none. Default: the generic replay's line (``generic_replay_line``) for a
        subject without a replay part of its own, else none."""
        return "" if "replay" in self.parts else generic_replay_line(self, case, a, b, self.name)

    def implementation(self, name: str) -> str:
        """``--a``/``--b`` in canonical form, once, before a command runs: ImplementationError
        for one that does not exist. Default: ``canonical_implementation``."""
        return canonical_implementation(name)

    def pytest_hooks(self) -> PytestHooks:
        """The plugin's hooks (default: every hook's own default)."""
        return PytestHooks()

    def soak(self, settings: SoakSettings) -> SoakPlan:
        """What ``remap-ab soak`` draws and how; UsageError for an option the subject
        cannot honour (default: UsageError, this subject has no soak)."""
        raise UsageError(f"--subject {self.name}: this subject has no soak (it declares no soak and no strategy; "
                         "docs/subjects.md)")

    def command_part(self, command: str) -> Any:
        """The subject's part of ``command`` (``run``, ``replay``, ``mutants``, ...) as
        the command asks for it, or None: the command's own default (or its one-line
        refusal). Default: None for every command."""
        return None


def judge_split(judge: Callable[[list], list], configs: list, *, raises: tuple = (),
                on_crash: Optional[Callable[[Any, Exception], dict]] = None,
                before_split: Optional[Callable[[Exception, list], None]] = None) -> list[dict]:
    """``judge(configs)``'s rows; a batch that raises is judged again case by case, so one
    bad case does not hide the others. A case that raises alone becomes
    ``on_crash(config, exc)``'s row, or raises where there is none; ``raises``: exceptions
    that are no case's doing, raised as they come; ``before_split(exc, configs)`` is
    called first on any other and may raise instead (a lost CUDA context). The one way
    the sweep (in its process), the pytest grid and the remap's soak judge split a batch."""
    try:
        return list(judge(configs))
    except raises:
        raise
    except Exception as exc:
        if before_split is not None:
            before_split(exc, configs)
        if len(configs) > 1:
            return [row for c in configs
                    for row in judge_split(judge, [c], raises=raises, on_crash=on_crash, before_split=before_split)]
        if on_crash is None:
            raise
        return [on_crash(configs[0], exc)]


# --------------------------------------------------------------------------- the optional members' defaults


def canonical_implementation(name: str) -> str:
    """A file by its absolute path, a revision pinned to its commit (``sources.parse``),
    any other name as given: ``implementation`` where a subject declares none."""
    spec = sources.parse(name)
    return name if spec is None else spec.canonical




def default_listing(selection: Selection, command: str, device: str) -> tuple[list[str], str]:
    """Each point's case ID and labels, and how many of the grid's points were listed:
    ``listing`` where a subject declares none."""
    lines = [f"{p.case_id} " + " ".join(f"{k}={v}" for k, v in p.labels) for p in selection.points]
    note = (f"listed {plural(len(selection.points), 'case')} of {selection.grid_total}: what `{command}` runs on {device}"
            + (f"; {selection.note}" if selection.note else ""))
    return lines, note




def replay_line_of(subject: Subject, case: Any, row: dict, folder: Optional[str], a: str, b: str,
                   named: Optional[str] = None) -> str:
    """``subject``'s replay line of a judged case (``Subject.replay_line``); where the
    subject keeps the base's, the generic replay names it as ``--subject`` named it
    (``named``, default the subject's ``name``)."""
    if type(subject).replay_line is Subject.replay_line and named and "replay" not in subject.parts:
        return generic_replay_line(subject, case, a, b, named)
    return str(subject.replay_line(case, row, folder, a, b))


def generic_replay_line(subject: Subject, case: Any, a: str, b: str, named: str) -> str:
    """``remap-ab replay --subject NAME 'CASE JSON'``: the generic replay, which judges the
    case again with the subject's ``judge``."""
    return command_line.line("replay", json.dumps(subject.case_dict(case), sort_keys=True), subject=named,
                             a=a if a != subject.default_a else None, b=b if b != subject.default_b else None)




def command_part(subject: Subject, command: str, needs: Sequence[str] = ("add_arguments", "main"),
                 named: Optional[str] = None) -> Any:
    """``subject``'s part of ``command``: the module its ``parts[command]`` names, else the
    object its ``command_part`` answers; UsageError, saying what to declare, for a subject
    with neither or a part without one of ``needs`` (the names the command asks of its
    part). ``named``: the subject as ``--subject`` named it (default its ``name``)."""
    named = named or subject.name
    asked = ", ".join(needs)
    module = subject.parts.get(command)  # what the subject names wins over an object its base answers
    if module is not None:
        part, where = importlib.import_module(module), f"its {command} part {module}"
    else:
        part, where = subject.command_part(command), f"its {command} part"
        if part is None:
            having = ", ".join(sorted(subject.parts)) or "none"
            raise UsageError(f"--subject {named}: {command} has no part for this subject (its parts: {having}); "
                             f"declare parts = {{{command!r}: MODULE}} on it, MODULE holding {asked} (docs/subjects.md)")
    missing = [name for name in needs if not hasattr(part, name)]
    if missing:
        raise UsageError(f"--subject {named}: {where} lacks {', '.join(missing)}; "
                         f"{command} asks it for {asked} (docs/subjects.md)")
    return part
