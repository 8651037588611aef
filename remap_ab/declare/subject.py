"""``Declared``: a subject answered from declarations (docs/subjects.md).

A subject declares its grid (``grid.Grid``), its implementations (name -> callable, or
"module:function"), its outputs (``compare.Output``: a name and what equal means), how
a case becomes inputs (``inputs(case, device) -> {name: tensor}``) and, optionally, an
oracle, a Hypothesis strategy over cases (the soak draws from it), mutants as data,
extra result columns and summary lines. Everything the machinery asks of a subject
(``remap_ab.subject.Subject``) is derived here, once, for every declared subject:
selection, filters and the size cap, case IDs, the judge (one call primitive, the call
checks, the comparison per output), the rows, report slots under ``--reports`` and the
generic report folder, the summary's failure tables, the soak, the pytest grid's replay
line and the command parts (run, replay, mutants)."""

from __future__ import annotations

import importlib
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, report_cap
from remap_ab.declare import calls, parts, report
from remap_ab.declare.compare import Mismatch, Output, mismatch, value_at
from remap_ab.declare.grid import Grid, failures_by_dimension
from remap_ab.errors import ConfigError, ImplementationError, UsageError, exception_line
from remap_ab.status import Status
from remap_ab.subject import (
    JudgeSettings,
    Selection,
    SoakPlan,
    SoakSettings,
    Subject,
    SummaryLines,
)

COLUMNS = (
    "status",
    "check",  # the first failing check: b-vs-oracle, a-vs-oracle, b-vs-a, shape, inputs_written, aliased, layout, error; "" on pass
    "first_mismatch",  # one line: side, output, the first differing element and its values, how many differ
    "mismatches",  # side:output of every output that differs ("a:sums b:sums")
    "a_ms",  # A's call, wall milliseconds
    "b_ms",
    "report",  # the report folder's name ("" none)
)
SOAK_CHUNK = 64  # cases one Hypothesis run draws for the soak at a time


@dataclass(frozen=True)
class Property:
    """What an implementation's outputs must satisfy beyond equality with the reference:
    ``holds(inputs, outputs)`` answers "" (or None) when it holds, else what it found,
    in one line. Checked on B's outputs and on A's; the first finding is the case's
    ``property:NAME`` check."""

    name: str
    holds: Callable[[dict, dict], Optional[str]]


@dataclass
class Judged:
    """One case judged: the inputs, each side's outputs ("a", "b", "oracle"), what differs,
    the call checks' findings and an error (a side that raised)."""

    inputs: dict
    outputs: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    error: str = ""
    has_oracle: bool = False
    ms: dict = field(default_factory=dict)
    properties: list = field(default_factory=list)  # (side, property name, what it found), B's first
    errors: dict = field(default_factory=dict)  # side -> what its call raised ("error" joins them)

    def verdict(self, side: Optional[str] = None) -> tuple[Status, str, str]:
        """``(status, check, first line)``; ``side`` "b": of B's side alone (its error, its
        call findings, its mismatches and properties), as the mutants' kill loop judges B."""
        error = self.error if side is None else self.errors.get(side, "")
        if error:
            return Status.ERROR, "error", error
        findings = [f for f in self.findings if side in (None, f.side)]
        if findings:
            return Status.FAIL, str(findings[0].check), findings[0].line
        mismatches = [m for m in self.mismatches if side in (None, m.side)]
        if mismatches:
            return Status.FAIL, self.check_of(mismatches[0]), self.line_of(mismatches[0])
        properties = [p for p in self.properties if side in (None, p[0])]
        if properties:
            who, name, line = properties[0]
            return Status.FAIL, f"property:{name}", f"{who.upper()}'s outputs break {name}: {line}"
        return Status.PASS, "", ""

    def check_of(self, m: Mismatch) -> str:
        if m.problem:
            return "shape"
        return f"{m.side}-vs-oracle" if self.has_oracle else "b-vs-a"

    def line_of(self, m: Mismatch) -> str:
        side = m.side.upper()
        if m.problem:
            return f"{side}'s output {m.output} is {m.problem}"
        at = m.first[0]
        values = ", ".join(f"{k if k == 'oracle' else k.upper()} {value_at(self.outputs.get(k, {}).get(m.output), at)}"
                           for k in ("a", "b", "oracle") if k in self.outputs)
        against = "the oracle" if self.has_oracle else "A"
        if m.total == 1 and at == ():  # one value: no index, no count
            return f"{side}'s output {m.output} differs from {against}'s: {values}"
        return f"{side}'s output {m.output} differs from {against}'s at {list(at)}: {values} ({m.count} of {m.total} elements differ)"


class Declared(Subject):
    """The base of a declared subject: set the class attributes below and define
    ``inputs``; everything else has a default."""

    grid: Grid  # the default grid
    grids: dict = {}  # more named grids, name -> Grid (``--grid NAME``); case IDs and seeds follow ``grid``'s
    implementations: dict = {}  # name -> callable, or "module:function"
    outputs: tuple = (Output("out"),)
    mutants: tuple = ()  # declare.mutants.Mutant, each a planted B and the check that must kill it
    extra_columns: tuple = ()  # results.csv columns of the subject's own (``extras``)
    # What a ``finding`` column's words mean (word -> one line): the summary counts each.
    findings: dict = {}
    header: tuple = ()  # lines a sweep and the pytest grid print before they run
    # On CUDA, a host synchronisation inside the call is a finding (sync): True, of A's and
    # B's call; a tuple of implementation (or mutant) names, of theirs only.
    no_host_sync: Any = False
    properties: tuple = ()  # Property: what each side's outputs must satisfy beyond equality (property:NAME)
    bench: tuple = ()  # cases ``remap-ab bench --subject NAME`` times A and B on (none: no bench)
    # name -> prepare(**inputs) -> a call of no arguments: how the bench calls that side
    # (default: the implementation on the case's inputs, as the A/B calls it)
    bench_implementations: dict = {}
    bench_eager: tuple = ()  # implementations whose call is host work a CUDA graph would skip: timed eagerly
    failure_classes = "check"  # a report slot per failing check (report_cap.py)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = list(getattr(cls, "implementations", {}) or {})
        if "default_a" not in cls.__dict__ and names:
            cls.default_a = names[0]
        if "default_b" not in cls.__dict__ and len(names) > 1:
            cls.default_b = names[1]
        cls.columns = (*COLUMNS[:-1], *cls.extra_columns, COLUMNS[-1])
        _validate(cls)

    @property
    def name(self) -> str:  # type: ignore[override]  # a derived default; a subclass may assign one
        """What ``--subject`` names: ``MODULE:ATTRIBUTE`` where this object is bound in its
        class's module (a subject may declare ``name`` instead, as a packaged one does)."""
        module = sys.modules.get(type(self).__module__)
        bound = next((k for k, v in vars(module).items() if v is self), None) if module is not None else None
        return f"{type(self).__module__}:{bound or type(self).__name__}"

    # -- what the subject declares as functions
    def inputs(self, case: dict, device: str) -> dict:
        """The case's inputs, by the implementations' parameter names (tensors on ``device``)."""
        raise NotImplementedError(f"{type(self).__name__} declares no inputs(case, device)")

    oracle: Optional[Callable] = None  # a function of the inputs, as A and B; None: B judged against A

    def strategy(self) -> Any:
        """A Hypothesis strategy over cases (dicts of the grid's axes), or None: no soak."""
        return None

    def extras(self, case: dict, judged: Judged) -> dict:
        """The values of ``extra_columns`` for a judged case."""
        return {}

    def report_sections(self, case: dict, judged: Judged) -> list[tuple[str, str]]:
        """Sections of the subject's own in a failing case's report.md: ``(title, Markdown)``."""
        return []

    def summary_findings(self, rows: Any) -> list[str]:
        """Lines of the subject's own after the summary's report folders line: by default,
        for each of ``findings`` that a row's ``finding`` column names, how many cases
        and the first one's replay line."""
        lines = []
        for token, meaning in self.findings.items():
            hit = rows[rows["finding"].fillna("").astype(str).str.split().apply(lambda t, k=token: k in t)] \
                if "finding" in rows else rows[:0]
            if len(hit):
                first = {a: hit.iloc[0][a] for a in self.grid.axis_names}
                first = {a: int(v) if str(v).lstrip("-").isdigit() else str(v) for a, v in first.items()}
                lines.append(f"  finding {token} ({meaning}): {len(hit)} cases, the first {hit.iloc[0]['case_id']}: "
                             f"{self.replay_line(first)}")
        return lines

    def seed(self, case: dict) -> int:
        """A case's input seed: from its ID, so the same case draws the same inputs."""
        return int(self.grid.case_id(case), 16) & 0x7FFFFFFF

    # -- implementations
    def must_not_sync(self, fn: Callable) -> bool:
        """Whether ``fn`` (A's or B's callable) gets the sync check (``no_host_sync``)."""
        if self.no_host_sync is True or not self.no_host_sync:
            return bool(self.no_host_sync)
        return any(fn is self.resolve(name) for name in self.no_host_sync)

    def resolve(self, name: str) -> Callable:
        """``name``'s callable: one of ``implementations``, a mutant's id, or "module:function";
        ImplementationError otherwise."""
        found = self.implementations.get(name)
        if found is None:
            found = next((m.b for m in self.mutants if m.id == name), None)
        if found is None and ":" in name:
            module, _, attribute = name.partition(":")
            try:
                found = getattr(importlib.import_module(module), attribute)
            except (ImportError, AttributeError) as exc:
                raise ImplementationError(f"{name}: cannot load it ({exception_line(exc)}); name one of "
                                          f"{', '.join(self.implementations)} or a module on sys.path and its function") from None
        if found is None:
            raise ImplementationError(f"{name}: no implementation of {self.name} has that name; choose one of "
                                      f"{', '.join(self.implementations)}, or give MODULE:FUNCTION")
        if isinstance(found, str):
            return self.resolve(found)
        return found

    def bench_call(self, name: str, inputs: dict) -> Callable[[], Any]:
        """The call of no arguments the bench times for implementation ``name`` on ``inputs``."""
        prepare = self.bench_implementations.get(name)
        if prepare is not None:
            return prepare(**inputs)
        fn = self.resolve(name)
        return lambda: fn(**inputs)

    # -- Subject
    def grid_named(self, name: Optional[str]) -> Grid:
        """The grid ``--grid`` names: ``grid`` (none given, or its name), one of ``grids``,
        or a file ``grid_from_file`` reads; ConfigError otherwise."""
        if name in (None, "", self.grid.name):
            return self.grid
        if name in self.grids:
            return self.grids[name]
        from_file = self.grid_from_file(Path(name)) if Path(name).is_file() else None
        if from_file is not None:
            return from_file
        names = ", ".join([self.grid.name, *self.grids])
        reads = type(self).grid_from_file is not Declared.grid_from_file
        raise ConfigError(f"--grid {name}: {self.name}'s grids are {names}" + (", or a grid file" if reads else "")
                          + "; choose one" + ("" if reads else " (it reads no grid file)"))

    def grid_from_file(self, path: Path) -> Optional[Grid]:
        """The grid of a file ``--grid FILE`` names (None: this subject reads no grid file)."""
        return None

    def header_lines(self, grid: Grid, points: list) -> list[str]:
        """The lines a sweep and the pytest grid print before they run ``points`` of ``grid``."""
        return list(self.header)

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        chosen = self.grid_named(grid)
        self.resolve(a), self.resolve(b)  # an unknown name: one line, before anything runs
        points, total, note = chosen.select(filters, max_size, device)
        return Selection(points=points, grid_points=len(points), grid_total=total, grid_version=chosen.version,
                         axes=chosen.axis_names, a=a, b=b, note=note, grid=chosen,
                         header=self.header_lines(chosen, points))

    def case_dict(self, config: Any) -> dict:
        return dict(config)

    def case_from_dict(self, d: dict) -> Any:
        return dict(d)

    def fresh_inputs(self, case: dict, inputs: dict, device: str) -> Optional[dict]:
        """Other inputs of ``case``'s shapes (new values where vLLM changes them between
        replays of a captured graph), for the graph check; None: it replays on the same."""
        return None

    def judge_case(self, case: dict, a: Callable, b: Callable, device: str, checks: bool = True,
                   production: bool = False) -> Judged:
        """A and B (and the oracle) on ``case``'s inputs through ``calls.call``, each
        output compared as declared; remap-ab's own failure (inputs, oracle) raises.
        ``production`` (with ``checks``, on CUDA): the stream check of both calls and the
        graph check of each ``no_host_sync`` side's."""

        names = [o.name for o in self.outputs]
        inputs = self.inputs(case, device)
        judged = Judged(inputs)
        sides = {side: calls.call(fn, inputs, names, device, side.upper(), checks, self.must_not_sync(fn))
                 for side, fn in (("a", a), ("b", b))}
        if checks and production and str(device).startswith("cuda"):
            fresh = self.fresh_inputs(case, inputs, device)
            for side, fn in (("a", a), ("b", b)):
                eager = sides[side].outputs
                if eager is None:
                    continue
                sides[side].findings += calls.stream_findings(fn, inputs, names, device, side.upper(), eager)
                if self.must_not_sync(fn):
                    sides[side].findings += calls.graph_findings(fn, inputs, fresh, names, device, side.upper())
        oracle = self.oracle
        if oracle is not None:
            ref = calls.call(oracle, inputs, names, device, "the oracle", checks=False)
            if ref.error:
                raise RuntimeError(ref.error)
            sides["oracle"] = ref
            judged.has_oracle = True
        judged.ms = {k: v.ms for k, v in sides.items()}
        judged.outputs = {k: v.outputs for k, v in sides.items() if v.outputs is not None}
        judged.errors = {k: v.error for k, v in sides.items() if v.error}
        judged.error = "; ".join(judged.errors.values())
        if judged.error:
            return judged
        judged.findings = [replace(f, side=k) for k in ("a", "b") for f in sides[k].findings]
        if checks:
            judged.findings += calls.layout_findings(sides["a"], sides["b"])
        compared = ("a", "b") if judged.has_oracle else ("b",)
        reference = judged.outputs["oracle" if judged.has_oracle else "a"]
        for out in self.outputs:
            for side in compared:
                found = mismatch(out, side, judged.outputs[side][out.name], reference[out.name])
                if found is not None:
                    judged.mismatches.append(found)
        judged.mismatches.sort(key=lambda m: m.side != "b")  # B's first: the pair's finding
        for side in ("b", "a"):
            for prop in self.properties:
                found = prop.holds(judged.inputs, judged.outputs[side])
                if found:
                    judged.properties.append((side, prop.name, str(found)))
        return judged

    def row(self, case: dict, judged: Optional[Judged], status: Status = Status.PASS, check: str = "",
            line: str = "") -> dict:
        if judged is not None:
            status, check, line = judged.verdict()
        row = {"case_id": self.grid.case_id(case), "status": status, "check": check, "first_mismatch": line,
               "mismatches": " ".join(f"{m.side}:{m.output}" for m in (judged.mismatches if judged else [])),
               "a_ms": round(judged.ms.get("a", 0.0), 3) if judged else "",
               "b_ms": round(judged.ms.get("b", 0.0), 3) if judged else "", "report": ""}
        if judged is not None:
            row.update({k: v for k, v in self.extras(case, judged).items() if k in self.extra_columns})
        return row

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        a, b = self.resolve(settings.a), self.resolve(settings.b)
        seconds = times.seconds if times is not None else {}
        rows = []
        for case in configs:
            start = time.perf_counter()
            try:
                checks = settings.call_checks != "off"
                judged: Optional[Judged] = self.judge_case(case, a, b, settings.device, checks,
                                                           checks and self._sampled(case, settings.call_checks == "all"))
                row = self.row(case, judged)
            except Exception as exc:  # the inputs or the oracle: remap-ab's side, still one row
                judged, row = None, self.row(case, None, Status.ERROR, "error", f"remap-ab raised {exception_line(exc)}"[:400])
            seconds["kernels"] = seconds.get("kernels", 0.0) + time.perf_counter() - start
            rows.append(self._reported(case, row, judged, settings, seconds))
        return rows

    def _sampled(self, case: dict, every: bool) -> bool:
        """Whether ``case`` gets the stream and graph checks: every case (``every``), else
        a case with a grid label no earlier case of this process had (each label once)."""
        seen = self.__dict__.setdefault("_production_labels", set())
        labels = set(self.grid.labels(case))
        fresh = bool(labels - seen)
        seen |= labels
        return every or fresh

    def _reported(self, case: dict, row: dict, judged: Optional[Judged], settings: JudgeSettings, seconds: dict) -> dict:
        """``row`` with its report folder, when it fails and ``--reports`` leaves a slot."""
        if row["status"] == Status.PASS or not settings.folder or judged is None:
            return row
        if not report_cap.claim(settings.folder, settings.reports, str(row["check"]) or "error", row["case_id"]):
            return row

        start = time.perf_counter()
        try:
            row["report"] = report.write(Path(settings.folder), subject=self, case=case, case_id=row["case_id"], row=row,
                                         judged=judged, settings=settings,
                                         replay=self.replay_line(case, None, None, settings.a, settings.b)).name
        except OSError:  # the row matters more than its report
            row["report"] = ""
        seconds["write"] = seconds.get("write", 0.0) + time.perf_counter() - start
        return row

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        status = Status(status)
        return self.row(config, None, status, str(status), f"[{status.value}] {message}"[:400])

    def cost(self, config: Any) -> int:
        size = config.get(self.grid.size) if self.grid.size else None
        return 1 + int(size) if isinstance(size, int) else 1

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        failed = rows[rows["status"] != Status.PASS.value]
        if not isinstance(grid, Grid):  # a report of a finished run: the grid its run.json names
            try:
                grid = self.grid_named(meta.get("grid_file"))
            except ConfigError:
                grid = self.grid
        axes = [(a.name, a.all_labels()) for a in grid.axes]
        return {"failing_cases": int(len(failed)), "failures_by_dimension": failures_by_dimension(rows, axes),
                "coverage": f"the {grid.name} of {self.title} ({int(len(rows))} cases; outputs "
                            + ", ".join(f"{o.name} {o.equality()}" for o in self.outputs) + ")",
                "run_failure": "", "own_findings": self.summary_findings(rows)}

    def summary_lines(self, summary: dict) -> SummaryLines:
        return SummaryLines(findings=list(summary.get("own_findings") or []), report_file="report.md")

    # -- replay lines, the pytest grid, the soak and the command parts
    def implementation(self, name: str) -> str:
        """An implementation's or a mutant's name, or "module:function", as given (``resolve``
        loads it); anything else as the base reads it (a file, ``REV:PATH``)."""
        if name in self.implementations or any(m.id == name for m in self.mutants) or \
                re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", name):
            return name
        return super().implementation(name)

    def replay_line(self, case: dict, row: Optional[dict] = None, folder: Optional[str] = None, a: str = "",
                    b: str = "") -> str:
        """The command that judges ``case`` again: ``remap-ab replay --subject NAME '<case JSON>'``."""
        a, b = a or self.default_a, b or self.default_b
        return command_line.line("replay", json.dumps(case, sort_keys=True), subject=self.name,
                                 a=a if a != self.default_a else None, b=b if b != self.default_b else None,
                                 path_entries=command_line.import_entries([self.name]))

    def fails(self, case: dict, a: str, b: str, device: str) -> bool:
        """Whether ``case`` does not pass with A ``a`` and B ``b``."""
        judged = self.judge_case(case, self.resolve(a), self.resolve(b), device)
        return judged.verdict()[0] != Status.PASS

    def smallest_failing(self, a: str, b: str, device: str, examples: int = 200) -> Optional[dict]:
        """The smallest case of ``strategy()`` that does not pass, as Hypothesis shrinks it
        (None: none found in ``examples`` draws, or no strategy)."""
        strategy = self.strategy()
        if strategy is None:
            return None
        from hypothesis import HealthCheck, find, settings
        from hypothesis.errors import NoSuchExample

        try:
            return dict(find(strategy, lambda case: self.fails(case, a, b, device),
                             settings=settings(max_examples=examples, database=None, deadline=None,
                                               suppress_health_check=list(HealthCheck))))
        except NoSuchExample:
            return None

    def property_test(self, a: Optional[str] = None, b: Optional[str] = None, device: str = "cpu") -> Callable:
        """A pytest test over ``strategy()``: each drawn case must pass (A and B as given,
        else the defaults); a failure shrinks to the smallest case and names its verdict.
        ``test_mine = SUBJECT.property_test()`` in a test file of one's own."""
        from hypothesis import given

        a, b = a or self.default_a, b or self.default_b

        @given(self.strategy())
        def test(case: dict) -> None:
            row = self.row(case, self.judge_case(case, self.resolve(a), self.resolve(b), device))
            assert row["status"] == Status.PASS, f"{row['check']}: {row['first_mismatch']} (case {json.dumps(case)})"

        return test

    def soak(self, settings: SoakSettings) -> SoakPlan:
        strategy = self.strategy()
        if strategy is None:
            return super().soak(settings)
        self.resolve(settings.a), self.resolve(settings.b)
        # The shared size cap caps the grid's size axis; another size option cannot be honoured.
        # (The soak part's schedule options, such as a batch size, have no effect on a declared subject.)
        cap = settings.size_cap
        given = {k: v for k, v in settings.options.items() if v is not None and k.startswith("max_")}
        given.pop(next((k for k, v in given.items() if v == cap), ""), None)  # the cap's own option
        if given or (cap is not None and not self.grid.size):

            flags = [settings.flags.get(k, k) for k in (given or ["max_size"])]
            raise UsageError(f"{', '.join(flags)}: {self.name} draws its soak from its strategy"
                             + (f", capped on {self.grid.size} only" if self.grid.size else ", without a size cap")
                             + "; drop it")
        if cap is not None:
            strategy = strategy.filter(lambda case, top=cap, axis=self.grid.size: case[axis] <= top)
        return SoakPlan(draws=lambda rng: _draws(self, strategy, rng), describe=f"cases drawn from {self.name}'s strategy")

    def command_part(self, command: str) -> Any:

        return parts.part(self, command)


def _validate(cls: type) -> None:
    """A declaration the machinery cannot honour, refused where the class is defined."""
    names = {*getattr(cls, "implementations", {}), *(m.id for m in getattr(cls, "mutants", ()))}
    sync = cls.no_host_sync  # type: ignore[attr-defined]
    if not isinstance(sync, bool) and not (isinstance(sync, (tuple, list, frozenset, set))
                                           and all(isinstance(n, str) for n in sync)):
        raise TypeError(f"{cls.__name__}.no_host_sync = {sync!r}: declare True, False or a tuple of implementation names")
    unknown = sorted(n for n in (() if isinstance(sync, bool) else sync) if n not in names)
    if unknown:
        raise ValueError(f"{cls.__name__}.no_host_sync names {unknown[0]}, which is none of its implementations "
                         f"({', '.join(sorted(names))})")
    grid = cls.__dict__.get("grid", getattr(cls, "grid", None))
    for key, other in getattr(cls, "grids", {}).items():
        if not isinstance(other, Grid) or other.name != key:
            raise ValueError(f"{cls.__name__}.grids[{key!r}]: declare a Grid named {key!r} (Grid(..., name={key!r}))")
        if grid is not None and (key == grid.name or other.case_id is not grid.case_id):
            raise ValueError(f"{cls.__name__}.grids[{key!r}]: " + (f"{key!r} is the default grid's name" if key == grid.name
                             else "its case_id is not the default grid's (a case has one ID, whichever grid holds it)"))


@dataclass(frozen=True)
class _Draw:
    config: dict
    case_id: str
    labels_: tuple
    extra: Any = None

    def labels(self) -> dict:
        return dict(self.labels_)


def _draws(subject: Declared, strategy: Any, rng: Any):
    """The soak's endless stream: Hypothesis runs of ``SOAK_CHUNK`` cases each, seeded from
    ``rng`` (the same rng, the same cases), each case drawn as the strategy draws it."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    chunk: list = []

    def collect(case: dict) -> None:
        chunk.append(dict(case))

    ruled = settings(max_examples=SOAK_CHUNK, database=None, deadline=None, phases=[Phase.generate],
                     suppress_health_check=list(HealthCheck))
    while True:  # a test decorated afresh each run: Hypothesis refuses settings applied twice to one
        seeded(rng.getrandbits(64))(ruled(given(strategy)(collect)))()
        cases, chunk[:] = list(chunk), []
        for case in cases:
            yield _Draw(case, subject.grid.case_id(case), subject.grid.labels(case))
