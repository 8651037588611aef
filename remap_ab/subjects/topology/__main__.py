"""Replay one topology case: ``python -m remap_ab.subjects.topology '<case JSON>'``
(the line every finding prints). Exit 0: A, B and the oracle agree and every property
holds; 1: a mismatch or a property finding; 2: the case cannot be read."""

from __future__ import annotations

import json
import sys

from remap_ab import runtime
from remap_ab.errors import BackendError
from remap_ab.subjects.topology.check import run_case
from remap_ab.subjects.topology.config import TopologyCase


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m remap_ab.subjects.topology '<case JSON>' (the replay line a finding prints)", file=sys.stderr)
        return 2
    try:
        case = TopologyCase.from_json(args[0])
        device = runtime.select()  # before the fused kernel is imported: the interpreter on a CPU
    except (ValueError, TypeError, json.JSONDecodeError, BackendError) as exc:
        print(f"remap-ab: cannot replay this topology case: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    result = run_case(case, device)
    print("\n".join(result.lines()))
    return 1 if (result.mismatches or result.findings) else 0


if __name__ == "__main__":
    sys.exit(main())
