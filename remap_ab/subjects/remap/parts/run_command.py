"""The remap's part of ``remap-ab run`` (``parts["run"]``, which ``commands/run.py`` composes
and runs): a case's options, one per ``CaseConfig`` field, and the run of
one case or of SPEC §6's rejection calls."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

from remap_ab import runtime
from remap_ab.errors import InputError, UsageError
from remap_ab.interpreter.schedule import POLICIES, interpreter_schedule
from remap_ab.options import (
    add_bisect,
    add_call_checks,
    add_device,
    add_full_tensors,
    add_implementations,
    add_memcheck,
    checked_output_dir,
)
from remap_ab.subjects.remap.case.config import FIELD_TYPES, CaseConfig, field_help
from remap_ab.subjects.remap.case.inputs import CaseInputs
from remap_ab.subjects.remap.grid import api_compat
from remap_ab.subjects.remap.judge import features, registry, rejections
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report.report import run_command, write_case_report, write_rejection_report

# The command's --help shows this between its own paragraphs.
DESCRIPTION = """\
The case is given by its configuration options; with --inputs, by a saved tensor file
(a dict of int32 tensors named req_id, block_table, token_indices and optionally
prefill_request_ids, prefill_starts). --report DIR writes a failing case's report folder
(diff.html, diff.md, verdict.json, replay.sh, ...) under DIR. Exit status: 0 pass, 1 fail
or error (or B's SPEC §1 signatures do not accept every call A's do: the header's api
line), 2 bad input."""


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per CaseConfig field (booleans get --x / --no-x); each option's help
    is the field's own documentation, so meaning, default and choices live in config.py."""
    group = parser.add_argument_group("case configuration")
    for f in fields(CaseConfig):
        flag = "--" + f.name.replace("_", "-")
        if FIELD_TYPES[f.name] is bool:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                               help=field_help(f.name))
        else:
            group.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(), type=str,
                               help=field_help(f.name))


def config_from_args(args: argparse.Namespace, base: CaseConfig | None = None) -> CaseConfig:
    """The CaseConfig the options name (over ``base``'s values when given)."""
    given = {f.name: getattr(args, f.name) for f in fields(CaseConfig) if getattr(args, f.name, None) is not None}
    merged = {**(base.to_dict() if base else {}), **given}
    return CaseConfig.from_dict(merged)


def add_arguments(p):
    add_implementations(p)
    add_device(p)
    p.add_argument("--inputs", metavar="PATH", help="run on tensors saved with torch.save instead of generated ones")
    p.add_argument(
        "--schedule",
        metavar="POLICY[:SEED]",
        help="CPU only: run the interpreter's programs in this order: row_major, reversed, random, tiles_reversed "
             "or tiles_rotated, with an optional integer seed (default: the interpreter's own row-major order)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--rejection", metavar="ID", action="append", default=None,
                   help="instead of a case, make a call that breaks a SPEC §6 precondition (an id of "
                        "remap_ab/subjects/remap/judge/rejections.toml, or 'all'): B must reject it where A does; repeatable")
    p.add_argument("--report", metavar="DIR", default=None,
                   help="if the case (or a --rejection call) does not pass, write its report folder DIR/<case-id>/ "
                        "(diff.html, diff.md, verdict.json, the rows that differ, replay.sh); nothing is written for a "
                        "passing one")
    add_full_tensors(p)
    add_memcheck(p)
    add_call_checks(p)
    add_bisect(p)
    add_config_arguments(p)


def main(args) -> int:
    if args.rejection:
        return _rejections(args)
    config = config_from_args(args)
    if args.report is not None:
        checked_output_dir(args.report, "--report")
    device = runtime.select(args.device)
    inputs = _load_inputs(args.inputs) if args.inputs else None
    schedule = _schedule(args.schedule, device) if args.schedule else None
    result = run_case(config, args.a, args.b, device=device, inputs=inputs, schedule=schedule, memcheck=args.memcheck,
                      production=device == "cuda" and args.call_checks != "off")
    v = result.verdict
    ran = _schedule_name(args.schedule, device)
    loaded = {role: registry.get(name).source for role, name in (("a", args.a), ("b", args.b))}
    api = api_compat.check(args.a, args.b)
    implementations = (registry.get(args.a), registry.get(args.b))
    again = _again_command(args, config, device, implementations)
    report_folder = None
    if args.report is not None and not v.passed:
        report_folder = write_case_report(result, args.report, schedule=_schedule_pair(args.schedule, device),
                                          implementations=implementations, inputs_generated=inputs is None,
                                          full_tensors=args.full_tensors)
    if args.json:
        json.dump(
            {"config": config.to_dict(), "inputs_sha256": result.inputs.sha256(), "schedule": ran,
             "implementations": {k: src.to_dict() if src else None for k, src in loaded.items()}, "verdict": v.to_dict(),
             "api": [d.to_dict() for d in api], "api_compatible": not api_compat.fails(api),
             "features": features.lines(registry.feature_plan(args.a, args.b), [config]),
             "run_again": again, "report": None if report_folder is None else str(report_folder)},
            sys.stdout, indent=2,
        )
        print()
    else:
        print(f"case {config.case_id}  ({args.a} vs {args.b}, oracle checked, on {device})")
        print(f"  config: {config.cli_args() or '(defaults)'}")
        for role, src in loaded.items():
            if src is not None:
                print(f"  {role.upper()} loaded: {src.line()}")
        print(f"  schedule: {ran}")
        print("\n".join("  " + line for line in api_compat.summary_lines(api, args.a, args.b)))
        print("\n".join("  " + line for line in features.lines(registry.feature_plan(args.a, args.b), [config])))
        shas = result.inputs.sha256()
        print("  inputs sha256 (first 16 hex digits): " + ", ".join(f"{k}={v[:16]}" for k, v in shas.items()))
        wrapper = "triton_convert_req_index_to_global_index" if config.mode == "convert" else "triton_filter_and_convert_dcp_index"
        for impl in (result.a, result.b):
            if impl.error is None:
                print(f"  {impl.name:>8}: {impl.seconds * 1e3:.1f} ms; order: {impl.contract.why}")
            else:  # it never returned: no time, no order to state
                print(f"  {impl.name:>8}: raised in {wrapper}")
        print(v.describe())
        if report_folder is not None:
            print(f"report: {report_folder / 'diff.html'}")
            print(f"replay: {json.loads((report_folder / 'verdict.json').read_text())['replay']}")
        elif args.report is not None:
            print("report: none written (the case passed)")
        print(f"run again: {again}")
    if any(m.impl == "oracle" and m.message.startswith("internal:") for m in v.failures):
        return 3  # the oracle disagreeing with itself is a remap-ab bug, not the implementations'
    return 0 if v.passed and not api_compat.fails(api) else 1


def _rejections(args) -> int:
    """``--rejection``: each named call through A and B, its verdict printed; with
    ``--report``, a folder for each call that does not pass."""

    if args.report is not None:
        checked_output_dir(args.report, "--report")
    device = runtime.select(args.device)
    names = [n for spec in args.rejection for n in spec.split(",") if n]
    cases = list(rejections.load()) if "all" in names else [rejections.by_id(n) for n in names]
    api = api_compat.check(args.a, args.b)
    impl_a, impl_b = registry.get(args.a), registry.get(args.b)
    verdicts, folders = [], []
    for c in cases:
        v = rejections.judged(c, impl_a, impl_b, device, args.memcheck)[0]
        verdicts.append(v)
        folder = None
        if args.report is not None and not v.passed:
            folder = write_rejection_report(c, v, impl_a, impl_b, args.report, device)
        folders.append(folder)
    if args.json:
        json.dump({"rejections": [{"call": c.to_dict(), "verdict": v.to_dict(), "report": None if f is None else str(f)}
                                  for c, v, f in zip(cases, verdicts, folders)],
                   "api": [d.to_dict() for d in api], "api_compatible": not api_compat.fails(api)}, sys.stdout, indent=2)
        print()
    else:
        print(f"{len(cases)} rejection call(s)  ({args.a} vs {args.b}, on {device})")
        print("\n".join("  " + line for line in api_compat.summary_lines(api, args.a, args.b)))
        for c, v, f in zip(cases, verdicts, folders):
            print(f"rejection {c.id}: " + v.describe())
            if f is not None:
                print(f"report: {f / 'diff.html'}")
        if args.report is not None and not any(folders):
            print("report: none written (every call passed)")
    return 0 if all(v.passed for v in verdicts) and not api_compat.fails(api) else 1


def _again_command(args, config, device: str, implementations) -> str:
    """The ``remap-ab run`` line that runs this very case again (the PYTHONPATH a custom
    module needs included)."""
    a, b = implementations
    return run_command(config, a, b, _schedule_pair(args.schedule, device), device=device,
                       inputs=str(args.inputs) if args.inputs else None, memcheck=args.memcheck)


def _schedule_pair(spec, device: str):
    if device != "cpu" or not spec:
        return None
    policy, _, seed = spec.partition(":")
    return (policy, int(seed or 0))


def _load_inputs(path: str):
    import torch


    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"input file {path} does not exist") from None
    except Exception as exc:
        raise InputError(f"cannot read input file {path} ({type(exc).__name__}); save a dict of int32 tensors with torch.save") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} holds a {type(data).__name__}, not a dict of tensors")
    if not all(isinstance(k, str) for k in data):
        raise InputError(f"{path} has non-string keys; save a dict of tensors named by their SPEC §2 names")
    known = {"req_id", "block_table", "token_indices", "prefill_request_ids", "prefill_starts"}
    missing = {"req_id", "block_table", "token_indices"} - set(data)
    if missing or set(data) - known:
        raise InputError(f"{path} must hold tensors named {', '.join(sorted(known))} (missing {', '.join(sorted(missing)) or 'none'})")
    return CaseInputs(**data)


def _schedule_name(spec, device: str) -> str:
    """Which program schedule ran, said plainly."""
    if device != "cpu":
        return "the GPU's own (not controlled)"
    if not spec:
        return "row_major (the interpreter's own order)"
    policy, _, seed = spec.partition(":")
    return f"{policy}:{int(seed or 0)}"


def _schedule(spec: str, device: str):
    if device != "cpu":
        raise UsageError("--schedule permutes the Triton interpreter's programs; it needs --device cpu")
    policy, _, seed = spec.partition(":")
    if policy not in POLICIES:
        raise UsageError(f"--schedule {policy!r} is not one of {', '.join(POLICIES)}")
    try:
        seed_value = int(seed or 0)
    except ValueError:
        raise UsageError(f"--schedule seed {seed!r} is not an integer") from None
    return lambda: interpreter_schedule(policy, seed_value)
