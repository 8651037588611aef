"""``python -m remap_ab.subjects.topology TARGET [--a NAME] [--b NAME]``: an alias of
``remap-ab replay --subject topology TARGET [--a NAME] [--b NAME]`` (replay.py runs
both), on the default device and root. Exit 0: A, B and the oracle agree and every
property holds; 1: a mismatch, a property finding or a side that raised; 2: the target
or an implementation cannot be read (one line)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from remap_ab import runtime
from remap_ab.errors import RemapABError
from remap_ab.subjects.topology import replay

USAGE = ("python -m remap_ab.subjects.topology TARGET [--a NAME] [--b NAME] (TARGET: a report folder, a case's "
         "JSON text or a case ID; as remap-ab replay --subject topology)")
DEFAULT_ROOT = Path("reports")  # remap-ab's --root default (options.DEFAULT_ROOT, a driver's: not imported here)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, as every remap-ab error
        print(f"usage: {USAGE}: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m remap_ab.subjects.topology", add_help=False)
    parser.add_argument("target")
    parser.add_argument("--a", default=None)
    parser.add_argument("--b", default=None)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        target = replay.find(args.target, DEFAULT_ROOT)
        device = runtime.select()  # before the fused kernel is imported: the interpreter on a CPU
        return replay.replay(target, args.a, args.b, device)
    except RemapABError as exc:
        print(f"remap-ab: cannot replay this topology case: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
