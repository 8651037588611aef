"""The one builder of ``remap-ab`` command lines: the replay and run-again lines that
reports, verdicts, summaries and messages print.

A line is, in this order: the PYTHONPATH a custom module needs, the program, the
subcommand, ``--subject NAME`` where the target is that subject's (it says how the
target reads), what it runs (a report folder, a case ID, ``--rejection ID``), the
implementations (``--a``, ``--b``, then ``--repo``), the case's own options, then
``--schedule``, ``--device``, ``--inputs``, ``--memcheck`` and any others. Every value
is quoted for a POSIX shell (shlex), so a path with a space or a quote survives a
copy and paste; ``tests/test_command_lines.py`` parses every kind with the CLI's parser.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from typing import Optional

PROGRAM = "remap-ab"


def python_path(entries: Iterable[str]) -> str:
    """``PYTHONPATH=E1:E2${PYTHONPATH:+:$PYTHONPATH} `` for the folders a custom module
    is imported from (each once, in order); empty for none. The caller's own
    PYTHONPATH is kept after them."""
    unique = list(dict.fromkeys(e for e in entries if e))
    if not unique:
        return ""
    return f"PYTHONPATH={shlex.quote(os.pathsep.join(unique))}${{PYTHONPATH:+:$PYTHONPATH}} "


def line(subcommand: str, *what: str, subject: Optional[str] = None, a: Optional[str] = None,
         b: Optional[str] = None, repo: Optional[str] = None, case: str = "",
         schedule: Optional[tuple[str, int]] = None, device: Optional[str] = None, inputs: Optional[str] = None,
         memcheck: bool = False, options: Sequence[tuple[str, Optional[str]]] = (),
         path_entries: Iterable[str] = ()) -> str:
    """The command line of ``remap-ab SUBCOMMAND``. ``what``: its target words (each
    quoted); ``case``: a case's options as its subject's case ``cli_args()`` words them (flags
    and plain values, no quoting needed); ``subject``: the subject whose target ``what`` is
    (``--subject NAME``, written before it); ``options``: further ``(flag, value)`` pairs
    in order, ``value`` None for a flag alone; ``path_entries``: folders for PYTHONPATH."""
    words = [PROGRAM, subcommand, *(["--subject", shlex.quote(subject)] if subject is not None else []),
             *(shlex.quote(w) for w in what)]
    for flag, value in (("--a", a), ("--b", b), ("--repo", repo)):
        if value is not None:
            words += [flag, shlex.quote(value)]
    if case:
        words.append(case)
    if schedule is not None:
        words += ["--schedule", shlex.quote(f"{schedule[0]}:{schedule[1]}")]
    if device is not None:
        words += ["--device", shlex.quote(device)]
    if inputs is not None:
        words += ["--inputs", shlex.quote(inputs)]
    if memcheck:
        words.append("--memcheck")
    for flag, value in options:
        words += [flag] if value is None else [flag, shlex.quote(value)]
    return python_path(path_entries) + " ".join(words)
