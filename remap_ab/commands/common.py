"""Helpers the commands share: a subject's part of a command (its options and run, the
module its ``parts`` names), option parsing, the environment record written beside
every artifact, and chart drawing that never costs the measurements (nondet, bench)."""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence
from types import ModuleType

from remap_ab import options, subjects
from remap_ab.errors import RemapABError
from remap_ab.subject import command_part


def subject_part(name: str, command: str, needs: Sequence[str] = ("add_arguments", "main")) -> ModuleType:
    """The part of ``command`` that subject ``name`` (packaged, or MODULE:ATTRIBUTE)
    declares (``Subject.parts``), holding ``needs``; UsageError, saying what to declare,
    for one without."""
    return command_part(subjects.get(name), command, needs, named=name)


def subject_named(words: list[str]) -> str:
    """The subject the command line's words name with ``--subject`` (the default without)."""
    first = argparse.ArgumentParser(add_help=False)
    options.add(first, options.SUBJECT)
    known, _ = first.parse_known_args(words)
    return known.subject


def compose_subject_part(p: argparse.ArgumentParser, name: str, command: str, doc: str,
                         needs: Sequence[str] = ("add_arguments", "main")) -> ModuleType | None:
    """Subject ``name``'s part of ``command`` (None where it has none: the command's main
    says so in one line), its DESCRIPTION set between the first paragraph of the
    command's ``doc`` and the rest, as ``p``'s --help description."""
    try:
        module: ModuleType | None = subject_part(name, command, needs)
    except RemapABError:
        module = None
    head, _, tail = doc.strip().partition("\n\n")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.description = "\n\n".join(x for x in (head, getattr(module, "DESCRIPTION", ""), tail) if x)
    return module


def add_subject_and_part(p: argparse.ArgumentParser, words: list[str], command: str, doc: str) -> None:
    """``--subject``, then the options of the subject's part of ``command`` that the words
    name (the default subject's without): a command that is all the subject's. A subject
    without that part adds none, and ``run_subject_part`` says so in one line."""
    part = compose_subject_part(p, subject_named(words), command, doc)
    options.add(p, options.SUBJECT)
    if part is not None:
        part.add_arguments(p)


def run_subject_part(args: argparse.Namespace, command: str) -> int:
    """The run of ``args.subject``'s part of ``command`` (``add_subject_and_part``'s other half)."""
    return int(subject_part(args.subject, command).main(args) or 0)


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
