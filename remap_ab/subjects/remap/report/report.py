"""Failing-case reports: everything needed to read, and to replay, one case.

A report is a folder ``<root>/<case-id>/`` (``root`` is a run folder such as
``reports/<run>/``) holding:

  config.json   the CaseConfig (``CaseConfig.from_dict`` rebuilds it) and its case ID
  verdict.json  the verdict (``Verdict.to_dict``), implementations (name, module, the
                sys.path entry a custom module was imported from), device, the inputs'
                sha256 (checked on load), the replay command; ``inputs``: how the
                inputs come back (regenerated from config.json by the input generator
                of the recorded version, or read from ``inputs.pt.gz``); ``outputs``:
                each whole output tensor's shape, dtype and sha256, and how many rows
                differ
  rows.pt.gz    the rows where A, B and the oracle differ: their indices and A's, B's
                and the oracle's values there (torch.save, gzip), at most
                ROWS_BUDGET_BYTES of them: a folder's size does not grow with the case
  inputs.pt.gz  the input tensors, only where they cannot be regenerated (``run
                --inputs``) or on request (``--full-tensors``)
  outputs.pt.gz the whole outputs, only on request (``--full-tensors``): {"a"|"b"|
                "oracle": {"name", "out", "counts", "error"}, "reference": {"out",
                "counts", "lanes", "valid"}}
  diff.md       the readable diff: verdict; a section per check that failed, with its
                evidence (report_sections.py); when values differ, the first
                mismatching lanes with A/B/oracle values, per-row valid counts and
                the picture; the replay command
  diff.html     the same, self-contained, with the lane picture embedded
  lanes.png     the lane picture (when matplotlib is installed: ``remap-ab[plots]``)
  replay.sh     the one command that replays it

A rejection call's report (``write_rejection_report``) has no outputs; its
config.json also holds the call, so a replay makes the call again.

Format 1 reports (before ``inputs``/``outputs`` in verdict.json) kept the whole input
tensors in ``inputs.pt`` and the whole outputs in ``outputs.pt``; they still load.
Compression is gzip (stdlib zlib): on int32 index tensors it is several times faster
than lzma for about the same size, and any machine can unpack it.

One model, ``CaseReport``, is built once (from a ``runner.CaseResult``, a crash or
timeout, which have no outputs, or a rejection call's verdict) and rendered through the Jinja2 templates in
``remap_ab/subjects/remap/report/templates/``. What the report needs about implementations (their module and
import path) is handed in by the caller; this module never looks it up. Reading a
report back checks every JSON field against its ``schema.py`` model first.
"""

from __future__ import annotations

import base64
import datetime
import functools
import gzip
import io
import itertools
import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remap_ab import command_line
from remap_ab.errors import ConfigError, PlotsUnavailable, ReportError
from remap_ab.processes import background
from remap_ab.sources import Source, pinned_name
from remap_ab.status import Status, plural
from remap_ab.subjects.remap.case.config import FIELD_TYPES, CaseConfig
from remap_ab.subjects.remap.case.inputs import GENERATOR_VERSION, CaseInputs, generate_inputs, hash_inputs, hashing_started, tensor_sha256
from remap_ab.subjects.remap.judge import rejections
from remap_ab.subjects.remap.judge.compare import Verdict, count_rows, differ, lost_verdict
from remap_ab.subjects.remap.judge.rejections import RejectionCase, by_id
from remap_ab.subjects.remap.report import lane_picture
from remap_ab.subjects.remap.report.report_sections import sections

REPORT_FORMAT = 2  # 1: inputs.pt and outputs.pt held the whole tensors
ROWS_FILE = "rows.pt.gz"
INPUTS_FILE = "inputs.pt.gz"
OUTPUTS_FILE = "outputs.pt.gz"
# The kept rows' raw bytes (all sides together): about 170 rows at K=2048, so a folder
# stays a few MB however many rows differ. The rows the tables show are always kept.
ROWS_BUDGET_BYTES = 4 << 20
GZIP_LEVEL = 1  # index tensors are near-random: higher levels cost time for little
HOST_HASHERS = 4  # threads hashing the outputs of a folder that lie on the host (a CPU run's)
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
    # "a"/"b" -> [T] int64 on the host: each row's lanes that differ from the oracle's, for
    # a side with an output of its shape (the writer keeps those rows without comparing again)
    lanes_per_row: dict = field(default_factory=dict)
    png: bytes | None = None
    picture: Any = None  # lane_picture.LaneMap still to draw (``draw``): the png's source
    picture_note: str | None = None  # why there is no picture
    # What the outputs show when no value differs (the value sections are left out).
    values_line: str = ""
    # A rejection call's report: its id, what it changes, the precondition, the wrapper.
    call: dict | None = None
    # verdict.json's ``inputs`` and ``outputs`` (the writer fills them in).
    inputs_record: dict | None = None
    outputs_record: dict | None = None

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
            "inputs": self.inputs_record,
            "outputs": self.outputs_record,  # None: no outputs exist (a crash, a timeout, a rejection call)
            "seconds": self.seconds,
            "schedule": list(self.schedule) if self.schedule else None,
            "replay": self.replay,
            "run_command": self.run_command,
            "written": self.written,
        }


def _header(config, a: ImplementationInfo, b: ImplementationInfo, folder: Path, inputs, schedule=None,
            hashes: tuple[dict, str] | None = None) -> dict:
    """The fields every report shares, case or crash: identity, provenance, commands.
    ``hashes``: the inputs' ``hash_inputs``, where the caller has them already."""

    per, combined = hashes or hash_inputs(_host_inputs(inputs))
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


def build_case_report(result, folder: Path, implementations: Sequence[Any] | None = None, schedule=None,
                      draw_picture: bool = True) -> CaseReport:
    """The model of ``result`` (a ``runner.CaseResult``) as reported in ``folder``.
    ``draw_picture`` False leaves the picture in ``picture`` for ``draw``: all the
    model needs of the tensors is done, and what is left needs no device."""
    import torch

    a_info, b_info = _infos(result, implementations)
    cfg, ref, verdict = result.config, result.reference, result.verdict
    report = CaseReport(
        status=Status(verdict.status),
        verdict=verdict,
        device=str(result.inputs.device.type),
        seconds={result.a.name: result.a.seconds, result.b.name: result.b.seconds},
        **_header(cfg, a_info, b_info, folder, result.inputs, schedule, result.inputs_sha256),
    )
    t, k = ref.out.shape
    report.shape = (t, k)
    report.compacted = bool(cfg.compacts)
    report.counts_returned = bool(cfg.counts_returned)
    # Lanes are compared and reduced where the outputs are (a GPU's work stays there);
    # only per-row counts, a few lanes and the picture's cells move to the host.
    device = ref.out.device
    ref_out, ref_counts = ref.out, ref.counts.to(torch.int64)

    def comparable(o):
        ok = o.error is None and isinstance(o.out, torch.Tensor) and tuple(o.out.shape) == (t, k)
        return o.out.to(device) if ok else None

    def counts_of(o):
        ok = isinstance(o.counts, torch.Tensor) and tuple(o.counts.shape) == (t,)
        return o.counts.to(device, torch.int64) if ok else None

    out_a, out_b = comparable(result.a), comparable(result.b)
    cnt_a, cnt_b = counts_of(result.a), counts_of(result.b)
    diff_a = None if out_a is None else out_a != ref_out
    diff_b = None if out_b is None else out_b != ref_out
    zeros = torch.zeros((t, k), dtype=torch.bool, device=device)
    union = (zeros if diff_a is None else diff_a) | (zeros if diff_b is None else diff_b)
    lanes_a = None if diff_a is None else _per_row(diff_a).cpu()
    lanes_b = None if diff_b is None else _per_row(diff_b).cpu()
    report.lanes_per_row = {role: n for role, n in (("a", lanes_a), ("b", lanes_b)) if n is not None}
    counts_bad = torch.zeros(t, dtype=torch.bool, device=device)
    for c in (cnt_a, cnt_b):
        if c is not None:
            counts_bad |= c != ref_counts
    union_per_row = _per_row(union)
    lanes_bad = union_per_row > 0
    row_bad = lanes_bad | counts_bad
    report.lanes_differing = int(union_per_row.sum())
    report.rows_differing = int(row_bad.count_nonzero())
    report.rows_count_differs = int(counts_bad.count_nonzero())
    report.values_line = _values_line(((a_info.name, out_a, cnt_a), (b_info.name, out_b, cnt_b)), cfg.counts_returned)

    first = verdict.first
    first_row = first.row if first is not None and 0 <= first.row < t else None
    first_lane = (first.row, first.col) if first_row is not None and 0 <= first.col < k else None

    def value(out, r, c):
        return None if out is None else int(out[r, c])

    # The lane the verdict names comes first, then the other differing lanes in order.
    # (Only the first rows that differ are searched: nonzero over every lane of a large
    # case costs seconds.)
    picked = [first_lane] if first_lane is not None else []
    first_rows = torch.nonzero(lanes_bad).flatten()[: FIRST_MISMATCHES + 1]
    for i, c in torch.nonzero(union[first_rows])[: FIRST_MISMATCHES + 1].tolist():
        r = int(first_rows[i])
        if (r, c) != first_lane and len(picked) < FIRST_MISMATCHES:
            picked.append((r, c))
    report.lanes = [
        LaneValues(r, c, value(out_a, r, c), value(out_b, r, c), int(ref_out[r, c]), (r, c) == first_lane)
        for r, c in picked
    ]

    # Rows: the verdict's, the worst failing ones, and a few passing ones for contrast.
    weight = (union_per_row + counts_bad.to(torch.int64)).tolist()
    row_bad, counts_bad, ref_counts = row_bad.cpu(), counts_bad.cpu(), ref_counts.cpu()
    cnt_a, cnt_b = (None if c is None else c.cpu() for c in (cnt_a, cnt_b))
    failing = torch.nonzero(row_bad).flatten().tolist()
    worst = sorted(failing, key=lambda r: (-weight[r], r))[:WORST_ROWS]
    passing = torch.nonzero(~row_bad).flatten()[:PASSING_ROWS].tolist()
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

    cols = torch.arange(k, device=device).expand(t, k)
    valid = cols < ref.counts.to(torch.int64).view(t, 1) if report.compacted else ref.valid.to(device)
    counts = {"oracle": ref_counts.numpy()}
    for info, c in ((a_info, cnt_a), (b_info, cnt_b)):
        if c is not None and not torch.equal(c, ref_counts):
            counts[info.name] = c.numpy()
    first_mark = (first_row, first_lane[1] if first_lane else -1) if first_row is not None else None
    cells, valid_share, zoom = lane_picture.lane_cells(diff_a, diff_b, valid,
                                                 lane_picture.zoom_window((t, k), first_mark, report.compacted, counts["oracle"]))
    picture = lane_picture.LaneMap(
        shape=(t, k),
        cells=cells,
        valid_share=valid_share,
        zoom=zoom,
        label_a=a_info.name,
        label_b=b_info.name if b_info.name != a_info.name else f"B ({b_info.name})",
        block_n=int(cfg.block_n),
        counts=counts,
        compacted=report.compacted,
        first=first_mark,
    )
    if out_a is None and out_b is None:
        report.picture_note = "No picture: neither implementation returned an output of the oracle's shape."
        return report
    report.picture = picture
    if draw_picture:
        draw(report)
    return report


def draw(report: CaseReport) -> None:
    """The picture the model holds, drawn into ``png`` (or the reason there is none)."""
    if report.picture is None:
        return
    try:
        report.png = lane_picture.lane_png(report.picture)
    except PlotsUnavailable as exc:
        report.picture_note = str(exc)
    report.picture = None


def _per_row(differs):
    """Lanes set per row of a [T, K] bool tensor.

    A CPU sums bytes one at a time (0.3 s at 16384 x 2048); eight at a time instead:
    a row's lanes read as int64 words, 127 words added per group (each byte then
    holds a count of at most 127: no carry, no sign), the groups' bytes added last."""
    import torch

    t, k = differs.shape
    lanes = differs.view(torch.uint8)
    if k % 8 or lanes.storage_offset() % 8 or not lanes.is_contiguous():
        return lanes.sum(dim=1, dtype=torch.int64)
    words = lanes.view(torch.int64)
    n = k // 8 // 127 * 127
    groups = [words[:, :n].reshape(t, -1, 127).sum(dim=2)] if n else []
    if n < k // 8:
        groups.append(words[:, n:].sum(dim=1, keepdim=True))
    return torch.cat(groups, dim=1).view(torch.uint8).sum(dim=1, dtype=torch.int64)


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
    # `run --rejection ID` makes rejections.toml's call: the same only when this is it.
    header["run_command"] = (rejections.run_line(case, a_info.pinned, b_info.pinned, str(device),
                                         path_entries=_entries([a_info, b_info])) if _listed(case) else "")
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
    well as its base case, whose inputs are regenerated on replay (given ``inputs``
    are stored, compressed: they may be other than generated); the call's changes
    are made from the call's data. ``remap-ab replay`` makes the call again. ``a``,
    ``b``: names, ``ImplementationInfo``s or loaded implementations."""

    final, tmp = _begin(root, case.case_id)
    generated = inputs is None
    inputs = generate_inputs(case.base, device="cpu") if inputs is None else _host_inputs(inputs)
    report = build_rejection_report(case, verdict, a, b, final, device, inputs)
    (tmp / "config.json").write_text(json.dumps({"case_id": case.case_id, "config": case.base.to_dict(),
                                                 "rejection": case.to_dict()}, indent=2) + "\n")
    report.inputs_record = _write_inputs(tmp, case.base, inputs, generated, full_tensors=False)
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
        loader=PackageLoader("remap_ab.subjects.remap.report", "templates"),
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


def write_case_report(result, root, *, schedule=None, implementations: Sequence[Any] | None = None,
                      inputs_generated: bool | None = None, full_tensors: bool = False) -> Path:
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
    ``inputs_generated``: whether ``result``'s inputs are the configuration's generated
    ones (True: the sweep's, by construction), which a replay regenerates; False
    (``run --inputs``): they are stored, compressed; None: found out by generating them
    again here and comparing sha256.
    ``full_tensors``: also store the whole inputs and outputs, compressed.
    """

    final, tmp = _begin(root, result.config.case_id)
    report = build_case_report(result, final, implementations, schedule, draw_picture=False)
    _write_config(tmp, result.config)
    if inputs_generated is None:
        inputs_generated = hash_inputs(generate_inputs(result.config, device="cpu"))[0] == report.inputs_sha256
    report.inputs_record = _write_inputs(tmp, result.config, result.inputs, inputs_generated, full_tensors)
    report.outputs_record, digests = _write_outputs(tmp, result, report, full_tensors)
    report.lanes_per_row = {}  # the writer's alone, and no tensor crosses to a helper
    # The device's part is done. The outputs' digests are hashed on a host thread, and the
    # drawing and rendering need only the model: a run with helpers (a GPU sweep in its
    # own process) goes on judging meanwhile. Without a picture the rest costs less here
    # than handing it over.
    if report.picture is None:
        finish_case_report(tmp, final, report, digests.result())
    else:
        background.submit(finish_case_report, tmp, final, report, digests)
    return final


def finish_case_report(tmp: Path, final: Path, report: CaseReport, digests: dict | None = None) -> Path:
    """The rest of ``write_case_report``: the outputs' ``digests`` into the record, the
    picture, the pages and verdict.json into ``tmp``, then ``tmp`` renamed to ``final``."""
    if digests is not None and report.outputs_record is not None:
        for role, entry in report.outputs_record["roles"].items():
            entry["tensors"] = digests[role]
    draw(report)
    _write_rendered(tmp, report)
    return _commit(tmp, final)


def write_crash_report(config, a, b, message: str, root, device: str = "cpu", status: Status = Status.CRASH) -> Path:
    """The report of a case whose worker process died (``status`` CRASH) or that ran
    past its time limit (TIMEOUT): no outputs exist, so it holds the config, the
    inputs (regenerated: they are a function of the config) and the verdict.
    ``a`` and ``b``: names, ``ImplementationInfo``s or loaded implementations."""

    final, tmp = _begin(root, config.case_id)
    inputs = generate_inputs(config, device="cpu")
    report = build_crash_report(config, a, b, message, final, device, status, inputs)
    _write_config(tmp, config)
    report.inputs_record = _write_inputs(tmp, config, inputs, True, full_tensors=False)
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


_WRITES = itertools.count()  # this process's report writes: each its own folder aside


def _begin(root, case: str) -> tuple[Path, Path]:
    """``(final, tmp)``: the report folder of ``case`` under ``root`` and the fresh
    folder it is written in first (``_commit`` renames it into place). Each write has
    its own: a helper may still be finishing an earlier write of the same case (a batch
    judged again case by case)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{case}.tmp-{os.getpid()}-{next(_WRITES)}"
    if tmp.exists():  # left by a process of the same pid that died
        shutil.rmtree(tmp)
    tmp.mkdir()
    return root / case, tmp


def _commit(tmp: Path, final: Path) -> Path:
    """Replace ``final`` (if any) by the finished ``tmp``: a report appears whole."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def _write_config(tmp: Path, config) -> None:
    (tmp / "config.json").write_text(json.dumps({"case_id": config.case_id, "config": config.to_dict()}, indent=2) + "\n")


def _write_inputs(tmp: Path, config, inputs, generated: bool, full_tensors: bool) -> dict:
    """verdict.json's ``inputs`` (``inputs``: CaseInputs): generated ones are
    regenerated on replay from config.json, others (and all with ``full_tensors``)
    are written to INPUTS_FILE (moved to the host only then)."""
    record: dict[str, Any] = {"source": "generated" if generated else "stored", "generator_version": GENERATOR_VERSION,
                              "seed": int(config.seed), "file": None}
    if full_tensors or not generated:
        _save_compressed(_host_inputs(inputs).tensors(), tmp / INPUTS_FILE)
        record["file"] = INPUTS_FILE
    return record


def _write_outputs(tmp: Path, result, report: CaseReport, full_tensors: bool) -> tuple[dict, Future]:
    """ROWS_FILE, and verdict.json's ``outputs``: the rows kept (where any side's values
    or count differ from the oracle's, the rows the report's tables name first,
    ROWS_BUDGET_BYTES at most beyond those), and each whole output tensor's digest, which
    the returned future gives ({role: {name: digest}}) for ``finish_case_report``."""
    import torch

    ref = result.reference
    t, k = ref.out.shape
    sides = {role: o for role, o in (("a", result.a), ("b", result.b), ("oracle", result.oracle)) if o is not None}
    tensors: dict[str, dict] = {role: {"out": _tensor(o.out), "counts": _tensor(o.counts)} for role, o in sides.items()}
    tensors["reference"] = {"out": ref.out, "counts": ref.counts}
    same = _same_as_reference(tensors)

    def aligned(x, shape):
        return x is not None and tuple(x.shape) == shape

    # The oracle through its public API is kept only where it departs from its own reference.
    def departs(role):  # a tensor the reference has, other than the reference's (absent counts are no departure)
        return any(x is not None and (role, n) not in same for n, x in tensors[role].items())

    kept = [role for role in ("a", "b", "oracle", "reference") if role in tensors and (role != "oracle" or departs(role))]
    differs = torch.zeros(t, dtype=torch.bool, device=ref.out.device)
    ref_counts = ref.counts.to(torch.int64)
    for side in kept[:-1]:  # the reference last: itself
        out, counts = tensors[side]["out"], tensors[side]["counts"]
        if side in report.lanes_per_row:  # compared by build_case_report already
            differs |= report.lanes_per_row[side].to(differs.device) > 0
        elif aligned(out, (t, k)) and (side, "out") not in same:
            differs |= (out.to(ref.out.device) != ref.out).any(dim=1)
        if aligned(counts, (t,)):
            differs |= counts.to(ref.out.device).to(torch.int64) != ref_counts
    differing = torch.nonzero(differs).flatten().cpu().tolist()
    named = {c.row for c in report.rows if c.failing} | {lane.row for lane in report.lanes}
    first = [r for r in differing if r in named]
    row_bytes = sum(x.element_size() * (x.numel() // max(1, x.shape[0])) for role in kept
                    for x in (tensors[role]["out"], tensors[role]["counts"])
                    if aligned(x, (t, k)) or aligned(x, (t,))) or 1
    room = max(0, ROWS_BUDGET_BYTES // row_bytes - len(first))
    rest = [r for r in differing if r not in named][:room]
    rows = torch.tensor(sorted(first + rest), dtype=torch.int64)
    kept_values: dict = {}
    roles: dict = {}
    for role, by_name in tensors.items():
        o = sides.get(role)
        entry: dict = {"name": o.name if o is not None else None, "error": o.error if o is not None else None,
                       "tensors": None, "kept": []}  # the digests: finish_case_report's
        if role in kept:
            values = {}
            for name, x in by_name.items():
                if aligned(x, (t, k) if name == "out" else (t,)):
                    values[name] = x[rows.to(x.device)].cpu()  # a gather: a copy, not a view of the whole
                    entry["kept"].append(name)
            kept_values[role] = values
        roles[role] = entry
    record: dict[str, Any] = {"rows_file": None, "rows_differing": len(differing), "rows_kept": int(rows.numel()),
                              "full_file": None, "roles": roles}
    if len(rows):
        record["rows_file"] = ROWS_FILE
    # Compressing the rows and hashing the whole outputs is host work on host copies.
    digests = background.in_thread(_on_host, _hashing_started(tensors, same),
                                   {"rows": rows, "roles": kept_values} if len(rows) else None, tmp / ROWS_FILE)
    if full_tensors:
        whole: dict = {role: {"name": o.name, "out": _host(_tensor(o.out)), "counts": _host(_tensor(o.counts)),
                              "error": o.error} for role, o in sides.items()}
        whole["reference"] = {"out": _host(ref.out), "counts": _host(ref.counts), "lanes": _host(ref.lanes),
                              "valid": _host(ref.valid)}
        _save_compressed(whole, tmp / OUTPUTS_FILE)
        record["full_file"] = OUTPUTS_FILE
    return record, digests


def _tensor(x):
    """``x`` when an implementation returned a tensor there, else None."""
    import torch

    return x if isinstance(x, torch.Tensor) else None


def _on_host(digests: Callable[[], dict], kept: dict | None, rows_file: Path) -> dict:
    """``kept`` (the rows kept, if any) compressed into ``rows_file``, then the whole
    outputs' ``digests()``."""
    if kept is not None:
        _save_compressed(kept, rows_file)
    return digests()


def _same_as_reference(tensors: dict) -> set:
    """The ``(role, name)`` of the tensors ({role: {name: tensor or None}}) byte for byte
    the reference's: compared once, on the device, for the rows kept and the digests."""
    reference = tensors["reference"]
    return {(role, name) for role, by_name in tensors.items() if role != "reference"
            for name, x in by_name.items() if x is not None and _identical(x, reference.get(name))}


def _hashing_started(tensors: dict, same: set) -> Callable[[], dict]:
    """Start hashing the whole outputs ({role: {name: tensor or None}}); the function
    returned gives {role: {name: {"shape", "dtype", "sha256"} or None}}. A tensor in
    ``same`` (``_same_as_reference``) takes the reference's digest: hashing is most of
    the cost, comparing a fraction of it. The device's tensors are copied to the host
    here (``hashing_started``); the function may run on a host thread: it synchronises
    nothing with the device, so a call check in progress on the sweep's thread (sync
    debug "error", process-wide) does not make it raise. Host tensors are hashed by it,
    on a few threads (hashlib lets go of the GIL)."""
    hashed = {f"{role}.{name}": x for role, by_name in tensors.items() for name, x in by_name.items()
              if x is not None and (role, name) not in same}
    on_device = hashing_started([{key: x for key, x in hashed.items() if x.is_cuda}])
    on_host = {key: x for key, x in hashed.items() if not x.is_cuda}

    def digests() -> dict:
        (sha, _), = on_device()
        if on_host:
            with ThreadPoolExecutor(HOST_HASHERS) as threads:
                (host_sha, _), = hashing_started([on_host], threads)()
            sha = {**sha, **host_sha}
        out: dict = {role: {name: None for name in by_name} for role, by_name in tensors.items()}
        for key, x in hashed.items():
            role, name = key.split(".")
            out[role][name] = digest_of(x, sha[key])
        for role, name in same:
            out[role][name] = out["reference"][name]
        return out

    return digests


def _identical(x, y) -> bool:
    """What equal digests say: the same dtype, shape and values (on any device)."""
    import torch

    return y is not None and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.to(y.device), y)


def digest_of(x, sha256: str | None = None) -> dict:
    """A whole tensor as verdict.json records it: shape, dtype, sha256."""
    return {"shape": list(x.shape), "dtype": str(x.dtype), "sha256": sha256 or tensor_sha256(x)}


def _save_compressed(obj, path: Path) -> None:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as f:
        f.write(buffer.getbuffer())


def _load_compressed(folder: Path, name: str):
    """A file ``_save_compressed`` wrote, read (tensors only); ReportError if it cannot be."""
    import torch

    try:
        with gzip.open(folder / name, "rb") as f:
            data = f.read()
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ReportError(f"report {folder} is incomplete: {name} is missing") from None
    except Exception as exc:  # noqa: BLE001 — gzip and torch.load raise many kinds on a damaged file
        raise ReportError(f"report {folder}: {name} cannot be read ({type(exc).__name__}); the report is corrupt") from None


def _host(t):
    return None if t is None else t.detach().cpu().contiguous()


def _host_inputs(inputs):
    return CaseInputs(**{k: _host(v) for k, v in inputs.tensors().items()})


def _entries(infos: Sequence[ImplementationInfo]) -> list[str]:
    """The folders a custom module of A or B is imported from (the replay's PYTHONPATH)."""
    return [i.path_entry for i in infos if i.path_entry]


def _git_repo(infos: Sequence[ImplementationInfo]) -> str | None:
    """The repository a revision of A or B was read from (the first one's)."""
    return next((i.source["repo"] for i in infos if i.source and i.source.get("kind") == "git"), None)


def replay_command(folder: Path, a, b) -> str:
    """The ``remap-ab replay`` line for the report in ``folder`` of ``a`` vs ``b``
    (names or ``ImplementationInfo``s: a recorded path entry becomes a PYTHONPATH, a
    revision is pinned to its commit with its repository, so a replay re-reads that
    commit whatever the branch points at by then)."""
    infos = [ImplementationInfo.of(_named(x)) for x in (a, b)]
    pinned = [i.pinned if i.source and i.source.get("kind") == "git" else None for i in infos]
    return command_line.line("replay", str(Path(folder).resolve()), a=pinned[0], b=pinned[1], repo=_git_repo(infos),
                             path_entries=_entries(infos))


def replay_line(case, row: dict, folder, impls: Sequence[Any]) -> str:
    """A judged case's one replay line (``Subject.replay_line``): ``remap-ab replay`` of its
    report folder where it has one, else the ``remap-ab run`` line that makes it again (a
    rejection call's ``run --rejection ID``); A and B as loaded (``impls``), so a custom
    module's folder is the line's PYTHONPATH and a revision is pinned."""
    if row.get("report") and folder:
        return replay_command(Path(folder) / str(row["report"]), *impls)
    infos = [ImplementationInfo.of(impl) for impl in impls]
    if isinstance(case, RejectionCase):
        return command_line.line("run", "--rejection", case.id, a=infos[0].pinned, b=infos[1].pinned,
                                 repo=_git_repo(infos), path_entries=_entries(infos))
    return run_command(case, infos[0], infos[1])


def run_command(config, a, b, schedule: tuple[str, int] | None = None, *, device: str | None = None,
                inputs: str | None = None, memcheck: bool = False) -> str:
    """The ``remap-ab run`` line that reruns ``config`` through ``a`` and ``b`` (under
    ``schedule`` = (policy, seed) when given; on ``device``, from the saved ``inputs``,
    under ``--memcheck`` when given), with the PYTHONPATH a custom module needs."""
    infos = [ImplementationInfo.of(_named(x)) for x in (a, b)]
    return command_line.line("run", a=infos[0].pinned, b=infos[1].pinned, repo=_git_repo(infos),
                             case=config.cli_args(), schedule=schedule, device=device, inputs=inputs,
                             memcheck=memcheck, path_entries=_entries(infos))


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

    @property
    def inputs_from(self) -> str:
        """Where ``inputs`` came from, in words."""
        record = self.meta.get("inputs")
        if record is None or record["file"] is not None:
            return f"saved inputs of {self.folder}"
        return f"inputs regenerated from the configuration of {self.folder} (sha256 as saved)"

    @property
    def outputs(self) -> dict | None:
        """verdict.json's ``outputs`` (None: a format-1 report, or one without outputs)."""
        return self.meta.get("outputs")

    def kept_rows(self) -> dict:
        """The kept rows: ``{"rows": int64 [n], "roles": {role: {"out": [n, K],
        "counts": [n]}}}`` (empty roles where no row differs); ReportError where the
        file is missing, corrupt or disagrees with verdict.json."""
        import torch

        from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

        record = self.outputs
        if record is None:
            raise ReportError(f"report {self.folder} keeps no rows (written before format 2, or without outputs); "
                              "its outputs.pt, if any, holds the whole outputs")
        if record["rows_file"] is None:
            return {"rows": torch.zeros(0, dtype=torch.int64), "roles": {}}
        data = schema.load(schema.KeptRowsData, _load_compressed(self.folder, record["rows_file"]),
                           where=f"report {self.folder}: {record['rows_file']}", error=ReportError,
                           remedy="; the report is corrupt")
        rows = data.rows
        for role, values in data.roles.items():
            for name in ("out", "counts"):
                x = getattr(values, name)
                if x is not None and (x.shape[:1] != rows.shape or name not in record["roles"].get(role, {}).get("kept", ())):
                    raise ReportError(f"report {self.folder}: {record['rows_file']} holds {role}'s {name} that "
                                      "verdict.json does not list for its rows; the report is corrupt")
        if rows.numel() != record["rows_kept"]:
            raise ReportError(f"report {self.folder}: {record['rows_file']} holds {rows.numel()} rows, verdict.json says "
                              f"{record['rows_kept']}; the report is corrupt")
        return {"rows": rows, "roles": {role: {n: x for n, x in (("out", v.out), ("counts", v.counts)) if x is not None}
                                        for role, v in data.roles.items()}}

    def full_outputs(self) -> dict:
        """The whole outputs (--full-tensors), each tensor checked against the sha256
        verdict.json records; ReportError where there are none or they do not match."""
        from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

        record = self.outputs
        if record is None or record["full_file"] is None:
            raise ReportError(f"report {self.folder} holds no whole outputs; write it with --full-tensors")
        name = record["full_file"]
        data = schema.load(schema.FullOutputsData, _load_compressed(self.folder, name),
                           where=f"report {self.folder}: {name}", error=ReportError, remedy="; the report is corrupt").root
        whole = {role: {k: getattr(side, k) for k in type(side).model_fields if getattr(side, k) is not None}
                 for role, side in data.items()}
        for role, side in record["roles"].items():
            for tensor, digest in side["tensors"].items():
                x = whole.get(role, {}).get(tensor)
                if digest is not None and (x is None or tensor_sha256(x) != digest["sha256"]):
                    raise ReportError(f"report {self.folder}: {name}'s {role} {tensor} does not match the sha256 "
                                      "recorded in verdict.json (corrupt or edited)")
        return whole


def load_report(path) -> Report:
    """Read a report folder (or a file inside one); ReportError, in one line naming the
    file and the field, when it is missing, incomplete or corrupt."""
    import torch

    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    if not folder.is_dir():
        raise ReportError(f"no report at {path}")
    for name in ("config.json", "verdict.json"):
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
    version = meta.get("format", 1)
    if version > REPORT_FORMAT:
        raise ReportError(f"report {folder} has format {version}, newer than this remap-ab reads ({REPORT_FORMAT}); "
                          "replay it with the remap-ab that wrote it")
    named = [meta["outputs"][key] for key in ("rows_file", "full_file") if meta.get("outputs")]
    for name in [n for n in named if n is not None]:
        if not (folder / name).is_file():
            raise ReportError(f"report {folder} is incomplete: {name} is missing")
    record = meta.get("inputs")
    if record is None:  # format 1: the whole inputs in inputs.pt
        if not (folder / "inputs.pt").is_file():
            raise ReportError(f"report {folder} is incomplete: inputs.pt is missing")
        try:
            tensors = torch.load(folder / "inputs.pt", map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 — torch.load raises many kinds on a damaged file; each is a corrupt report
            raise ReportError(f"report {folder}: inputs.pt cannot be read ({type(exc).__name__}); the report is corrupt") from None
        inputs = _input_tensors(folder, "inputs.pt", tensors)
    elif record["file"] is not None:  # stored (run --inputs), or --full-tensors
        inputs = _input_tensors(folder, record["file"], _load_compressed(folder, record["file"]))
    elif record["source"] == "stored":
        raise ReportError(f"report {folder}: verdict.json says its inputs are stored but names no file; the report is corrupt")
    else:
        inputs = _regenerated(folder, config, meta)
    if record is None or record["file"] is not None:
        per, _ = hash_inputs(inputs)
        if per != meta["inputs_sha256"]:
            name = "inputs.pt" if record is None else record["file"]
            raise ReportError(f"report {folder}: {name} does not match the sha256 recorded in verdict.json (corrupt or edited)")
    report = Report(folder, config, meta, inputs, rejection)
    if report.outputs is not None:
        report.kept_rows()  # a few MB at most: a damaged file is found now, in one line
    return report


def _input_tensors(folder: Path, name: str, tensors) -> CaseInputs:
    """A file's input tensors, checked (schema.InputTensorsData, the required three)."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    where = f"report {folder}: {name}"
    if not isinstance(tensors, dict) or not {"req_id", "block_table", "token_indices"} <= set(tensors):
        raise ReportError(f"{where} does not hold the input tensors")
    checked = schema.load(schema.InputTensorsData, tensors, where=where, error=ReportError,
                          remedy="; the report is corrupt").root
    return CaseInputs(**checked)


def _regenerated(folder: Path, config, meta: dict) -> CaseInputs:
    """The inputs a format-2 report records by configuration and seed: generated again
    on the CPU, each tensor's sha256 checked against the recorded one."""
    record = meta["inputs"]
    inputs = _host_inputs(generate_inputs(config, device="cpu"))
    per, _ = hash_inputs(inputs)
    recorded = meta["inputs_sha256"]
    if per != recorded:
        name = next((n for n in sorted(set(per) | set(recorded)) if per.get(n) != recorded.get(n)), "?")
        then, now = record["generator_version"], GENERATOR_VERSION
        versions = f"written with generator version {then}, this remap-ab has version {now}" if then != now \
            else f"both generator version {now}: the generator changed without a version bump"
        again = meta.get("run_command") or "remap-ab run with the case's configuration"
        raise ReportError(f"report {folder}: the input generator changed since this report was written ({versions}; "
                          f"{name}'s sha256 is {str(per.get(name))[:16]}, recorded {str(recorded.get(name))[:16]}), "
                          "so its inputs cannot be regenerated bit-exactly; replay it with the remap-ab that wrote "
                          f"it, or run the case again for a new report: {again} --report DIR")
    return inputs


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
