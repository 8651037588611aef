"""A trace as a sweep (``remap-ab sweep --trace DIR``): a subject whose "grid" is the
trace folder and whose points are its recorded calls, each judged by the remap's own
machinery on the recorded inputs (``trace_case.py``), and which answers
every other question as the remap does. The sweep, the worker pool, the run folder,
``--resume`` and the summary drive it as any subject (its name below is how they find
it again: ``MODULE:ATTRIBUTE``).

A file that cannot be read (truncated, corrupt, another subject's) is one line naming
it in the header; the rest of the trace runs, and the run is not PASS.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line
from remap_ab.errors import ConfigError, InputError, UsageError
from remap_ab.status import Status, plural
from remap_ab.subject import JudgeSettings, Point, Selection, Subject, SummaryLines
from remap_ab.subjects.remap.case.config import variant_key
from remap_ab.subjects.remap.grid import api_compat
from remap_ab.subjects.remap.judge import compile_ahead, features, registry
from remap_ab.subjects.remap.parts import trace_case as traced
from remap_ab.subjects.remap.parts.trace_workload import envelope_lines, signature_lines, signature_words, workload_lines
from remap_ab.subjects.remap.subject import SUBJECT as REMAP
from remap_ab.traces import trace_file

NAME = "remap_ab.subjects.remap.trace_subject:SUBJECT"
AXES = ("signature", "wrapper")
CASE_FILTER = "case="


class TraceSubject(Subject):
    name = NAME
    title = "recorded calls of vLLM's sparse-MLA index remap (docs/traces.md)"
    failure_classes = REMAP.failure_classes
    default_a = REMAP.default_a
    default_b = REMAP.default_b
    columns = REMAP.columns

    def implementation(self, name: str) -> str:
        return REMAP.implementation(name)

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        if not grid:
            raise UsageError("a trace sweep needs the trace folder: remap-ab sweep --trace DIR")
        folder = Path(grid)
        if not folder.is_dir():
            raise UsageError(f"--trace {folder}: no such folder; give the folder remap_ab.record wrote")
        if max_size is not None:
            raise UsageError("--max-tokens does not apply to a trace: every recorded call runs "
                             "(--filter case=ID,... keeps some)")
        wanted = _case_filter(filters)
        paths = trace_file.files(folder)
        if not paths:
            raise InputError(f"--trace {folder}: holds no trace files (*{trace_file.SUFFIX}); record calls into it "
                             "with remap_ab.record or REMAP_AB_RECORD")
        unreadable: list[str] = []
        samples: list = []
        cases: dict = {}
        for path in paths:
            try:
                sample = trace_file.read(path, subject=REMAP.name)
                config, _ = traced.case_of(sample)
            except (InputError, ConfigError) as exc:
                line = str(exc)
                unreadable.append(line if line.startswith("trace file") else f"trace file {path}: {line}")
                continue
            samples.append(sample)
            case = traced.TraceCase(str(path), sample.signature, config)
            cases.setdefault(case.case_id, case)  # the same call recorded twice is one case
        if resume is not None:
            registry.adopt_repo(resume.get("implementations"))
        impls = registry.get(a), registry.get(b)
        a, b = impls[0].name, impls[1].name
        loaded = {role: impl.source.to_dict() if impl.source else None for role, impl in zip("ab", impls)}
        api = [d.to_dict() for d in api_compat.check(a, b)]
        plan = registry.feature_plan(a, b)
        configs = [c.config for c in cases.values()]
        feature_lines = features.lines(plan, configs) if configs else []
        runnable = [c for c in cases.values() if plan.runnable(c.config)]
        not_run = len(cases) - len(runnable)
        if wanted is not None:
            unknown = sorted(wanted - set(cases))
            if unknown:
                listing = command_line.line("sweep", options=[("--trace", str(folder)), ("--list", None)])
                raise ConfigError(f"--filter case={unknown[0]}: no recorded call of {folder} has that ID; "
                                  f"`{listing}` lists them")
            runnable = [c for c in runnable if c.case_id in wanted]
        points = [Point(i, c.case_id, c, (("signature", c.signature), ("wrapper", c.config.mode)))
                  for i, c in enumerate(runnable)]
        if not points and not unreadable:
            raise ConfigError(f"--trace {folder}: none of its {plural(len(cases), 'recorded call')} can run: "
                              f"neither {a} nor {b} takes what they pass (features above); give a --b that does")
        manifests = trace_file.manifests(folder)
        header = workload_lines(str(folder), samples, configs, manifests)
        header += signature_lines(list(cases.values()), manifests)
        header += envelope_lines(configs) if configs else []
        header += [line for line in feature_lines if not line.startswith(features.QUIET_PREFIX)]
        if not_run:
            header.append(f"  NOT RUN: {plural(not_run, 'recorded call')} pass a parameter that neither A ({a}) nor "
                          f"B ({b}) takes on the wrapper they call; the run is not PASS")
        header += [f"  ERROR {line}" for line in unreadable]
        fingerprint = int(hashlib.sha256("\n".join(f"{p.name}:{p.stat().st_size}" for p in paths).encode()).hexdigest()[:12], 16)
        return Selection(
            points=points, grid_points=len(points), grid_total=len(paths), grid_version=fingerprint,
            axes=list(AXES), a=a, b=b,
            note="" if wanted is None else f"--filter: {len(points)} of the trace's recorded calls",
            meta={"implementations": loaded, "api": api, "features": feature_lines,
                  "trace": {"folder": str(folder), "files": len(paths), "calls": len(cases),
                            "signatures": len({c.signature for c in cases.values()}), "unreadable": unreadable,
                            "not_run": not_run, "filtered": wanted is not None,
                            "described": {c.signature: signature_words(c.config) for c in cases.values()}}},
            grid=None, header=header,
        )

    def case_dict(self, config: Any) -> dict:
        return config.to_dict()

    def case_from_dict(self, d: dict) -> Any:
        return traced.TraceCase.from_dict(d)

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        return traced.judge_traces(configs, settings, times)

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        status = Status(status)
        return {"case_id": config.case_id, "status": status, "check": status.value,
                "first_mismatch": f"[{status.value}] {message}", "mismatch_lanes": 0, "mismatch_rows": 0,
                "order_differs": False, "order_differs_rows": 0, "a_ms": "", "b_ms": "", "inputs_sha256": "",
                "report": "", "max_row_valid": "", "backend": "none", "pattern": config.config.pattern,
                "backend_view": "", "hazard_rows": 0}

    def cost(self, config: Any) -> int:
        return int(config.tokens) * int(config.topk)

    def variant(self, config: Any) -> Optional[tuple]:
        return variant_key(config.config)

    def warm_up(self, a: str, b: str, config: Any) -> list[str]:
        return compile_ahead.warm_up(a, b, config.config)

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        trace = meta.get("trace") or {}
        failed = rows[rows["status"] != Status.PASS.value]
        by_dim = {}
        for axis in AXES:
            if axis in rows.columns:
                total = rows.groupby(rows[axis].astype(str)).size()
                bad = failed.groupby(failed[axis].astype(str)).size()
                by_dim[axis] = {str(k): [int(bad.get(k, 0)), int(n)] for k, n in total.items()}
        problems = []
        if trace.get("unreadable"):
            problems.append(f"{plural(len(trace['unreadable']), 'trace file')} could not be read or hold no call of the "
                            "remap (the header names each)")
        if trace.get("not_run"):
            problems.append(f"{plural(trace['not_run'], 'recorded call')} not run (neither side takes what they pass)")
        api = meta.get("api", [])
        if api_compat.fails(api):
            problems.append(f"{meta.get('b')} does not accept every call {meta.get('a')} accepts (api above)")
        signatures = by_dim.get("signature", {})
        failing_signatures = {s: v for s, v in signatures.items() if v[0]}
        return {
            "trace": trace, "api": api, "features": meta.get("features", []),
            "coverage": f"the recorded calls of {trace.get('folder', '?')} ({plural(len(signatures), 'signature')})",
            "failures_by_dimension": by_dim, "failing_signatures": failing_signatures,
            "failing_cases": int(len(failed)),
            "signature_reports": _first_reports(failed),
            "run_failure": "; ".join(problems),
        }

    def summary_lines(self, summary: dict) -> SummaryLines:
        trace = summary.get("trace") or {}
        setup = ["  " + line for line in api_compat.summary_lines(summary.get("api") or [], summary["a"], summary["b"])]
        setup.append(f"  trace: {trace.get('folder')}: {plural(trace.get('files', 0), 'file')}, "
                     f"{plural(trace.get('calls', 0), 'recorded call')} of {plural(trace.get('signatures', 0), 'signature')}")
        setup += [f"  ERROR {line}" for line in trace.get("unreadable", [])]
        findings = []
        for sig, (bad, total) in sorted((summary.get("failing_signatures") or {}).items()):
            first = (summary.get("signature_reports") or {}).get(sig) or {}
            where = (f"; replay: {command_line.line('replay', str(Path(summary['folder']) / first['report']))}"
                     if first.get("report") else "")
            words = (trace.get("described") or {}).get(sig, "")
            findings.append(f"  FAILING signature {sig} ({words}): {bad} of {total} recorded calls; "
                            f"first {first.get('case_id', '?')}" + where)
        return SummaryLines(cases_note=f"; recorded calls of {trace.get('folder')}", setup=setup, findings=findings,
                            other_report="")


def _case_filter(filters: list) -> Optional[set]:
    wanted: Optional[set] = None
    for f in filters or []:
        f = f.strip()
        if not f.startswith(CASE_FILTER):
            raise UsageError(f"--filter {f!r}: a trace sweep takes only --filter case=ID[,ID...] (a recorded call's "
                             "case ID, from --list)")
        wanted = (wanted or set()) | {x.strip() for x in f[len(CASE_FILTER):].split(",") if x.strip()}
    return wanted


def _first_reports(failed) -> dict:
    """Per signature, its first failing case and that case's report folder ('' none)."""
    out: dict = {}
    if "signature" not in failed.columns:
        return out
    for r in failed.to_dict("records"):
        sig = str(r["signature"])
        report = str(r.get("report") or "")
        report = "" if report == "nan" else report
        if sig not in out or (report and not out[sig]["report"]):
            out[sig] = {"case_id": r["case_id"], "report": report}
    return out


SUBJECT = TraceSubject()
