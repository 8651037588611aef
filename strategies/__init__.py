"""Hypothesis strategies for remap-ab cases, and what the property suite needs
around them: equivalence classes, regressions, replay commands.

Public surface (everything else is internal):

    case_configs(...)             any valid CaseConfig, narrowed by keyword
    caller_configs(...)           a call exactly as an attention backend makes it (CALLS)
    tiled_compaction_configs()    DCP compaction with two or more tiles per row
    single_tile_configs()         counting cases at power-of-two K (new: one program a row)
    shapes(), invalid_ratios(), interleaves(block_size), schedules()
    case_classes(config), record_classes(config, result), REQUIRED_CLASSES
    regressions(*names), REGRESSIONS
    replay_command(config, a, b, schedule), failure_message(result, headline, ...)
    drawn_examples(test), coverage_of(tests)   what a @given test draws, and its classes

Sizes follow the active profile (``remap_ab.properties.profiles``): the same strategy draws
16-token cases on the interpreter and 1024-token ones on a GPU.
"""

from .classes import REQUIRED_CLASSES, case_classes, record_classes
from .configs import (
    CALLS,
    NON_POW2_TOPKS,
    POW2_TOPKS,
    SCHEDULE_POLICIES,
    TOPKS,
    caller_configs,
    case_configs,
    interleaves,
    invalid_ratios,
    schedules,
    shapes,
    single_tile_configs,
    tiled_compaction_configs,
)
from .coverage import ClassCoverage, coverage_of, drawn_examples
from .regressions import REGRESSIONS, regressions
from .replay import failure_message, replay_command, write_failure_report, write_rejection_failure_report

__all__ = [
    "CALLS",
    "caller_configs",
    "ClassCoverage",
    "coverage_of",
    "drawn_examples",
    "NON_POW2_TOPKS",
    "POW2_TOPKS",
    "REGRESSIONS",
    "REQUIRED_CLASSES",
    "SCHEDULE_POLICIES",
    "TOPKS",
    "case_classes",
    "case_configs",
    "failure_message",
    "interleaves",
    "invalid_ratios",
    "record_classes",
    "regressions",
    "replay_command",
    "schedules",
    "shapes",
    "single_tile_configs",
    "tiled_compaction_configs",
    "write_failure_report",
    "write_rejection_failure_report",
]
