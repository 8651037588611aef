"""Failing-case reports: everything needed to read, and to replay, one case.

A report is a folder ``<root>/<case-id>/`` (``root`` is a run folder such as
``reports/<run>/``) holding:

  config.json   the CaseConfig (``CaseConfig.from_dict`` rebuilds it) and its case ID
  inputs.pt     the input tensors (torch.save of a dict of int32 CPU tensors)
  outputs.pt    each implementation's outputs: {"a"|"b"|"oracle": {"name", "out",
                "counts", "error"}}, plus "reference": the oracle's direct result
                (empty for a crash or timeout: no outputs exist)
  verdict.json  the verdict (``Verdict.to_dict``), implementations (name, module, the
                sys.path entry a custom module was imported from), device, the inputs'
                sha256 (checked on load), the replay command
  diff.md       the readable diff: verdict; a section per check that failed, with its
                evidence (report_sections.py); when values differ, the first
                mismatching lanes with A/B/oracle values, per-row valid counts and
                the picture; the replay command
  diff.html     the same, self-contained, with the lane picture embedded
  lanes.png     the lane picture (when matplotlib is installed: ``remap-ab[plots]``)
  replay.sh     the one command that replays it

A rejection call's report (``write_rejection_report``) has no outputs; its
config.json also holds the call, so a replay makes the call again.

One model, ``CaseReport``, is built once (from a ``runner.CaseResult``, a crash or
timeout, which have no outputs, or a rejection call's verdict) and rendered through the Jinja2 templates in
``remap_ab/templates/``. What the report needs about implementations (their module and
import path) is handed in by the caller; this module never looks it up. Reading a
report back checks every JSON field against its ``schema.py`` model first.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import os
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remap_ab import charts
from remap_ab.compare import Verdict, count_rows, differ, lost_verdict, plural
from remap_ab.config import FIELD_TYPES, CaseConfig
from remap_ab.errors import ConfigError, PlotsUnavailable, ReportError
from remap_ab.inputs import CaseInputs, generate_inputs, hash_inputs
from remap_ab.rejections import RejectionCase, by_id
from remap_ab.rejections import replay_command as call_replay
from remap_ab.report_sections import sections
from remap_ab.sources import Source, pinned_name
from remap_ab.status import Status

REPORT_FORMAT = 1
FIRST_MISMATCHES = 20  # lanes in the first-mismatch table
WORST_ROWS = 20  # failing rows in the per-row table
PASSING_ROWS = 3  # passing rows shown beside them, for contrast


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class ImplementationInfo:
    """What a report records about one implementation: its name, the module it was
    imported from, and the sys.path entry that import needs (None: importable as
    installed). Built by the caller, which knows how it loaded the implementation."""

    name: str
    module: str | None = None
    path_entry: str | None = None
    source: dict | None = None  # a file or revision's file: sources.Source.to_dict (path, commit, sha256)

    @classmethod
    def of(cls, impl: Any) -> ImplementationInfo:
        """From an ``ImplementationInfo``, or a loaded implementation with ``name``,
        ``module_path`` and ``module`` (``registry.Implementation``). An implementation
        named by its own dotted path may live outside the installed packages: its
        path entry is the folder its top-level package was imported from."""
        if isinstance(impl, ImplementationInfo):
            return impl
        name, module_path = impl.name, impl.module_path
        entry = None
        file = getattr(impl.module, "__file__", None)
        if file and name == module_path:
            folder = Path(file).resolve().parent
            if Path(file).name == "__init__.py":
                folder = folder.parent
            for _ in range(module_path.count(".")):
                folder = folder.parent
            entry = str(folder)
        source = getattr(impl, "source", None)
        return cls(name, module_path, entry, source.to_dict() if source is not None else None)

    def to_dict(self) -> dict:
        out = {"name": self.name, "module": self.module, "path_entry": self.path_entry}
        return {**out, "source": self.source} if self.source else out

    @property
    def loaded(self) -> str:
        """What a file or revision name loaded, in one line ('' for a module)."""

        return Source(**self.source).line() if self.source else ""

    @property
    def pinned(self) -> str:
        """The name that loads exactly this again: a revision with its full commit."""

        return pinned_name(Source(**self.source), self.name) if self.source else self.name


@dataclass(frozen=True)
class LaneValues:
    """One lane of the first-mismatch table: A's, B's and the oracle's value there."""

    row: int
    col: int
    a: int | None
    b: int | None
    oracle: int
    first: bool  # the lane the verdict's first mismatch names


@dataclass(frozen=True)
class RowCounts:
    """One row of the per-row table: valid counts and lanes that differ."""

    row: int
    a_count: int | None  # None: not returned (or not comparable)
    b_count: int | None
    oracle_count: int
    a_lanes: int | None  # lanes differing from the oracle; None: no comparable output
    b_lanes: int | None
    failing: bool
    first: bool  # the row the verdict's first mismatch names


@dataclass
class CaseReport:
    """Everything a report shows, built once; rendered to Markdown and HTML and
    written as verdict.json (``meta``)."""

    case_id: str
    status: Status
    verdict: Any  # compare.Verdict
    config: Any  # config.CaseConfig
    a: ImplementationInfo
    b: ImplementationInfo
    device: str
    replay: str
    run_command: str
    inputs_sha256: dict
    inputs_sha256_combined: str
    written: str
    seconds: dict = field(default_factory=dict)
    schedule: tuple[str, int] | None = None
    message: str | None = None  # crash or timeout: what happened (no outputs exist)
    # The diff (case reports with outputs only).
    shape: tuple[int, int] | None = None
    compacted: bool = False
    counts_returned: bool = False
    lanes: list = field(default_factory=list)  # [LaneValues]
    lanes_differing: int = 0
    rows: list = field(default_factory=list)  # [RowCounts]
    rows_differing: int = 0  # rows where a lane or the count differs
    rows_count_differs: int = 0  # rows whose count differs (A's or B's)
    png: bytes | None = None
    picture_note: str | None = None  # why there is no picture
    # What the outputs show when no value differs (the value sections are left out).
    values_line: str = ""
    # A rejection call's report: its id, what it changes, the precondition, the wrapper.
    call: dict | None = None

    @property
    def has_outputs(self) -> bool:
        return self.shape is not None

    @property
    def values_differ(self) -> bool:
        """Whether a lane or a count differs from the oracle's: only then do the value
        sections (lanes, counts, picture) appear."""
        return self.lanes_differing > 0 or self.rows_count_differs > 0

    @property
    def sections(self) -> list:
        """One section per check that failed (report_sections.py)."""

        return sections(self.verdict.failures)

    @property
    def png_base64(self) -> str | None:
        return None if self.png is None else base64.b64encode(self.png).decode()

    def meta(self) -> dict:
        """The content of verdict.json."""
        return {
            "format": REPORT_FORMAT,
            "case_id": self.case_id,
            "status": self.status.value,
            "verdict": self.verdict.to_dict(),
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "device": self.device,
            "inputs_sha256": self.inputs_sha256,
            "inputs_sha256_combined": self.inputs_sha256_combined,
            "seconds": self.seconds,
            "schedule": list(self.schedule) if self.schedule else None,
            "replay": self.replay,
            "run_command": self.run_command,
            "written": self.written,
        }


def _header(config, a: ImplementationInfo, b: ImplementationInfo, folder: Path, inputs, schedule=None) -> dict:
    """The fields every report shares, case or crash: identity, provenance, commands."""

    per, combined = hash_inputs(inputs)
    return {
        "case_id": config.case_id,
        "config": config,
        "a": a,
        "b": b,
        "inputs_sha256": per,
        "inputs_sha256_combined": combined,
        "replay": replay_command(folder, a, b),
        "run_command": run_command(config, a, b, schedule),
        "schedule": tuple(schedule) if schedule else None,
        "written": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def build_case_report(result, folder: Path, implementations: Sequence[Any] | None = None, schedule=None) -> CaseReport:
    """The model of ``result`` (a ``runner.CaseResult``) as reported in ``folder``."""
    import numpy as np
    import torch

    a_info, b_info = _infos(result, implementations)
    cfg, ref, verdict = result.config, result.reference, result.verdict
    report = CaseReport(
        status=Status(verdict.status),
        verdict=verdict,
        device=str(result.inputs.device.type),
        seconds={result.a.name: result.a.seconds, result.b.name: result.b.seconds},
        **_header(cfg, a_info, b_info, folder, _host_inputs(result.inputs), schedule),
    )
    t, k = ref.out.shape
    report.shape = (t, k)
    report.compacted = bool(cfg.compacts)
    report.counts_returned = bool(cfg.counts_returned)
    ref_out, ref_counts = ref.out.cpu(), ref.counts.cpu().to(torch.int64)

    def comparable(o):
        ok = o.error is None and isinstance(o.out, torch.Tensor) and tuple(o.out.shape) == (t, k)
        return o.out.cpu() if ok else None

    def counts_of(o):
        ok = isinstance(o.counts, torch.Tensor) and tuple(o.counts.shape) == (t,)
        return o.counts.cpu().to(torch.int64) if ok else None

    out_a, out_b = comparable(result.a), comparable(result.b)
    cnt_a, cnt_b = counts_of(result.a), counts_of(result.b)
    diff_a = None if out_a is None else out_a != ref_out
    diff_b = None if out_b is None else out_b != ref_out
    zeros = torch.zeros((t, k), dtype=torch.bool)
    union = (zeros if diff_a is None else diff_a) | (zeros if diff_b is None else diff_b)
    lanes_a = None if diff_a is None else diff_a.sum(dim=1)
    lanes_b = None if diff_b is None else diff_b.sum(dim=1)
    counts_bad = torch.zeros(t, dtype=torch.bool)
    for c in (cnt_a, cnt_b):
        if c is not None:
            counts_bad |= c != ref_counts
    row_bad = union.any(dim=1) | counts_bad
    report.lanes_differing = int(union.sum())
    report.rows_differing = int(row_bad.sum())
    report.rows_count_differs = int(counts_bad.sum())
    report.values_line = _values_line(((a_info.name, out_a, cnt_a), (b_info.name, out_b, cnt_b)), cfg.counts_returned)

    first = verdict.first
    first_row = first.row if first is not None and 0 <= first.row < t else None
    first_lane = (first.row, first.col) if first_row is not None and 0 <= first.col < k else None

    def value(out, r, c):
        return None if out is None else int(out[r, c])

    # The lane the verdict names comes first, then the other differing lanes in order.
    picked = [first_lane] if first_lane is not None else []
    for r, c in torch.nonzero(union)[: FIRST_MISMATCHES + 1].tolist():
        if (r, c) != first_lane and len(picked) < FIRST_MISMATCHES:
            picked.append((r, c))
    report.lanes = [
        LaneValues(r, c, value(out_a, r, c), value(out_b, r, c), int(ref_out[r, c]), (r, c) == first_lane)
        for r, c in picked
    ]

    # Rows: the verdict's, the worst failing ones, and a few passing ones for contrast.
    weight = union.sum(dim=1) + counts_bad.to(torch.int64)
    failing = [r for r in torch.nonzero(row_bad).flatten().tolist()]
    worst = sorted(failing, key=lambda r: (-int(weight[r]), r))[:WORST_ROWS]
    passing = [r for r in range(t) if not bool(row_bad[r])][:PASSING_ROWS]
    chosen = sorted(set(worst + passing + ([first_row] if first_row is not None else [])))

    def num(x, r):
        return None if x is None else int(x[r])

    report.rows = [
        RowCounts(r, num(cnt_a, r), num(cnt_b, r), int(ref_counts[r]), num(lanes_a, r), num(lanes_b, r),
                  bool(row_bad[r]), r == first_row)
        for r in chosen
    ]

    if not report.values_differ:
        return report  # no value sections, so no picture

    cols = torch.arange(k).expand(t, k)
    valid = cols < ref_counts.view(t, 1) if report.compacted else ref.valid.cpu()
    counts = {"oracle": ref_counts.numpy()}
    for info, c in ((a_info, cnt_a), (b_info, cnt_b)):
        if c is not None and not torch.equal(c, ref_counts):
            counts[info.name] = c.numpy()
    picture = charts.LaneMap(
        differs_a=None if diff_a is None else diff_a.numpy(),
        differs_b=None if diff_b is None else diff_b.numpy(),
        valid=np.asarray(valid.numpy(), bool),
        label_a=a_info.name,
        label_b=b_info.name if b_info.name != a_info.name else f"B ({b_info.name})",
        block_n=int(cfg.block_n),
        counts=counts,
        compacted=report.compacted,
        first=(first_row, first_lane[1] if first_lane else -1) if first_row is not None else None,
    )
    if out_a is None and out_b is None:
        report.picture_note = "No picture: neither implementation returned an output of the oracle's shape."
        return report
    try:
        report.png = charts.lane_png(picture)
    except PlotsUnavailable as exc:
        report.picture_note = str(exc)
    return report


def _values_line(sides, counts_returned: bool) -> str:
    """Said when no value differs: what each side's outputs are, truly — equal to the
    oracle's, or not there to compare (raised, or came back in another shape)."""
    parts = []
    for name, out, counts in sides:
        if out is None:
            parts.append(f"{name} returned no output of the oracle's shape to compare")
        elif counts_returned and counts is None:
            parts.append(f"{name}'s output equals the oracle's lane for lane; it returned no counts of the oracle's shape")
        else:
            parts.append(f"{name}'s output equals the oracle's lane for lane"
                         + (", and its valid counts too" if counts_returned else ""))
    return "No value differs from the oracle's: " + "; ".join(parts) + "."


def build_crash_report(config, a, b, message: str, folder: Path, device: str, status: Status, inputs) -> CaseReport:
    """The model of a case that produced no outputs: its worker died (``CRASH``) or it
    ran past its time limit (``TIMEOUT``)."""

    status = Status(status)
    a_info, b_info = ImplementationInfo.of(_named(a)), ImplementationInfo.of(_named(b))
    verdict = lost_verdict(config.case_id, status, f"{a_info.name}/{b_info.name}", message)
    return CaseReport(
        status=status, verdict=verdict, device=str(device), message=message,
        **_header(config, a_info, b_info, folder, inputs),
    )


def build_rejection_report(case, verdict, a, b, folder: Path, device: str, inputs) -> CaseReport:
    """The model of a rejection call's report (rejections.py): no outputs to compare;
    the verdict's rejects section holds what each side did with the call."""

    a_info, b_info = ImplementationInfo.of(_named(a)), ImplementationInfo.of(_named(b))
    header = _header(case.base, a_info, b_info, folder, inputs)
    header["case_id"] = case.case_id
    env = _env_prefix([a_info, b_info])
    # `run --rejection ID` makes rejections.toml's call: the same only when this is it.
    header["run_command"] = env + call_replay(case, a_info.pinned, b_info.pinned, str(device)) if _listed(case) else ""
    status = Status(verdict.status)
    lost = status in (Status.CRASH, Status.TIMEOUT) and verdict.first is not None
    return CaseReport(status=status, verdict=verdict, device=str(device),
                      message=verdict.first.message if lost else None,
                      call={"id": case.id, "what": case.what or case.id, "precondition": case.precondition,
                            "wrapper": case.wrapper},
                      **header)


def _listed(case) -> bool:
    try:
        return by_id(case.id) == case
    except ConfigError:
        return False


def write_rejection_report(case, verdict, a, b, root, device: str = "cpu", inputs=None) -> Path:
    """Write the report of rejection call ``case`` (a ``rejections.RejectionCase``)
    whose ``verdict`` is given to ``root/<case-id>/``: config.json holds the call as
    well as its base case, inputs.pt the base case's inputs (the call's changes are
    made from the call's data), outputs.pt nothing. ``remap-ab replay`` makes the call
    again. ``a``, ``b``: names, ``ImplementationInfo``s or loaded implementations."""
    import torch


    final, tmp = _begin(root, case.case_id)
    inputs = generate_inputs(case.base, device="cpu") if inputs is None else _host_inputs(inputs)
    report = build_rejection_report(case, verdict, a, b, final, device, inputs)
    (tmp / "config.json").write_text(json.dumps({"case_id": case.case_id, "config": case.base.to_dict(),
                                                 "rejection": case.to_dict()}, indent=2) + "\n")
    torch.save(inputs.tensors(), tmp / "inputs.pt")
    torch.save({}, tmp / "outputs.pt")
    _write_rendered(tmp, report)
    return _commit(tmp, final)


def _named(x):
    return ImplementationInfo(x) if isinstance(x, str) else x


def _infos(result, implementations) -> tuple[ImplementationInfo, ImplementationInfo]:
    if implementations is None:
        return ImplementationInfo(result.a.name), ImplementationInfo(result.b.name)
    a, b = implementations
    return ImplementationInfo.of(_named(a)), ImplementationInfo.of(_named(b))


# --------------------------------------------------------------------------- rendering


def mismatch_line(m) -> str:
    """One verdict failure as a line (``Mismatch.line``: it alone words every check)."""
    return m.line()


@functools.cache  # one per process: compiling the templates costs more than rendering them
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("remap_ab", "templates"),
        autoescape=lambda name: bool(name) and name.endswith(".html.j2"),
        undefined=StrictUndefined,  # a misspelt field fails the test suite, not a reader
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["plural"] = plural
    env.filters["differ"] = differ
    env.filters["count_rows"] = count_rows
    env.filters["mismatch_line"] = mismatch_line
    env.filters["dash"] = lambda v: "—" if v is None else v
    env.filters["md_cell"] = lambda v: str(v).replace("|", "\\|")
    env.filters["inline"] = _inline_code
    env.globals.update(FIRST_MISMATCHES=FIRST_MISMATCHES, WORST_ROWS=WORST_ROWS, Status=Status)
    return env


def _inline_code(text: str):
    """A section's paragraph as HTML: escaped, its `backticked` words as <code>."""
    import re

    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def render(report: CaseReport, fmt: str) -> str:
    """``report`` as ``"md"`` (Markdown) or ``"html"`` (self-contained HTML)."""
    return _environment().get_template(f"case.{fmt}.j2").render(r=report, cfg=report.config)


# --------------------------------------------------------------------------- writing


def write_case_report(result, root, *, schedule=None, implementations: Sequence[Any] | None = None) -> Path:
    """Write the report of ``result`` (a ``runner.CaseResult``) to ``root/<case-id>/``
    and return that folder.

    ``root`` is the folder that collects reports (a sweep's run folder, or any folder a
    test chooses); it is created if needed. An existing report of the same case there is
    replaced. The folder appears complete or not at all (written aside, then renamed).
    Call it for any result, passing or not; ``remap-ab replay <folder>`` replays it.

    ``schedule``: optional ``(policy, seed)`` of schedule.py under which the result was
    produced (CPU interpreter); it is recorded and replay runs under it again.
    ``implementations``: optional ``(a, b)``, each an ``ImplementationInfo`` or a loaded
    ``registry.Implementation``; without it the report knows A and B by name only (a
    module on a custom path then gets no PYTHONPATH hint in the replay command).
    """
    import torch

    final, tmp = _begin(root, result.config.case_id)
    report = build_case_report(result, final, implementations, schedule)
    _write_config_and_inputs(tmp, result.config, _host_inputs(result.inputs))
    outputs = {}
    for role, o in (("a", result.a), ("b", result.b), ("oracle", result.oracle)):
        if o is not None:
            outputs[role] = {"name": o.name, "out": _host(o.out), "counts": _host(o.counts), "error": o.error}
    ref = result.reference
    outputs["reference"] = {"out": _host(ref.out), "counts": _host(ref.counts), "lanes": _host(ref.lanes), "valid": _host(ref.valid)}
    torch.save(outputs, tmp / "outputs.pt")
    _write_rendered(tmp, report)
    return _commit(tmp, final)


def write_crash_report(config, a, b, message: str, root, device: str = "cpu", status: Status = Status.CRASH) -> Path:
    """The report of a case whose worker process died (``status`` CRASH) or that ran
    past its time limit (TIMEOUT): no outputs exist, so it holds the config, the
    inputs (regenerated: they are a function of the config) and the verdict.
    ``a`` and ``b``: names, ``ImplementationInfo``s or loaded implementations."""
    import torch


    final, tmp = _begin(root, config.case_id)
    inputs = generate_inputs(config, device="cpu")
    report = build_crash_report(config, a, b, message, final, device, status, inputs)
    _write_config_and_inputs(tmp, config, inputs)
    torch.save({}, tmp / "outputs.pt")
    _write_rendered(tmp, report)
    return _commit(tmp, final)


def _write_rendered(tmp: Path, report: CaseReport) -> None:
    (tmp / "verdict.json").write_text(json.dumps(report.meta(), indent=2) + "\n")
    if report.png is not None:
        (tmp / "lanes.png").write_bytes(report.png)
    (tmp / "diff.md").write_text(render(report, "md"))
    (tmp / "diff.html").write_text(render(report, "html"))
    script = tmp / "replay.sh"
    script.write_text("#!/bin/sh\n# Replays this case from its saved inputs; extra options go to remap-ab replay.\n"
                      + report.replay + ' "$@"\n')
    script.chmod(0o755)


def _begin(root, case: str) -> tuple[Path, Path]:
    """``(final, tmp)``: the report folder of ``case`` under ``root`` and the fresh
    folder it is written in first (``_commit`` renames it into place)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{case}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return root / case, tmp


def _commit(tmp: Path, final: Path) -> Path:
    """Replace ``final`` (if any) by the finished ``tmp``: a report appears whole."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def _write_config_and_inputs(tmp: Path, config, inputs) -> None:
    """config.json and inputs.pt (``inputs``: CaseInputs on the CPU)."""
    import torch

    (tmp / "config.json").write_text(json.dumps({"case_id": config.case_id, "config": config.to_dict()}, indent=2) + "\n")
    torch.save(inputs.tensors(), tmp / "inputs.pt")


def _host(t):
    return None if t is None else t.detach().cpu().contiguous()


def _host_inputs(inputs):
    return CaseInputs(**{k: _host(v) for k, v in inputs.tensors().items()})


def _env_prefix(infos: Sequence[ImplementationInfo]) -> str:
    entries = []
    for info in infos:
        if info.path_entry and info.path_entry not in entries:
            entries.append(info.path_entry)
    if not entries:
        return ""
    return f"PYTHONPATH={shlex.quote(os.pathsep.join(entries))}${{PYTHONPATH:+:$PYTHONPATH}} "


def _pins(infos: Sequence[ImplementationInfo]) -> str:
    """`` --repo R --a REV@SHA:PATH``: a revision's repository and full commit, so a
    replay re-reads that commit whatever the branch points at by then."""
    parts = []
    repos = [i.source["repo"] for i in infos if i.source and i.source.get("kind") == "git"]
    if repos:
        parts.append(f"--repo {shlex.quote(repos[0])}")
    for role, info in zip("ab", infos):
        if info.source and info.source.get("kind") == "git":
            parts.append(f"--{role} {shlex.quote(info.pinned)}")
    return "".join(" " + p for p in parts)


def replay_command(folder: Path, a, b) -> str:
    """The ``remap-ab replay`` line for the report in ``folder`` of ``a`` vs ``b``
    (names or ``ImplementationInfo``s: a recorded path entry becomes a PYTHONPATH, a
    revision is pinned to its commit)."""
    infos = [ImplementationInfo.of(_named(x)) for x in (a, b)]
    return f"{_env_prefix(infos)}remap-ab replay {shlex.quote(str(Path(folder).resolve()))}{_pins(infos)}"


def run_command(config, a, b, schedule: tuple[str, int] | None = None) -> str:
    """The ``remap-ab run`` line that reruns ``config`` through ``a`` and ``b`` (under
    ``schedule`` = (policy, seed) when given), with the PYTHONPATH a custom module needs."""
    infos = [ImplementationInfo.of(_named(x)) for x in (a, b)]
    repo = next((i.source["repo"] for i in infos if i.source and i.source.get("kind") == "git"), None)
    parts = [f"{_env_prefix(infos)}remap-ab run --a {shlex.quote(infos[0].pinned)} --b {shlex.quote(infos[1].pinned)}"
             + (f" --repo {shlex.quote(repo)}" if repo else ""), config.cli_args()]
    if schedule is not None:
        parts.append(f"--schedule {schedule[0]}:{schedule[1]}")
    return " ".join(p for p in parts if p)


# --------------------------------------------------------------------------- reading


class Report:
    """A report folder, read back and checked."""

    def __init__(self, folder: Path, config, meta: dict, inputs, rejection=None):
        self.folder = folder
        self.config = config  # a rejection call's report: the call's base case
        self.meta = meta
        self.inputs = inputs
        self.rejection = rejection  # rejections.RejectionCase, or None for a case

    @property
    def verdict(self):
        return Verdict.from_dict(self.meta["verdict"])

    @property
    def status(self) -> Status:
        return Status(self.meta["status"])

    @property
    def a(self) -> ImplementationInfo:
        return ImplementationInfo(**self.meta["a"])

    @property
    def b(self) -> ImplementationInfo:
        return ImplementationInfo(**self.meta["b"])

    @property
    def schedule(self) -> tuple[str, int] | None:
        s = self.meta.get("schedule")
        return (s[0], s[1]) if s else None


def load_report(path) -> Report:
    """Read a report folder (or a file inside one); ReportError, in one line naming the
    file and the field, when it is missing, incomplete or corrupt."""
    import torch

    from remap_ab import schema  # pydantic is loaded only when a file is read

    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    if not folder.is_dir():
        raise ReportError(f"no report at {path}")
    for name in ("config.json", "verdict.json", "inputs.pt"):
        if not (folder / name).is_file():
            raise ReportError(f"report {folder} is incomplete: {name} is missing")
    corrupt = "; the report is corrupt (write it again)"
    cdata = _read_json(folder, "config.json")
    schema.load(schema.config_file(tuple(FIELD_TYPES.items())), cdata, where=f"report {folder}: config.json",
                error=ReportError, remedy=corrupt)
    case_id, fields = cdata["case_id"], cdata["config"]
    try:
        config = CaseConfig.from_dict(fields)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ReportError(f"report {folder}: config.json field 'config' holds no valid configuration ({exc})") from None
    rejection = _rejection_of(folder, cdata, config)
    own_id = rejection.case_id if rejection is not None else config.case_id
    if case_id != own_id:
        what = "call" if rejection is not None else "configuration"
        raise ReportError(f"report {folder}: config.json says case {case_id} but its {what} is case {own_id}")
    meta = _read_json(folder, "verdict.json")
    schema.load(schema.VerdictFile, meta, where=f"report {folder}: verdict.json", error=ReportError, remedy=corrupt)
    if meta["case_id"] != own_id:
        raise ReportError(f"report {folder}: verdict.json field 'case_id' is {meta['case_id']} but config.json's case is {own_id}")
    try:
        tensors = torch.load(folder / "inputs.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 — torch.load raises many kinds on a damaged file; each is a corrupt report
        raise ReportError(f"report {folder}: inputs.pt cannot be read ({type(exc).__name__}); the report is corrupt") from None
    if not isinstance(tensors, dict) or not {"req_id", "block_table", "token_indices"} <= set(tensors):
        raise ReportError(f"report {folder}: inputs.pt does not hold the input tensors")
    if not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        raise ReportError(f"report {folder}: inputs.pt holds something other than tensors")
    try:
        inputs = CaseInputs(**tensors)
    except TypeError:
        raise ReportError(f"report {folder}: inputs.pt holds unexpected tensors ({', '.join(sorted(tensors))})") from None
    per, _ = hash_inputs(inputs)
    if per != meta["inputs_sha256"]:
        raise ReportError(f"report {folder}: inputs.pt does not match the sha256 recorded in verdict.json (corrupt or edited)")
    return Report(folder, config, meta, inputs, rejection)


def _rejection_of(folder: Path, cdata: dict, config):
    """The rejection call a report's config.json holds (None for a case's report)."""

    if "rejection" not in cdata:
        return None
    data = cdata["rejection"]
    try:
        case = RejectionCase.from_dict(data)
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"report {folder}: config.json field 'rejection' holds no valid rejection call "
                          f"({' '.join(str(exc).split())}); the report is corrupt") from None
    if case.base != config:
        raise ReportError(f"report {folder}: config.json field 'rejection' has another base case than field 'config'")
    return case


def _read_json(folder: Path, name: str) -> dict:
    try:
        data = json.loads((folder / name).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"report {folder}: {name} is not valid JSON ({type(exc).__name__}); the report is corrupt") from None
    except OSError as exc:
        raise ReportError(f"report {folder}: {name} cannot be read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ReportError(f"report {folder}: {name} holds a {type(data).__name__}, not an object; the report is corrupt")
    return data


def find_report(case_id: str, root) -> Path | None:
    """The newest report of ``case_id`` under ``root/*/``."""
    root = Path(root)
    if not root.is_dir():
        return None
    hits = [p for p in root.glob(f"*/{case_id}") if p.is_dir()]
    if not hits:
        return None
    return max(hits, key=lambda p: p.stat().st_mtime)
