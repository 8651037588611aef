"""The vocabularies every step of the flow shares, as enums.

Each is a ``StrEnum`` (``str()`` and f-strings give the plain word), so that a value
written to a CSV row, a JSON file or a report is the same plain word it always was
("pass", "prefix_set", ...), and reading one back is ``Status(text)``: an unknown word
raises ``ValueError`` at the edge that read it, instead of being carried along as a
seventh spelling."""

from __future__ import annotations

from enum import StrEnum
from typing import Optional


class Status(StrEnum):
    """The verdict of one case (or of one measured cell)."""

    PASS = "pass"  # every check ran and held
    FAIL = "fail"  # a check ran and found a difference the contract forbids
    ERROR = "error"  # an implementation raised, or returned something that is no output
    CRASH = "crash"  # the process running the case died (SIGSEGV, sticky CUDA error)
    TIMEOUT = "timeout"  # the case did not finish within --case-timeout


    @property
    def passed(self) -> bool:
        return self is Status.PASS


class Check(StrEnum):
    """Which check a failure comes from (a subject's ``Mismatch.check``): the contract
    checks any subject may run. A subject's checks of its own are a StrEnum in its
    package, read back beside these by ``check_named``."""

    OUT = "out"  # an output element differs from the oracle's
    COUNTS = "counts"  # a row's valid count differs
    PREFIX_SET = "prefix_set"  # a compacted prefix holds other values
    TAIL = "tail"  # an element past the count is not -1
    ORDER = "order"  # the prefix order breaks the implementation's order contract
    SHAPE = "shape"  # wrong shape, dtype, device or type of what came back
    ERROR = "error"  # the implementation raised
    MEMCHECK = "memcheck"  # an access outside every argument tensor (--memcheck)
    CRASH = "crash"
    TIMEOUT = "timeout"
    # The production contract beyond the values (SPEC §6 and how vLLM calls it).
    INPUTS_WRITTEN = "inputs_written"  # the call changed a byte of an input it was given
    ALIASED = "aliased"  # an output shares storage with an input
    LAYOUT = "layout"  # an output comes back with other strides than A's layout (row-major contiguous)
    REJECTS = "rejects"  # A rejects a call (a SPEC §6 precondition) that B accepts, or with another exception type
    GRAPH = "graph"  # the call cannot be captured in a CUDA graph, or its replay differs from an eager call
    SYNC = "sync"  # the call synchronises with the host (torch.cuda.set_sync_debug_mode "error")
    STREAM = "stream"  # outputs read on the caller's stream are not ready: work left on another stream
    BUFFERS = "buffers"  # a caller-owned output buffer not returned, or written around


def check_named(word: object, *own: type[StrEnum]) -> StrEnum:
    """The check ``word`` names: one of ``Check``'s, or of a subject's own (``own``: its
    StrEnums of checks beside ``Check``). ValueError listing every known word otherwise
    (its message is the list: ``one of out, counts, ...``)."""
    kinds: tuple[type[StrEnum], ...] = (Check, *own)
    members = [member for kind in kinds for member in kind]
    for member in members:
        if member.value == word:
            return member
    raise ValueError("one of " + ", ".join(member.value for member in members))


class Outcome(StrEnum):
    """A mutant's fate under one check (the kill matrix's cells)."""

    KILLED = "killed"
    SURVIVED = "survived"
    NOT_RUN = "not run"  # the check was not run (say so; never count it as a kill)
    EQUIVALENT = "equivalent"
    # A check that ran without reaching a verdict, and a mutant's overall fates that
    # are neither a kill nor a survival. None of them is ever counted as a kill.
    TIMEOUT = "timeout"  # the check ran out of time
    BROKEN = "broken"  # the check (or the generated mutant) failed: a harness or catalogue problem
    NO_WITNESS = "no witness"  # nothing showed the mutant changes an output: not counted
    NEEDS_GPU = "needs a GPU"  # survived here, and the catalogue says why only a GPU can show it



class SectionStatus(StrEnum):
    """How much of one bench section ran (the page says it beside each heading)."""

    COMPLETE = "complete"
    PARTIAL = "partial"  # the budget ran out part-way: the rows measured are kept
    NOT_RUN = "not run"
    ERROR = "error"



class CellStatus(StrEnum):
    """One bench cell: timed, or refused because the implementations disagreed."""

    TIMED = "timed"
    REFUSED = "refused"  # the agreement gate failed: nothing is timed that is wrong
    ERROR = "error"



class Repeatability(StrEnum):
    """nondet's rule for one implementation on one case over repeated runs."""

    OK = "ok"  # one output, as its order contract promises
    REPORTED = "reported"  # several outputs, allowed (tiled compaction): reported, not failed
    FAIL = "FAIL"  # a promise broken: column order varied, counts varied, raised, or off the SPEC


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """``"1 row"``, ``"2 rows"``, ``"0 rows"``; ``many`` where "s" is not the plural."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
