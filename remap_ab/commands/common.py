"""Helpers the commands share: a subject's part of a command (its options and run),
option parsing, the environment record written beside every artifact, and chart
drawing that never costs the measurements (nondet, bench)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import platform
from types import ModuleType

from remap_ab import options, subjects
from remap_ab.errors import RemapABError, UsageError


def subject_part(name: str, part: str, command: str) -> ModuleType:
    """Module ``part`` of packaged subject ``name`` (remap_ab/subjects/NAME/PART.py), which
    ``command --subject NAME`` runs; UsageError for a subject without one."""
    subject = subjects.get(name)  # an unknown name: its one-line error
    if name not in subjects.NAMES:
        raise UsageError(f"--subject {name}: {command} runs the packaged subjects' {part} modules only "
                         f"({', '.join(subjects.NAMES)}); {subject.name} has no {part} module")
    module = f"remap_ab.subjects.{name}.{part}"
    if importlib.util.find_spec(module) is None:
        having = [n for n in subjects.NAMES if importlib.util.find_spec(f"remap_ab.subjects.{n}.{part}") is not None]
        raise UsageError(f"--subject {name}: {command} has no part for this subject (no remap_ab/subjects/{name}/"
                         f"{part}.py); {command} takes --subject {', '.join(having) or 'none'}")
    return importlib.import_module(module)


def subject_named(words: list[str]) -> str:
    """The subject the command line's words name with ``--subject`` (the default without)."""
    first = argparse.ArgumentParser(add_help=False)
    options.add(first, options.SUBJECT)
    known, _ = first.parse_known_args(words)
    return known.subject


def compose_subject_part(p: argparse.ArgumentParser, name: str, part: str, command: str,
                         doc: str) -> ModuleType | None:
    """The part ``part`` of subject ``name`` (None where it has none: the command's main
    says so in one line), its DESCRIPTION set between the first paragraph of the
    command's ``doc`` and the rest, as ``p``'s --help description."""
    try:
        module: ModuleType | None = subject_part(name, part, command)
    except RemapABError:
        module = None
    head, _, tail = doc.strip().partition("\n\n")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.description = "\n\n".join(x for x in (head, getattr(module, "DESCRIPTION", ""), tail) if x)
    return module


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
