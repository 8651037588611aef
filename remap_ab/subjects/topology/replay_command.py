"""The topology's part of ``remap-ab replay`` (``commands/replay.py`` runs it through
``parts["replay"]``): ``remap-ab replay --subject topology TARGET``, TARGET a report
folder (or a file in it), a case's JSON text or a case ID looked up under --root, judged
again by replay.py (A, B, the oracle and every property) beside a folder's saved
verdict. Exit 0 the case passes, 1 it does not, 2 bad input (one line)."""

from __future__ import annotations

from pathlib import Path

from remap_ab import runtime
from remap_ab.errors import UsageError
from remap_ab.subjects.topology import replay


def main(args) -> int:
    if args.memcheck:
        raise UsageError("--memcheck: the topology subject has no memory check (the sanitizer takes the remap's "
                         "cases only); drop it")
    target = replay.find(args.target, Path(args.root))
    device = runtime.select(args.device)  # before B's module is imported: the interpreter on a CPU
    return replay.replay(target, args.a, args.b, device, getattr(args, "repeat", None), args.target)
