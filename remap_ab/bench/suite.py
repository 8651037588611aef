"""Run a subject's bench sections in order within a time budget, writing the page and
its files after every section, so a run stopped by the budget (or killed) keeps all
that was measured before.

Each section fills a ``page.Section``: its tables, charts and one-line findings, and
a status that never claims more than was done: ``complete``; ``partial`` (the budget
ran out inside it: the note says how many cells were left); ``not run`` (needs a GPU,
or the budget was spent before it started); ``error`` (the exception, in one line).

A subject's suite subclasses ``Suite``: its ``TITLES`` and ``QUESTIONS`` (section key ->
text), ``GPU_ONLY`` keys, a method ``_section_KEY(section)`` per key, and optionally
``prepare()`` (once, before the first section) and ``around(key)`` (a context each
section runs in).
"""

from __future__ import annotations

import contextlib
import datetime
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from remap_ab.bench import page
from remap_ab.bench.page import Section
from remap_ab.bench.timing import Budget
from remap_ab.errors import UsageError, exception_line
from remap_ab.status import CellStatus, SectionStatus


def parse_sections(text: str, known: Sequence[str]) -> list:
    """The sections ``--sections`` names, in ``known``'s (run) order."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise UsageError("--sections is empty; name at least one of " + ", ".join(known))
    bad = [n for n in names if n not in known]
    if bad:
        raise UsageError(f"--sections {','.join(bad)}: unknown; choose from {', '.join(known)}")
    return [s for s in known if s in names]  # run order is fixed


class Suite:
    TITLES: dict = {}
    QUESTIONS: dict = {}
    GPU_ONLY: frozenset = frozenset()

    def __init__(self, sections: Sequence[str], device: str, budget_s: Optional[float], folder: Path, meta: dict,
                 say: Callable[[str], None] = print):
        self.keys = list(sections)
        self.device = device
        self.budget_s = budget_s
        self.folder = Path(folder)
        self.meta = dict(meta)
        self.say = say
        self.budget = Budget(budget_s, reserve_s=min(15.0, 0.1 * budget_s) if budget_s else 0.0)
        self.sections: list = []
        self.failed_checks = 0  # refused or post-timing-failed cells

    def prepare(self) -> None:
        """Run once before the first section."""

    def around(self, key: str) -> contextlib.AbstractContextManager:
        """The context section ``key`` runs in."""
        return contextlib.nullcontext()

    def run(self) -> list:
        self.meta.setdefault("started", datetime.datetime.now().isoformat(timespec="seconds"))
        self.meta["budget_s"] = self.budget_s
        self.meta["sections_asked"] = list(self.keys)
        on_gpu = self.device == "cuda"
        self.prepare()
        for key in self.keys:
            section = Section(key, self.TITLES[key], self.QUESTIONS[key])
            self.sections.append(section)
            start = time.monotonic()
            if key in self.GPU_ONLY and not on_gpu:
                section.note = "needs a CUDA device (torch sees none)"
            elif self.budget.exhausted:
                section.note = f"the time budget ({self.budget_s:.0f} s) was spent before it started"
            else:
                try:
                    with self.around(key):
                        getattr(self, f"_section_{key}")(section)
                except Exception as exc:  # one section's failure must not cost the others
                    section.status = SectionStatus.ERROR
                    section.note = f"error: {exception_line(exc)[:500]}"
                    self.say(f"[{key}] error: {exception_line(exc)[:300]}")
                    self.meta.setdefault("tracebacks", {})[key] = traceback.format_exc()[-3000:]
            section.seconds = time.monotonic() - start
            self.say(f"[{key}] {section.status} in {section.seconds:.1f} s" + (f": {section.note}" if section.note else ""))
            for f in section.findings:
                self.say(f"  - {f}")
            self.write()
        return self.sections

    def write(self) -> list:
        self.meta["elapsed_s"] = self.budget.elapsed()
        self.meta["failed_checks"] = self.failed_checks
        return page.write(self.folder, self.sections, self.meta)

    def _finish(self, section: Section, left: int, unit: str) -> None:
        if left:
            section.status = SectionStatus.PARTIAL
            section.note = (section.note + " " if section.note else "") + \
                f"stopped by the time budget: {left} {unit} not measured."
        else:
            section.status = SectionStatus.COMPLETE

    def _count_checks(self, rows) -> None:
        for r in rows:
            if r.get("status") in (CellStatus.REFUSED, CellStatus.ERROR) or r.get("verified_in_graph") is False:
                self.failed_checks += 1
