"""The bench page: every section's tables and charts in one self-contained HTML file
(charts embedded), beside machine-readable copies.

Files written into the output folder (the same three every time; rewritten after each
section completes, so a run cut short leaves everything measured so far):

  index.html    the page (Jinja2 template ``templates/bench.html.j2``; charts inline)
  results.json  every section: status, note, findings, tables (rows), run metadata
  tables.zip    one CSV per table and one PNG per chart

Jinja2 earns its place by keeping markup out of Python and escaping every value it
prints (torch already depends on it, so it costs no install).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import os
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from remap_ab.bench import figures
from remap_ab.status import SectionStatus

PAGE = "index.html"
RESULTS = "results.json"
ARCHIVE = "tables.zip"
FILES = (PAGE, RESULTS, ARCHIVE)
STATUSES = tuple(SectionStatus)


@dataclass
class Table:
    key: str  # file-safe name, e.g. "contention"
    title: str
    rows: list
    columns: Optional[list] = None  # default: keys of the first row, in order
    caption: str = ""

    def header(self) -> list:
        if self.columns:
            return list(self.columns)
        seen: list = []
        for r in self.rows:
            for k in r:
                if k not in seen:
                    seen.append(k)
        return seen


@dataclass
class Chart:
    key: str
    title: str
    png: Optional[bytes] = None

    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode() if self.png else ""


@dataclass
class Section:
    key: str
    title: str
    question: str = ""
    status: SectionStatus = SectionStatus.NOT_RUN
    note: str = ""
    findings: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    charts: list = field(default_factory=list)
    seconds: float = 0.0

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"section status {self.status!r} is not one of {STATUSES}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["charts"] = [{"key": c.key, "title": c.title, "drawn": c.png is not None} for c in self.charts]
        return d


def fmt(value) -> str:
    """How a table cell reads: floats to 3 significant digits (2 decimals above 10),
    NaN/None as an em dash, booleans as yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "—"
        if value == 0:
            return "0"
        if abs(value) >= 10:
            return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.4g}"
        return f"{value:.3g}"
    return str(value)


def _json_default(o):
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return None
    return str(o)


def _clean(o):
    """NaN/inf -> None (JSON has no NaN), recursively."""
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def table_csv(t: Table) -> str:
    buf = io.StringIO()
    header = t.header()
    w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore")
    w.writeheader()
    for r in t.rows:
        w.writerow({k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v) for k, v in r.items()})
    return buf.getvalue()


def render(sections: list, meta: dict) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    env.filters["fmt"] = fmt
    template = env.get_template("bench.html.j2")
    return template.render(sections=sections, meta=meta, charts_available=figures.available(),
                           install_hint=figures.INSTALL_HINT, files=FILES)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write(folder: Path, sections: list, meta: dict) -> list:
    """Write the three files (FILES) into ``folder``; returns their paths."""
    folder = Path(folder)
    results = {"meta": _clean(meta), "sections": [_clean(s.to_dict()) for s in sections]}
    _atomic_write(folder / RESULTS, (json.dumps(results, indent=1, default=_json_default) + "\n").encode())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for s in sections:
            for t in s.tables:
                z.writestr(f"{s.key}-{t.key}.csv", table_csv(t))
            for c in s.charts:
                if c.png:
                    z.writestr(f"{s.key}-{c.key}.png", c.png)
    _atomic_write(folder / ARCHIVE, buf.getvalue())
    _atomic_write(folder / PAGE, render(sections, meta).encode())
    return [folder / f for f in FILES]
