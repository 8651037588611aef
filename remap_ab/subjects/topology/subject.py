"""The topology-witness merge as a subject (``remap_ab.subject.Subject``): what the sweep,
the worker pool and the summary ask of it, answered by this package's modules.

The grid is grid.py's (``--grid pr``, the default, or a file of grid.toml's form); on
the CPU only the cases the interpreter can take run (``grid.CPU_MAX_ROWS``), and the
selection's note says how many were left out. A case is judged by ``check.check_case``
(A and B against the oracle, bit for bit, and every property the PR states); report.py
makes its row and, when it fails, its report folder.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from remap_ab import runtime
from remap_ab.declare.grid import Limit, failures_by_dimension
from remap_ab.declare.grid import choose as declared_choose
from remap_ab.errors import ConfigError, exception_line
from remap_ab.status import Status
from remap_ab.subject import (
    JudgeSettings,
    PytestHooks,
    Selection,
    SoakPlan,
    SoakSettings,
    Subject,
    SummaryLines,
    canonical_implementation,
    default_listing,
)
from remap_ab.subjects.topology import calls, check, report
from remap_ab.subjects.topology import grid as gridmod
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.properties import DOES_NOT_HOLD, PROPERTIES

# results.csv's columns after index, case_id and the axes.
COLUMNS = (
    "status",
    "check",  # a-vs-oracle, b-vs-oracle, a-vs-b, property:<name>, error, crash, timeout; "" on pass
    "first_mismatch",  # one line: side, output, row, column and values; or the property finding
    "mismatches",  # side:output of every output differing from the oracle's ("a:witnesses b:merged")
    "findings",  # how many property findings (a property may be checked on A's and on B's output)
    "properties_failed",  # the properties that do not hold on the case, space-separated
    "oracle_rows",  # the rows compared with the oracle ("all", or the first and last 512)
    "a_ms",  # A's merge call, wall milliseconds
    "b_ms",
    "report",  # the report folder's name ("" none)
)
PACKAGED_GRIDS = (None, "pr")


def _load_grid(grid: Optional[str]) -> tuple[int, tuple[TopologyCase, ...]]:
    if grid in PACKAGED_GRIDS:
        return gridmod.load(gridmod.GRID_FILE)
    path = Path(str(grid))
    if not path.is_file():
        raise ConfigError(f"--grid {grid}: the topology subject has no such grid and no such file; give pr (the "
                          f"default) or the path of a file of the form of {gridmod.GRID_FILE}")
    try:
        return gridmod.load(path.resolve())
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"--grid {grid}: not a topology grid file ({exception_line(exc)}); "
                          f"see {gridmod.GRID_FILE} for the form") from None


def labels(case: TopologyCase) -> tuple[tuple[str, str], ...]:
    return tuple((axis, str(getattr(case, axis))) for axis in gridmod.AXES)


@dataclasses.dataclass
class Chosen:
    points: list  # remap_ab.subject.Point, in grid order
    grid_total: int
    version: int
    note: str  # what the device and the size cap left out ("" nothing)
    cases: tuple  # every case of the grid, unfiltered


def choose(grid: Optional[str], filters: list, max_size: Optional[int], device: str) -> Chosen:
    """The grid's cases the filters keep, less what ``device`` and ``max_size`` (rows)
    cannot take, said in the note; ConfigError when nothing is left."""
    version, every = _load_grid(grid)
    limits = []
    if device == "cpu":
        limits.append(Limit(gridmod.CPU_MAX_ROWS, _rows, "rows", f"more than {gridmod.CPU_MAX_ROWS} rows run on a GPU only "
                                                                 "(the interpreter runs one program per row)"))
    if max_size is not None:
        limits.append(Limit(max_size, _rows, "rows", f"more than {max_size} rows (the size cap)"))
    points, note = declared_choose(every, axes=gridmod.AXES, label=lambda c, axis: str(getattr(c, axis)),
                                   case_id=report.case_id, filters=filters, limits=limits, grid_name="topology grid")
    return Chosen(points, len(every), version, note, every)


def _rows(case: TopologyCase) -> int:
    return case.rows


class TopologySubject(Subject):
    name = "topology"
    title = "vLLM's topology-witness merge (docs/topology.md)"
    failure_classes = "check"  # report.claim's class
    default_a = "a"
    default_b = "b"
    columns: Sequence[str] = COLUMNS
    # Its part of each command (remap_ab/commands/), imported when that command runs.
    parts = {command: f"remap_ab.subjects.topology.{module}" for command, module in (
        ("replay", "replay_command"), ("soak", "soak_command"), ("bench", "bench"), ("mutants", "mutants"))}

    def implementation(self, name: str) -> str:
        return canonical_implementation(name)  # resolved, imported and checked by calls.resolve in select

    def replay_line(self, case: Any, row: dict, folder: Optional[str], a: str, b: str) -> str:
        return report.replay_line(case, a, b)

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        chosen = choose(grid, filters, max_size, device)
        runtime.select(device)  # the interpreter switch before B's module is imported
        impl_a, impl_b = calls.resolve(a, "a"), calls.resolve(b, "b")
        return Selection(
            points=chosen.points, grid_points=len(chosen.points), grid_total=chosen.grid_total,
            grid_version=chosen.version,
            axes=list(gridmod.AXES), a=impl_a.name, b=impl_b.name, note=chosen.note,
            meta={"implementations": {"a": impl_a.source, "b": impl_b.source},
                  "topology_grid": "pr" if grid in PACKAGED_GRIDS else str(Path(str(grid)).resolve())},
            grid=chosen.cases,
        )

    def listing(self, selection: Selection, filters: list, max_size: Optional[int], device: str,
                command: str) -> tuple[list[str], str]:
        return default_listing(selection, command, device)

    def case_dict(self, config: Any) -> dict:
        return dataclasses.asdict(config)

    def case_from_dict(self, d: dict) -> Any:
        data = dict(d)
        if data.get("explicit_learned") is not None:
            data["explicit_learned"] = tuple(tuple(r) for r in data["explicit_learned"])
        if data.get("explicit_lens") is not None:
            data["explicit_lens"] = tuple(data["explicit_lens"])
        return TopologyCase(**data)

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        runtime.select(settings.device)
        impl_a, impl_b = calls.resolve(settings.a, "a"), calls.resolve(settings.b, "b")
        seconds = times.seconds if times is not None else {}
        rows = []
        for case in configs:
            try:
                result = check.check_case(case, settings.device, b_module=impl_b.module, a_module=impl_a.module)
            except check.SideRaised as exc:  # an implementation that raises: its verdict, not a crash of the sweep
                rows.append(self._reported(case, None, settings, str(exc), seconds))
                continue
            except Exception as exc:  # inputs, oracle or properties: remap-ab's own, still one row
                rows.append(self._reported(case, None, settings, f"remap-ab raised {exception_line(exc)}", seconds))
                continue
            for phase, s in result.seconds.items():
                seconds[phase] = seconds.get(phase, 0.0) + s
            rows.append(self._reported(case, result, settings, "", seconds))
        return rows

    def _reported(self, case: TopologyCase, result: Optional[check.CaseResult], settings: JudgeSettings, error: str,
                  seconds: dict, status: Status = Status.ERROR) -> dict:
        """The row, with its report folder when the case fails and the cap allows one."""
        out = report.row(case, result, "", error, status)
        if out["status"] == Status.PASS or settings.folder is None:
            return out
        if not report.claim(Path(settings.folder), settings.reports, out["check"], out["case_id"]):
            return out
        clock = time.perf_counter()
        try:
            out["report"] = report.write(Path(settings.folder), case, result, settings.a, settings.b, settings.device,
                                         error, status).name
        except OSError:  # the row matters more than its report
            out["report"] = ""
        seconds["write"] = seconds.get("write", 0.0) + time.perf_counter() - clock
        return out

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        status = Status(status)
        return self._reported(config, None, settings, f"[{status.value}] {message}", {}, status)

    def cost(self, config: Any) -> int:
        """Entries: rows times topk."""
        return max(int(config.rows) * int(config.topk), 1)

    def variant(self, config: Any) -> None:
        return None  # the fused kernel compiles at its first launch; no compile-ahead yet

    def warm_up(self, a: str, b: str, config: Any) -> list[str]:
        return []  # never asked: ``variant`` is None, so nothing is compiled ahead

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        return summarise(rows, meta, grid)

    def summary_lines(self, summary: dict) -> SummaryLines:
        return summary_lines(summary)

    def pytest_hooks(self) -> PytestHooks:
        return PytestHooks(grid_file=gridmod.pytest_grid_file)

    def soak(self, settings: SoakSettings) -> SoakPlan:
        from remap_ab.subjects.topology import soak  # its draws load where a soak runs, not in `remap-ab report`

        return soak.plan(settings)


def _grid_cases(meta: dict, grid: Any) -> tuple[TopologyCase, ...]:
    if isinstance(grid, (tuple, list)):
        return tuple(grid)
    name = meta.get("topology_grid") or (grid if isinstance(grid, str) else None)
    try:
        return _load_grid(None if name in (None, "pr") else name)[1]
    except ConfigError:  # the grid file is gone: the summary names IDs without replay lines
        return ()


def summarise(df: Any, meta: dict, grid: Any = None) -> dict:
    """The topology keys of a run's summary: failures per axis value, mismatches per
    side, and per property its findings with the smallest case (fewest rows, then topk)
    and that case's replay line."""
    import pandas as pd

    failed = df[df["status"] != Status.PASS.value]
    by_dim = failures_by_dimension(df, [(axis, None) for axis in gridmod.AXES])
    mism = df["mismatches"].fillna("").astype(str) if "mismatches" in df else pd.Series([], dtype=str)
    check_col = df["check"].fillna("").astype(str) if "check" in df else pd.Series([], dtype=str)
    cases = {report.case_id(c): c for c in _grid_cases(meta, grid)}
    props = df["properties_failed"].fillna("").astype(str).str.split() if "properties_failed" in df else pd.Series([], dtype=object)
    findings = {}
    for name in PROPERTIES:
        hit = df[props.map(lambda names, n=name: n in names)] if len(props) else df.iloc[0:0]
        if hit.empty:
            continue
        size = pd.to_numeric(hit.get("rows", 0), errors="coerce").fillna(0), pd.to_numeric(hit.get("topk", 0), errors="coerce").fillna(0)
        smallest = hit.assign(_r=size[0], _k=size[1]).sort_values(["_r", "_k"], kind="stable").iloc[0]
        cid = str(smallest["case_id"])
        case = cases.get(cid)
        findings[name] = {
            "cases": int(len(hit)), "smallest": cid, "smallest_case": case.key() if case else "",
            "replay": report.replay_command(case, meta.get("a") or "a", meta.get("b") or "b",
                                            meta.get("python_path") or ()) if case else "",
            "known": name in DOES_NOT_HOLD,
        }
    return {
        "failing_cases": int(len(failed)),
        "failures_by_dimension": by_dim,
        "coverage": f"the topology grid ({int(len(df))} cases: A and B bit-exact against the oracle, "
                    f"{len(PROPERTIES)} properties)",
        "run_failure": "",
        "mismatches_by_side": {
            "a": int(mism.str.contains(r"\ba:", regex=True).sum()),
            "b": int(mism.str.contains(r"\bb:", regex=True).sum()),
            "a-vs-b": int((check_col == "a-vs-b").sum()),
        },
        "errors": int((df["status"] == Status.ERROR.value).sum()),
        "findings_by_property": findings,
    }


def summary_lines(s: dict) -> SummaryLines:
    m = s.get("mismatches_by_side") or {}
    a, b = s.get("a") or "A", s.get("b") or "B"
    lines = [f"  mismatches with the oracle: A ({a}) in {m.get('a', 0)} cases, B ({b}) in {m.get('b', 0)}; "
             f"A vs B on rows the oracle did not sample in {m.get('a-vs-b', 0)}; errors {s.get('errors', 0)}"]
    found = s.get("findings_by_property") or {}
    if found:
        lines.append("  property findings (on a property the PR states, shared by A and B; no blame): "
                     + ", ".join(f"{name} in {f['cases']} cases" + (" (known not to hold)" if f.get("known") else "")
                                 for name, f in found.items()))
        for name, f in found.items():
            lines.append(f"    {name}: smallest case {f['smallest']}"
                         + (f" ({f['smallest_case']}): {f['replay']}" if f.get("replay") else ""))
    return SummaryLines(findings=lines, report_file="report.md")


SUBJECT: Subject = TopologySubject()
