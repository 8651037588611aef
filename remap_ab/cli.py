"""The ``remap-ab`` command line.

Each subcommand lives in ``remap_ab/commands/<name>.py`` and exposes
``add_arguments(parser)`` and ``main(args) -> int``; this file only dispatches, and
turns every ``RemapABError`` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import fields

from remap_ab.config import CaseConfig
from remap_ab.errors import RemapABError

COMMANDS = {
    "run": "run one case through two implementations and the oracle",
    "sweep": "run the grid of configurations (remap_ab/grid.toml) through A, B and the oracle",
    "replay": "re-run one case from its saved report (or its case ID) and print the verdict",
    "report": "summarise a finished sweep run",
    "mutants": "run the seeded-mutant catalogue against the suite and print the kill matrix",
    "nondet": "count distinct outputs over repeated runs (GPU: quiet/contended; CPU: permuted schedules)",
    "bench": "time old vs new inside CUDA graphs beside the pull request's figures (needs a GPU)",
    "soak": "run fresh random configurations beyond the grid through A, B and the oracle until a deadline",
}


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per CaseConfig field (booleans get --x / --no-x)."""
    group = parser.add_argument_group("case configuration (defaults: CaseConfig)")
    for f in fields(CaseConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            group.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(), type=str)


def config_from_args(args: argparse.Namespace, base: CaseConfig | None = None) -> CaseConfig:
    given = {f.name: getattr(args, f.name) for f in fields(CaseConfig) if getattr(args, f.name, None) is not None}
    merged = {**(base.to_dict() if base else {}), **given}
    return CaseConfig.from_dict(merged)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="remap-ab", description="bit-exact A/B testing of the sparse-MLA index remap")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"remap_ab.commands.{name}")
        p = sub.add_parser(name, help=help_text, description=(module.__doc__ or help_text).strip())
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        return int(args._main(args) or 0)
    except RemapABError as exc:
        print(f"remap-ab {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"remap-ab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
