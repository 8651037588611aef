"""Which failing cases of a run get a full report folder.

Writing a report (inputs.pt, outputs.pt, pictures, Markdown and HTML) costs far
more than judging a case, so a broken B that fails every case would spend its run
writing hundreds of near-identical folders. Every case is still judged and has its row;
a full report folder goes to the first N failing cases of each *failure class* (the
subject's: the remap's is the verdict's first check × the wrapper path, the topology's
the check alone), ``--reports all`` to every one. Any other
case's report is one command away (the summary says which).

The count is kept in the run folder itself (``.report-slots/``: one file per report
slot, created exclusively), so worker processes share it without talking to each
other, and a resumed run goes on counting where the killed one stopped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

DEFAULT_REPORTS = 3
ALL = "all"
SLOTS_FOLDER = ".report-slots"

Cap = Union[int, str]  # N >= 0, or ALL


def parse_cap(text: str) -> Cap:
    """``--reports``'s value: a count (0 or more) or ``all``; ValueError otherwise."""
    if str(text).strip().lower() == ALL:
        return ALL
    n = int(text)
    if n < 0:
        raise ValueError(text)
    return n


def describe(cap: Cap, option: str = "--reports", subject: Any = None) -> str:
    """The policy in words, for the summaries; ``option``: the setting's name where the
    words are read (the pytest grid's own); ``subject``: whose failure classes, named by
    its ``failure_classes`` ("" or no subject: not named)."""
    if cap == ALL:
        return f"every failing case ({option} all)"
    classes = subject.failure_classes if subject is not None else ""
    return f"the first {cap} failing cases of each failure class" + (f" ({classes})" if classes else "")


class ReportSlots:
    """``claim_key(key, case_id)``: whether this failing case gets a report folder, at
    most ``cap`` per failure class (``key``, the subject's) across every process
    writing into ``folder``."""

    def __init__(self, folder, cap: Cap):
        self.folder = Path(folder)
        self.cap = cap
        self._full: dict = {}  # classes this process found full -> their holders: no more file system calls

    def claim_key(self, key: str, case_id: str) -> bool:
        """Whether case ``case_id`` of failure class ``key`` (a file-name-safe word) gets
        a slot: the first ``cap`` claims of a class win, one slot file each. A case that
        holds a slot already (run again by a resume: killed before its row was written,
        or its row dropped by ``--resume --repair``) keeps it."""
        if self.cap == ALL:
            return True
        if key in self._full:
            return case_id in self._full[key]
        slots = self.folder / SLOTS_FOLDER
        slots.mkdir(parents=True, exist_ok=True)
        holders = set()
        for i in range(int(self.cap)):
            try:
                fd = os.open(slots / f"{key}.{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    holders.add((slots / f"{key}.{i}").read_text().strip())
                except OSError:
                    pass
                if case_id in holders:
                    return True
                continue
            try:
                os.write(fd, case_id.encode() + b"\n")
            finally:
                os.close(fd)
            return True
        self._full[key] = holders
        return False


_SLOTS: dict = {}


def slots(folder, cap: Optional[Cap]) -> Optional[ReportSlots]:
    """This process's ``ReportSlots`` of ``folder`` (None: no cap, every case a folder)."""
    if cap is None or cap == ALL:
        return None
    key = (str(Path(folder).resolve()), cap)
    if key not in _SLOTS:
        _SLOTS[key] = ReportSlots(folder, cap)
    return _SLOTS[key]


def claim(folder, cap: Optional[Cap], key: str, case_id: str) -> bool:
    """Whether failing case ``case_id`` of failure class ``key`` gets a report folder
    under ``folder``: every one for ``cap`` None or ``all``, else one of the first ``cap``
    slots of its class (``key`` made file-name safe). Every subject's one question."""
    held = slots(folder, cap)
    return held is None or held.claim_key(key.replace(":", "-").replace("/", "-"), case_id)
