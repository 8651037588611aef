"""A sweep's settings, validated once into one frozen object (``SweepOptions``): made
from the command line (``from_args``) or by a caller (a history's pair, the bench), the
run-level part kept in run.json (``stored``) and read back by a resume (``resumed``), the
values the sweep decides (the canonical A and B, the device, workers, batch, timeout)
filled in by ``replaced``, which makes a new object, validated again; a batch is judged
with ``judge_settings``, which every worker receives whole (``pool.Job``)."""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, Field

from remap_ab import subjects
from remap_ab.report_cap import ALL
from remap_ab.schema import ReportCap, Strict
from remap_ab.subject import JudgeSettings
from remap_ab.sweep.run_folder import SIZE_KEY

# run.json's call_checks on the CPU, where none run (read back as the default).
NOT_RUN = "not run (no GPU)"


class SweepOptions(Strict):
    """What a sweep runs and how; None where the sweep decides (``Sweep.prepare``)."""

    # What the run is: run.json keeps these, a resume reads them back.
    subject: str = subjects.DEFAULT  # the kernel pair under test (subjects/)
    a: Optional[str] = None  # None: the subject's default A
    b: Optional[str] = None
    device: str = Field(default="auto", pattern="^(auto|cpu|cuda)$")  # options.DEVICES; prepare: cpu or cuda
    filters: tuple[str, ...] = Field(default=(), strict=False)  # a list given is kept as a tuple
    max_size: Optional[int] = Field(default=None, ge=1)  # the grid's size cap (the subject's select); None: every point
    grid_file: Optional[str] = None
    memcheck: bool = False
    call_checks: typing.Literal["sample", "all", "off"] = "sample"  # options.CALL_CHECKS
    reports: Optional[ReportCap] = None  # report_cap.py; None: report_cap.DEFAULT_REPORTS (with resume, the run's own)
    # How this session runs it (each invocation's own, a resume's too).
    workers: Optional[int] = None  # None: one per GPU / per CPU core; 0: in-process
    batch: Optional[int] = None
    case_timeout: Optional[float] = None  # None: run.DEFAULT_CASE_TIMEOUT
    root: str = "reports"
    run: Optional[str] = None
    resume: bool = False
    repair: bool = False  # with resume: re-run the rows that fail validation (run_folder.check_resumable)
    progress: bool = True

    # The run-level fields (run.json's), and those kept under another key.
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("subject", "a", "b", "device", "filters", "max_size", "grid_file",
                                             "memcheck", "call_checks", "reports")
    KEYS: ClassVar[dict[str, str]] = {"max_size": SIZE_KEY}
    # What a run did before run.json kept the field (a, b, device, filters and the cap
    # it always kept): the default subject, no memcheck, a report for every failing case.
    BEFORE_KEPT: ClassVar[dict[str, Any]] = {"subject": subjects.DEFAULT, "grid_file": None, "memcheck": False,
                                             "call_checks": "sample", "reports": ALL}
    # The fields whose argparse dest has another name (commands/sweep.py).
    ARGUMENTS: ClassVar[dict[str, str]] = {"filters": "filter", "grid_file": "grid"}

    @classmethod
    def from_args(cls, args: Any, **fixed: Any) -> SweepOptions:
        """The settings a command's arguments give (``--no-progress``: progress off), but
        ``fixed``: what the command decides itself (``remap-ab history``: each pair's resume)."""
        named = arguments(cls, args, cls.ARGUMENTS)
        return cls(**{**named, "progress": not vars(args).get("no_progress", False), **fixed})

    def replaced(self, **changes: Any) -> SweepOptions:
        """These settings with ``changes``: a new object, validated like the first."""
        return type(self).model_validate({**dict(self), **changes})

    def stored(self) -> dict[str, Any]:
        """The run-level settings as run.json keeps them, under their keys (``KEYS``;
        call_checks ``NOT_RUN`` off a GPU)."""
        fields = self.model_dump(include=set(self.RUN_FIELDS))
        fields["filters"] = list(self.filters)
        fields["call_checks"] = self.call_checks if self.device == "cuda" else NOT_RUN
        return {self.KEYS.get(f, f): fields[f] for f in self.RUN_FIELDS}

    def resumed(self, meta: dict) -> SweepOptions:
        """These settings with the run-level ones of ``meta`` (a run.json that
        run_folder.read_run_json checked); a key an older run lacks takes what that run did."""
        kept = {f: meta[self.KEYS.get(f, f)] for f in self.RUN_FIELDS if self.KEYS.get(f, f) in meta}
        if kept.get("call_checks") == NOT_RUN:
            kept["call_checks"] = "sample"
        return self.replaced(**{**self.BEFORE_KEPT, **kept})

    def judge_settings(self, folder: Optional[str]) -> JudgeSettings:
        """How a batch of this sweep is judged (the settings resolved: A and B named)."""
        assert self.a is not None and self.b is not None, "judge_settings before Sweep.prepare resolved A and B"
        return JudgeSettings(self.a, self.b, self.device, folder, self.memcheck, self.call_checks, self.reports)


def arguments(model: type[BaseModel], args: Any, renamed: dict[str, str]) -> dict[str, Any]:
    """The values of the argparse namespace ``args`` for ``model``'s fields that it has,
    by their dest (``renamed``: a field whose dest has another name)."""
    given = vars(args)
    return {f: given[renamed.get(f, f)] for f in model.model_fields if renamed.get(f, f) in given}
