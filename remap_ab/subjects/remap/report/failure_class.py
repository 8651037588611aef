"""The remap's failure classes (``report_cap.py``): which failing cases one report
folder stands for, the verdict's first check × the wrapper path."""

from __future__ import annotations

from remap_ab.subjects.remap.case.config import CaseConfig

WORDS = "check × path"  # the class, as the summaries name it (report_cap.describe)


def path_name(config: CaseConfig) -> str:
    """The wrapper path a case takes, as the soak names it (``convert-prefill-counts``,
    ``dcp1``, ``dcp-compact-counts``...): the grid's path label where the grid has one."""
    if config.mode == "convert":
        name = "convert-prefill" if config.has_prefill else "convert"
    elif not config.is_dcp:
        name = "dcp1"
    else:
        name = "dcp-compact" if config.compact else "dcp-inplace"
    return name + ("-counts" if config.counts_returned else "")


def failure_class(config: CaseConfig, check) -> str:
    """``check × path``: the cases a report of one stands for."""
    return f"{check} × {path_name(config)}"


def slot_key(config: CaseConfig, check) -> str:
    """The class as a file-name-safe word, the report slots' key (``ReportSlots.claim_key``)."""
    return f"{check}.{path_name(config)}"
