"""The one builder of ``remap-ab`` command lines: the replay, run-again and resume lines
that reports, verdicts, summaries and messages print.

A line is, in this order: the PYTHONPATH a custom module needs, the program, the
subcommand, ``--subject NAME`` where the target is that subject's (it says how the
target reads), what it runs (a report folder, a case ID, ``--rejection ID``), the
implementations (``--a``, ``--b``, then ``--repo``), the case's own options, then
``--schedule``, ``--device``, ``--inputs``, ``--memcheck`` and any others. Every value
is quoted for a POSIX shell (shlex), so a path with a space or a quote survives a
copy and paste; ``tests/test_command_lines.py`` parses every kind with the CLI's parser,
and ``tests/test_printed_commands.py`` runs every line a sweep prints in a fresh shell.

A sweep records the folders its PYTHONPATH named (``environment_entries``) and those
its implementations and subject were imported from where a fresh ``remap-ab`` would not
look (``import_entries``: the working folder of ``python -m``, a folder a caller put on
sys.path), as run.json's ``python_path``. Every line its summary prints (resume, run
again, replay) carries them, so a line runs in a shell that lacks them.
"""

from __future__ import annotations

import os
import shlex
import sys
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


def environment_entries(environ=None) -> list[str]:
    """The folders this process's PYTHONPATH names, each made absolute (a relative one
    is relative to the working folder, which a pasted line may not share), in order."""
    value = (os.environ if environ is None else environ).get("PYTHONPATH", "")
    return list(dict.fromkeys(os.path.abspath(e) for e in value.split(os.pathsep) if e))


def import_entries(module_names: Iterable[str]) -> list[str]:
    """The sys.path folders the named modules (those imported already; ``module:ATTR``
    names its module) were imported from, leaving out the installed packages' and the
    standard library's folders, which every ``remap-ab`` process searches."""
    import site
    import sysconfig

    searched = {os.path.realpath(p) for p in (*site.getsitepackages(), site.getusersitepackages(),
                                              *sysconfig.get_paths().values()) if p}
    out = []
    for name in module_names:
        top = str(name).split(":", 1)[0]
        file = getattr(sys.modules.get(top), "__file__", None)
        if not file:
            continue
        folder = os.path.dirname(os.path.realpath(file))
        if os.path.basename(file) == "__init__.py":
            folder = os.path.dirname(folder)
        for _ in range(top.count(".")):
            folder = os.path.dirname(folder)
        if folder not in searched:
            out.append(folder)
    return list(dict.fromkeys(out))


def run_entries(module_names: Iterable[str]) -> list[str]:
    """What a line printed by this process must put on PYTHONPATH for the named modules
    (implementations, a subject): its PYTHONPATH's folders, then ``import_entries``."""
    return list(dict.fromkeys([*environment_entries(), *import_entries(module_names)]))


def repo_of(implementations: Optional[dict]) -> Optional[str]:
    """The repository a revision of A or B was read from (run.json's ``implementations``,
    each a ``sources.Source.to_dict`` or None): a printed line's ``--repo``, so that it
    reads the same revision from any working folder. None: no revision."""
    for loaded in (implementations or {}).values():
        if isinstance(loaded, dict) and loaded.get("kind") == "git" and loaded.get("repo"):
            return str(loaded["repo"])
    return None


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
