"""Failing-case reports: everything needed to read, and to replay, one case.

A report is a folder ``<root>/<case-id>/`` (``root`` is a run folder such as
``reports/<run>/``) holding:

  config.json   the CaseConfig (``CaseConfig.from_dict`` rebuilds it) and its case ID
  inputs.pt     the input tensors (torch.save of a dict of int32 CPU tensors)
  outputs.pt    each implementation's outputs: {"a"|"b"|"oracle": {"name", "out",
                "counts", "error"}}, plus "reference": the oracle's direct result
  verdict.json  the verdict (``Verdict.to_dict``), implementations, device, the inputs'
                sha256 (checked on load), the replay command
  diff.md       the readable diff: first mismatches with A/B/oracle values, mismatching
                lanes per row, the replay command
  diff.html     the same, self-contained, with a picture of where in [T, K] lanes differ
  replay.sh     the one command that replays it

The sweep writes one for every case that does not pass; the pytest property suite writes
the same thing for a failing example through ``write_case_report``.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import shlex
import shutil
import struct
import sys
import zlib
from pathlib import Path
from typing import Optional

from remap_ab.errors import ReportError

REPORT_FORMAT = 1
FIRST_MISMATCHES = 20
ROWS_SHOWN = 20


# --------------------------------------------------------------------------- writing


def write_case_report(result, root, *, schedule=None) -> Path:
    """Write the report of ``result`` (a ``runner.CaseResult``) to ``root/<case-id>/``
    and return that folder.

    ``root`` is the folder that collects reports (a sweep's run folder, or any folder a
    test chooses); it is created if needed. An existing report of the same case there is
    replaced. The folder appears complete or not at all (written aside, then renamed).
    Call it for any result, passing or not; the pytest property suite calls it for a
    failing example, and ``remap-ab replay <folder>`` replays what it wrote.

    ``schedule``: optional ``(policy, seed)`` of schedule.py under which the result was
    produced (CPU interpreter); it is recorded and replay runs under it again.
    """
    import torch

    from remap_ab.inputs import CaseInputs, hash_inputs

    cfg = result.config
    case = cfg.case_id
    final, tmp = _begin(root, case)
    host_inputs = CaseInputs(**{k: _host(v) for k, v in result.inputs.tensors().items()})
    _write_config_and_inputs(tmp, cfg, host_inputs)

    outputs = {}
    for role, o in (("a", result.a), ("b", result.b), ("oracle", result.oracle)):
        if o is None:
            continue
        outputs[role] = {
            "name": o.name,
            "out": _host(o.out),
            "counts": _host(o.counts),
            "error": o.error,
        }
    ref = result.reference
    outputs["reference"] = {"out": _host(ref.out), "counts": _host(ref.counts), "lanes": _host(ref.lanes), "valid": _host(ref.valid)}
    torch.save(outputs, tmp / "outputs.pt")

    per, combined = hash_inputs(host_inputs)
    replay = replay_command(final, result.a.name, result.b.name)
    meta = {
        "format": REPORT_FORMAT,
        "case_id": case,
        "status": result.verdict.status,
        "verdict": result.verdict.to_dict(),
        "a": _impl_meta(result.a.name),
        "b": _impl_meta(result.b.name),
        "device": str(result.inputs.device.type),
        "inputs_sha256": per,
        "inputs_sha256_combined": combined,
        "seconds": {result.a.name: result.a.seconds, result.b.name: result.b.seconds},
        "schedule": list(schedule) if schedule else None,
        "replay": replay,
        "run_command": run_command(cfg, result.a.name, result.b.name),
        "written": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    (tmp / "verdict.json").write_text(json.dumps(meta, indent=2) + "\n")
    diff = DiffData.from_result(result)
    (tmp / "diff.md").write_text(render_markdown(meta, cfg, diff))
    (tmp / "diff.html").write_text(render_html(meta, cfg, diff))
    _write_replay_script(tmp, "# Replays this case from its saved inputs; extra options go to remap-ab replay.\n" + replay)
    return _commit(tmp, final)


def write_crash_report(config, a: str, b: str, message: str, root, device: str = "cpu") -> Path:
    """The report of a case whose worker process died (no outputs exist): config,
    inputs (regenerated: they are a function of the config), verdict "crash"."""
    import torch

    from remap_ab.compare import Mismatch, Verdict
    from remap_ab.inputs import generate_inputs, hash_inputs

    case = config.case_id
    final, tmp = _begin(root, case)
    inputs = generate_inputs(config, device="cpu")
    _write_config_and_inputs(tmp, config, inputs)
    torch.save({}, tmp / "outputs.pt")
    verdict = Verdict(case, "crash", [Mismatch("crash", f"{a}/{b}", -1, -1, {}, 0, 0, message)])
    per, combined = hash_inputs(inputs)
    replay = replay_command(final, a, b)
    meta = {
        "format": REPORT_FORMAT,
        "case_id": case,
        "status": "crash",
        "verdict": verdict.to_dict(),
        "a": _impl_meta(a),
        "b": _impl_meta(b),
        "device": device,
        "inputs_sha256": per,
        "inputs_sha256_combined": combined,
        "seconds": {},
        "replay": replay,
        "run_command": run_command(config, a, b),
        "written": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    (tmp / "verdict.json").write_text(json.dumps(meta, indent=2) + "\n")
    text = (
        f"# case {case}: CRASH\n\nThe worker process running this case died: {message}\n\n"
        f"No outputs exist. Configuration: `{meta['run_command']}`\n\nReplay (in this process; it may crash):\n\n    {replay}\n"
    )
    (tmp / "diff.md").write_text(text)
    (tmp / "diff.html").write_text(
        f"<!doctype html><meta charset='utf-8'><title>case {case}: CRASH</title><pre>{html.escape(text)}</pre>\n"
    )
    _write_replay_script(tmp, replay)
    return _commit(tmp, final)


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


def _write_replay_script(tmp: Path, body: str) -> None:
    script = tmp / "replay.sh"
    script.write_text("#!/bin/sh\n" + body + ' "$@"\n')
    script.chmod(0o755)


def _host(t):
    return None if t is None else t.detach().cpu().contiguous()


def _impl_meta(name: str) -> dict:
    """Name, module and the sys.path folder it was imported from (for replay)."""
    from remap_ab import registry

    path = registry.BUILTIN.get(name, name)
    meta = {"name": name, "module": path, "path_entry": None}
    mod = sys.modules.get(path)
    file = getattr(mod, "__file__", None)
    if file and name not in registry.BUILTIN:
        folder = Path(file).resolve().parent
        if Path(file).name == "__init__.py":
            folder = folder.parent
        for _ in range(path.count(".")):
            folder = folder.parent
        meta["path_entry"] = str(folder)
    return meta


def _env_prefix(names) -> str:
    entries = []
    for n in names:
        entry = _impl_meta(n)["path_entry"]
        if entry and entry not in entries:
            entries.append(entry)
    if not entries:
        return ""
    joined = os.pathsep.join(entries)
    return f"PYTHONPATH={shlex.quote(joined)}${{PYTHONPATH:+:$PYTHONPATH}} "


def replay_command(folder: Path, a: str, b: str) -> str:
    """The ``remap-ab replay`` line for the report in ``folder`` of ``a`` vs ``b``."""
    return f"{_env_prefix([a, b])}remap-ab replay {shlex.quote(str(Path(folder).resolve()))}"


def run_command(config, a: str, b: str, schedule: Optional[tuple[str, int]] = None) -> str:
    """The ``remap-ab run`` line that reruns ``config`` through ``a`` and ``b`` (under
    ``schedule`` = (policy, seed) when given), with the PYTHONPATH a dotted module needs."""
    parts = [f"{_env_prefix([a, b])}remap-ab run --a {a} --b {b}", config.cli_args()]
    if schedule is not None:
        parts.append(f"--schedule {schedule[0]}:{schedule[1]}")
    return " ".join(p for p in parts if p)


# --------------------------------------------------------------------------- the diff


class DiffData:
    """Where and how the outputs depart from the oracle's, as plain Python data."""

    def __init__(self):
        self.shape = (0, 0)
        self.block_n = 0
        self.names: list = []  # [(role, name)] for a and b
        self.first: list = []  # rows of the first-mismatch table
        self.per_row: list = []  # (row, lanes differing per implementation...)
        self.masks: dict = {}  # role -> [T, K] bool tensor (CPU)
        self.counts_rows: dict = {}  # role -> rows whose count differs

    @classmethod
    def from_result(cls, result) -> "DiffData":
        import torch

        d = cls()
        ref = result.reference
        t, k = ref.out.shape
        d.shape = (t, k)
        d.block_n = result.config.block_n
        ref_out = ref.out.cpu()
        named = [("a", result.a), ("b", result.b)]
        d.names = [(role, o.name) for role, o in named]
        outs = {}
        for role, o in named:
            if o.error is None and isinstance(o.out, torch.Tensor) and tuple(o.out.shape) == (t, k):
                outs[role] = o.out.cpu()
                d.masks[role] = outs[role] != ref_out
            else:
                d.masks[role] = None
            if isinstance(o.counts, torch.Tensor) and tuple(o.counts.shape) == (t,):
                bad = torch.nonzero(o.counts.cpu() != ref.counts.cpu()).flatten().tolist()
                d.counts_rows[role] = bad
        # First mismatching lanes, in (row, col) order over both implementations.
        union = None
        for m in d.masks.values():
            if m is not None:
                union = m if union is None else union | m
        if union is not None and bool(union.any()):
            idx = torch.nonzero(union)[:FIRST_MISMATCHES].tolist()
            for r, c in idx:
                row = {"row": r, "col": c}
                for role, o in named:
                    row[o.name if o.name not in row else f"{role}:{o.name}"] = int(outs[role][r, c]) if role in outs else None
                row["oracle"] = int(ref_out[r, c])
                d.first.append(row)
            per = [m.sum(dim=1) if m is not None else torch.zeros(t, dtype=torch.int64) for m in d.masks.values()]
            total = sum(per)
            rows = torch.nonzero(total).flatten()
            order = sorted(rows.tolist(), key=lambda r: (-int(total[r]), r))[:ROWS_SHOWN]
            d.per_row = [(r, *[int(p[r]) for p in per]) for r in sorted(order)]
            d.rows_differing = int(rows.numel())
        else:
            d.rows_differing = 0
        return d


def _cfg_line(cfg) -> str:
    return cfg.cli_args() or "(defaults)"


def render_markdown(meta: dict, cfg, diff: DiffData) -> str:
    from remap_ab.compare import Verdict

    v = Verdict.from_dict(meta["verdict"])
    a, b = meta["a"]["name"], meta["b"]["name"]
    lines = [
        f"# case {meta['case_id']}: {v.status.upper()}",
        "",
        f"A = `{a}` ({meta['a']['module']}), B = `{b}` ({meta['b']['module']}), checked against the oracle on {meta['device']}.",
        "",
        f"Configuration: `{_cfg_line(cfg)}` (T={cfg.tokens}, K={cfg.topk}, BLOCK_N={cfg.block_n}).",
        "",
        "## Verdict",
        "",
    ]
    lines += [f"- **FAIL** {m.line()}" for m in v.failures] or ["- pass"]
    lines += [f"- info: {i}" for i in v.info]
    lines += ["", f"## First mismatching lanes (up to {FIRST_MISMATCHES}, output vs the oracle's)", ""]
    if diff.first:
        cols = list(diff.first[0].keys())
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for row in diff.first:
            lines.append("| " + " | ".join("—" if row[c] is None else str(row[c]) for c in cols) + " |")
    else:
        lines.append("No output lane differs from the oracle's (see the verdict: counts, error or shape).")
    for role, name in diff.names:
        if diff.counts_rows.get(role):
            rows = diff.counts_rows[role]
            lines.append(f"\nvalid counts of `{name}` differ in {len(rows)} rows: {', '.join(map(str, rows[:20]))}")
    if diff.per_row:
        lines += ["", f"## Mismatching lanes per row ({diff.rows_differing} rows differ; the {len(diff.per_row)} worst)", ""]
        lines.append("| row | " + " | ".join(n for _, n in diff.names) + " |")
        lines.append("|---|" + "---|" * len(diff.names))
        for entry in diff.per_row:
            lines.append("| " + " | ".join(map(str, entry)) + " |")
    lines += ["", "## Replay", "", "    " + meta["replay"], "", "or run the configuration afresh:", "", "    " + meta["run_command"], ""]
    return "\n".join(lines)


def render_html(meta: dict, cfg, diff: DiffData) -> str:
    from remap_ab.compare import Verdict

    e = html.escape
    v = Verdict.from_dict(meta["verdict"])
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>case {e(meta['case_id'])}: {e(v.status.upper())}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "code,pre{background:#f4f4f4;padding:2px 4px}.fail{color:#b00}.k{display:inline-block;width:1em;height:1em;"
        "vertical-align:middle;border:1px solid #999}img{image-rendering:pixelated;border:1px solid #999}</style>",
        "</head><body>",
        f"<h1>case {e(meta['case_id'])}: <span class='fail'>{e(v.status.upper())}</span></h1>",
        f"<p>A = <code>{e(meta['a']['name'])}</code>, B = <code>{e(meta['b']['name'])}</code>, checked against the "
        f"oracle on {e(meta['device'])}.<br>Configuration: <code>{e(_cfg_line(cfg))}</code> "
        f"(T={cfg.tokens}, K={cfg.topk}, BLOCK_N={cfg.block_n})</p>",
        "<h2>Verdict</h2><ul>",
    ]
    parts += [f"<li class='fail'>{e(m.line())}</li>" for m in v.failures] or ["<li>pass</li>"]
    parts += [f"<li>info: {e(i)}</li>" for i in v.info]
    parts.append("</ul>")
    parts.append(f"<h2>First mismatching lanes (up to {FIRST_MISMATCHES})</h2>")
    if diff.first:
        cols = list(diff.first[0].keys())
        parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
        for row in diff.first:
            parts.append("<tr>" + "".join(f"<td>{'—' if row[c] is None else e(str(row[c]))}</td>" for c in cols) + "</tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No output lane differs from the oracle's (see the verdict).</p>")
    for role, name in diff.names:
        if diff.counts_rows.get(role):
            rows = diff.counts_rows[role]
            parts.append(f"<p>valid counts of <code>{e(name)}</code> differ in {len(rows)} rows: {e(', '.join(map(str, rows[:20])))}</p>")
    if diff.per_row:
        parts.append(f"<h2>Mismatching lanes per row</h2><p>{diff.rows_differing} rows differ; the {len(diff.per_row)} worst:</p>")
        parts.append("<table><tr><th>row</th>" + "".join(f"<th>{e(n)}</th>" for _, n in diff.names) + "</tr>")
        for entry in diff.per_row:
            parts.append("<tr>" + "".join(f"<td>{x}</td>" for x in entry) + "</tr>")
        parts.append("</table>")
    picture = lane_picture(diff)
    if picture:
        uri, legend = picture
        (ra, na), (rb, nb) = diff.names
        parts.append(
            "<h2>Where lanes differ from the oracle</h2>"
            f"<p>Rows (T={diff.shape[0]}) top to bottom, columns (K={diff.shape[1]}) left to right; {e(legend)}. "
            f"<span class='k' style='background:#dc2828'></span> only {e(na)} "
            f"<span class='k' style='background:#2850dc'></span> only {e(nb)} "
            "<span class='k' style='background:#800080'></span> both "
            "<span class='k' style='background:#f0f0f0'></span> equal; grey lines: BLOCK_N tiles. "
            "In compacted rows an allowed reordering also shows here; the verdict says whether it is allowed.</p>"
            f"<img alt='lane differences' src='{uri}'>"
        )
    parts.append(f"<h2>Replay</h2><pre>{e(meta['replay'])}</pre><p>or run the configuration afresh:</p><pre>{e(meta['run_command'])}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def lane_picture(diff: DiffData, max_rows: int = 256, max_cols: int = 1024):
    """A data-URI PNG of the [T, K] lanes that differ (downsampled: a cell is marked
    when any lane in it differs), and a phrase saying how much each pixel covers."""
    import torch

    masks = [diff.masks.get(role) for role, _ in diff.names]
    if all(m is None for m in masks):
        return None
    t, k = diff.shape
    if t == 0 or k == 0:
        return None
    rh = -(-t // max_rows)  # lanes per cell, vertically and horizontally
    cw = -(-k // max_cols)
    rows, cols = -(-t // rh), -(-k // cw)

    def reduce(m):
        if m is None:
            return torch.zeros(rows, cols, dtype=torch.bool)
        padded = torch.zeros(rows * rh, cols * cw, dtype=torch.bool)
        padded[:t, :k] = m
        return padded.view(rows, rh, cols, cw).any(dim=3).any(dim=1)

    ma, mb = reduce(masks[0]), reduce(masks[1])
    sx = max(1, min(8, 1024 // cols))
    sy = max(1, min(16, 256 // rows))
    tile_cells = max(1, diff.block_n // cw) if diff.block_n else 0
    raw = bytearray()
    for r in range(rows):
        line = bytearray()
        ra, rb = ma[r].tolist(), mb[r].tolist()
        for c in range(cols):
            if ra[c] and rb[c]:
                px = b"\x80\x00\x80"
            elif ra[c]:
                px = b"\xdc\x28\x28"
            elif rb[c]:
                px = b"\x28\x50\xdc"
            else:
                px = b"\xf0\xf0\xf0"
            cell = px * sx
            if tile_cells and c % tile_cells == 0 and c and px == b"\xf0\xf0\xf0":
                cell = b"\xb0\xb0\xb0" + px * (sx - 1)
            line += cell
        for _ in range(sy):
            raw += b"\x00" + line
    png = _png(cols * sx, rows * sy, bytes(raw))
    import base64

    legend = f"one pixel block = {rh} row(s) x {cw} column(s)"
    return "data:image/png;base64," + base64.b64encode(png).decode(), legend


def _png(width: int, height: int, raw: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


# --------------------------------------------------------------------------- reading


class Report:
    """A report folder, read back and checked."""

    def __init__(self, folder: Path, config, meta: dict, inputs: dict):
        self.folder = folder
        self.config = config
        self.meta = meta
        self.inputs = inputs

    @property
    def verdict(self):
        from remap_ab.compare import Verdict

        return Verdict.from_dict(self.meta["verdict"])


def load_report(path) -> Report:
    """Read a report folder (or a file inside one); ReportError, in one line, when it is
    missing, incomplete or corrupt."""
    import torch

    from remap_ab.config import CaseConfig
    from remap_ab.errors import ConfigError
    from remap_ab.inputs import CaseInputs, hash_inputs

    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    if not folder.is_dir():
        raise ReportError(f"no report at {path}")
    for name in ("config.json", "verdict.json", "inputs.pt"):
        if not (folder / name).is_file():
            raise ReportError(f"report {folder} is incomplete: {name} is missing")
    try:
        cdata = json.loads((folder / "config.json").read_text())
        config = CaseConfig.from_dict(cdata["config"])
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ReportError(f"report {folder}: config.json is corrupt ({type(exc).__name__})") from None
    except ConfigError as exc:
        raise ReportError(f"report {folder}: config.json holds no valid configuration ({exc})") from None
    if cdata.get("case_id") != config.case_id:
        raise ReportError(
            f"report {folder}: config.json says case {cdata.get('case_id')} but its configuration is case {config.case_id}"
        )
    try:
        meta = json.loads((folder / "verdict.json").read_text())
        meta["verdict"]["status"]
        meta["a"]["name"], meta["b"]["name"]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ReportError(f"report {folder}: verdict.json is corrupt ({type(exc).__name__})") from None
    try:
        tensors = torch.load(folder / "inputs.pt", map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ReportError(f"report {folder}: inputs.pt cannot be read ({type(exc).__name__}); the report is corrupt") from None
    if not isinstance(tensors, dict) or not {"req_id", "block_table", "token_indices"} <= set(tensors):
        raise ReportError(f"report {folder}: inputs.pt does not hold the input tensors")
    try:
        inputs = CaseInputs(**tensors)
    except TypeError:
        raise ReportError(f"report {folder}: inputs.pt holds unexpected tensors ({', '.join(sorted(tensors))})") from None
    per, _ = hash_inputs(inputs)
    if per != meta.get("inputs_sha256"):
        raise ReportError(f"report {folder}: inputs.pt does not match the sha256 recorded in verdict.json (corrupt or edited)")
    return Report(folder, config, meta, inputs)


def find_report(case_id: str, root) -> Optional[Path]:
    """The newest report of ``case_id`` under ``root/*/``."""
    root = Path(root)
    if not root.is_dir():
        return None
    hits = [p for p in root.glob(f"*/{case_id}") if p.is_dir()]
    if not hits:
        return None
    return max(hits, key=lambda p: p.stat().st_mtime)
