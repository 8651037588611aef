"""Helpers the commands share: the case-configuration options (run), option parsing,
the environment record written beside every artifact, and chart drawing that never
costs the measurements (nondet, bench)."""

from __future__ import annotations

import argparse
import importlib
import platform
from dataclasses import fields
from types import ModuleType

from remap_ab import subjects
from remap_ab.errors import UsageError
from remap_ab.options import int_list  # noqa: F401 (the commands' list parser, defined with the options)
from remap_ab.subjects.remap.config import FIELD_TYPES, CaseConfig, field_help


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


def subject_part(name: str, part: str, command: str) -> ModuleType:
    """Module ``part`` of packaged subject ``name`` (remap_ab/subjects/NAME/PART.py), which
    ``command --subject NAME`` runs; UsageError for a subject without one."""
    subject = subjects.get(name)  # an unknown name: its one-line error
    if name not in subjects.NAMES:
        raise UsageError(f"--subject {name}: {command} runs the packaged subjects' {part} modules only "
                         f"({', '.join(subjects.NAMES)}); {subject.name} has no {part} module")
    return importlib.import_module(f"remap_ab.subjects.{name}.{part}")


def options_given(args: argparse.Namespace, allowed: frozenset) -> list[str]:
    """The options given a value other than their default, outside ``allowed`` (names
    as argparse keeps them): what a command's ``--subject`` run cannot honour."""
    defaults = getattr(args, "_option_defaults", {})
    return sorted(f"--{dest.replace('_', '-')}" for dest, default in defaults.items()
                  if dest not in allowed and getattr(args, dest, default) != default)


def environment(device: str) -> dict:
    import torch
    import triton

    env = {"device": device, "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
    return env


def draw_chart(draw, *args) -> str:
    """A chart that fails to draw must not cost the measurements: say so and go on."""
    try:
        return str(draw(*args))
    except Exception as exc:
        return f"no chart ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
