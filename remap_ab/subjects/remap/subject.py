"""The sparse-MLA index remap as a subject (``remap_ab.subject.Subject``): what the sweep,
the worker pool and the summary ask of it, answered by the remap's own modules.

The grid is grid.py's (``--grid pr|callers|models|FILE``); beside its points every sweep
makes SPEC §6's violating calls (rejections.toml). Before a point runs, A and B are
imported once, their SPEC §1 signatures compared (api_compat.py), and each optional
parameter planned per wrapper (features.py): a point neither side can take is not run.
"""

from __future__ import annotations

from typing import Any, Optional

from remap_ab.subject import JudgeSettings, PytestHooks, Selection, Subject
from remap_ab.subjects.remap.case.config import CaseConfig, variant_key
from remap_ab.subjects.remap.grid import api_compat
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.grid.selection import cap_note, listing, select_with_calls
from remap_ab.subjects.remap.judge import compile_ahead, features, registry, rejections
from remap_ab.subjects.remap.report import failure_class
from remap_ab.subjects.remap.report.summary import pair_coverage
from remap_ab.subjects.remap.report.summary import summarise as summarise_remap
from remap_ab.subjects.remap.report.summary import summary_lines as remap_summary_lines

# results.csv's columns after index, case_id and the grid's axes (their order is the
# file's: runs before this module kept it too).
COLUMNS = (
    "status", "check", "first_mismatch", "mismatch_lanes", "mismatch_rows", "order_differs",
    "order_differs_rows", "a_ms", "b_ms", "inputs_sha256", "worker", "gpu", "report",
    "max_row_valid",  # the oracle's largest per-row valid count (summary: "valid lanes")
    "rejection", "rejected_by",  # a rejection call's id (rejections.toml) and which sides raised ("a,b", "a", ...)
    "backend",  # the attention backend whose call the case is ("none": no backend named)
    "pattern",  # its call pattern (A, B, C, D; "" for a call no backend makes)
    "backend_view",  # that backend's view of A's and B's outputs: same / differs ("" not checked)
    "hazard_rows",  # rows where that backend's rule and the kernel's contract disagree for both sides
)


class RemapSubject(Subject):
    name = "remap"
    title = "vLLM's sparse-MLA index remap (docs/spec.md)"
    failure_classes = failure_class.WORDS
    memcheck = True  # the sanitizer runs around its calls (sanitizer/)
    default_a = "old"
    default_b = "new"
    columns = COLUMNS
    # Its part of each command (remap_ab/commands/), imported when that command runs.
    parts = {command: f"remap_ab.subjects.remap.{module}" for command, module in (
        ("run", "parts.run_command"), ("replay", "parts.replay_command"), ("soak", "parts.soak_command"),
        ("bench", "parts.bench"), ("mutants", "parts.mutants"), ("nondet", "parts.nondet_command"),
        ("resources", "parts.resources_command"), ("trace", "trace_subject"))}

    def implementation(self, name: str) -> str:
        return registry.resolve(name)

    def replay_line(self, case: Any, row: dict, folder: Optional[str], a: str, b: str) -> str:
        from remap_ab.subjects.remap.report.report import (
            replay_line,  # the report writer loads where cases are judged, not in `remap-ab report`
        )

        return replay_line(case, row, folder, (registry.get(a), registry.get(b)))

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        g = gridmod.load(grid)
        grid_points, calls = select_with_calls(g, filters, max_size,
                                               rejections.sweep_points(len(g.points()), grid=g))
        # Implementations import before any worker starts (one clear error, once); workers,
        # run.json and reports use the canonical names (a revision pinned).
        if resume is not None:
            registry.adopt_repo(resume.get("implementations"))
        impls = registry.get(a), registry.get(b)
        a, b = impls[0].name, impls[1].name
        loaded = {role: impl.source.to_dict() if impl.source else None for role, impl in zip("ab", impls)}
        api = [d.to_dict() for d in api_compat.check(a, b)]  # a run-level check (SPEC §1 signatures)
        plan = registry.feature_plan(a, b)
        feature_lines = features.lines(plan, [p.config for p in grid_points])
        grid_points = [p for p in grid_points if plan.runnable(p.config)]
        return Selection(
            points=grid_points + calls, grid_points=len(grid_points), grid_total=len(g.points()),
            grid_version=g.version, axes=[ax.name for ax in g.axes], a=a, b=b,
            note=cap_note(g, filters, max_size),
            meta={"implementations": loaded, "rejections": len(calls), "api": api, "features": feature_lines,
                  "feature_plan": plan.to_dict(),
                  # what the selected cases exercise of the envelope's declared pairs (the summary: those run)
                  "pairs": pair_coverage([p.config for p in grid_points], {"feature_plan": plan.to_dict()})},
            grid=g,
            header=[line for line in feature_lines if not line.startswith(features.QUIET_PREFIX)],
        )

    def listing(self, selection: Selection, filters: list, max_size: Optional[int], device: str,
                command: str) -> tuple[list[str], str]:
        return listing(selection, filters, max_size, device)

    def case_dict(self, config: Any) -> dict:
        return config.to_dict()

    def case_from_dict(self, d: dict) -> Any:
        from remap_ab.subjects.remap.report.recording import task_case  # the batch engine loads where cases run, not in `remap-ab report`

        return task_case(d)

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        from remap_ab.subjects.remap.report.recording import (
            judge_and_record,  # the batch engine loads where cases run, not in `remap-ab report`
        )

        return judge_and_record(configs, settings, times)

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        from remap_ab.subjects.remap.report.recording import (
            lost_case_row,  # the batch engine loads where cases run, not in `remap-ab report`
        )

        return lost_case_row(config, settings.a, settings.b, message, settings.folder, settings.device, status,
                             settings.reports)

    def cost(self, config: Any) -> int:
        """Lanes: token rows times columns (a rejection call, refused before any launch, is one)."""
        return int(getattr(config, "tokens", 1)) * int(getattr(config, "topk", 1))

    def variant(self, config: Any) -> Optional[tuple]:
        return variant_key(config) if isinstance(config, CaseConfig) else None

    def warm_up(self, a: str, b: str, config: Any) -> list[str]:
        return compile_ahead.warm_up(a, b, config)

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        return summarise_remap(rows, meta, grid)

    def summary_lines(self, summary: dict) -> Any:
        return remap_summary_lines(summary)

    def pytest_hooks(self) -> PytestHooks:
        from remap_ab.subjects.remap.parts import pytest_items  # registry and grids load where the plugin runs a grid

        return PytestHooks(grid_file=pytest_items.grid_file, header=pytest_items.header)

    def soak(self, settings: Any) -> Any:
        from remap_ab.subjects.remap.parts import soak  # the soak's draws and batch engine load where a soak runs, not in `remap-ab report`

        return soak.plan(settings)


SUBJECT = RemapSubject()
