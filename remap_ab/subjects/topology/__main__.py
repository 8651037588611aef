"""Replay one topology case: ``python -m remap_ab.subjects.topology '<case JSON>' [--a NAME]
[--b NAME]`` (the line every finding prints; ``--a``/``--b`` as the sweep's, default
``a`` and ``b``). Exit 0: A, B and the oracle agree and every property holds; 1: a
mismatch, a property finding or a side that raised; 2: the case or an implementation cannot be read."""

from __future__ import annotations

import argparse
import json
import sys

from remap_ab import runtime
from remap_ab.errors import RemapABError
from remap_ab.subjects.topology import calls
from remap_ab.subjects.topology.check import SideRaised, run_case
from remap_ab.subjects.topology.config import TopologyCase

USAGE = "python -m remap_ab.subjects.topology '<case JSON>' [--a NAME] [--b NAME] (the replay line a finding prints)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, as every remap-ab error
        print(f"usage: {USAGE}: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m remap_ab.subjects.topology", add_help=False)
    parser.add_argument("case")
    parser.add_argument("--a", default="a")
    parser.add_argument("--b", default="b")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        case = TopologyCase.from_json(args.case)
        device = runtime.select()  # before the fused kernel is imported: the interpreter on a CPU
        a, b = calls.resolve(args.a, "a"), calls.resolve(args.b, "b")
    except (ValueError, TypeError, json.JSONDecodeError, RemapABError) as exc:
        print(f"remap-ab: cannot replay this topology case: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    try:
        result = run_case(case, device, b_module=b.module, a_module=a.module)
    except SideRaised as exc:  # a verdict on that side, as the sweep records it
        print(f"case {case.key()}\n  ERROR {exc}\n  replay: {case.replay_command()}")
        return 1
    print("\n".join(result.lines()))
    return 1 if (result.mismatches or result.findings) else 0


if __name__ == "__main__":
    sys.exit(main())
