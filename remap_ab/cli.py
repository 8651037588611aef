"""The ``remap-ab`` command line.

Each subcommand lives in ``remap_ab/commands/<name>.py``, the same for every subject,
and exposes ``add_arguments(parser)`` and ``main(args) -> int`` (a command whose options
depend on the words given, e.g. ``run --subject NAME``, whose options are that subject's
part's, exposes ``add_arguments_for(parser, words)`` instead); this file only
dispatches, has ``--a``/``--b`` resolved by the subject (``options.resolve_implementations``)
and turns exceptions into exit statuses:

- ``RemapABError`` (the user's input): one line on stderr, exit 2;
- ``InternalError`` (remap-ab's own bug): one line, exit 3;
- anything else unexpected: one line naming the type, exit 3; the traceback only
  with ``REMAP_AB_TRACEBACK=1``;
- stdout closed early (``remap-ab report --json | head``): exit quietly;
- Ctrl-C or SIGTERM at any moment, the imports of the first second included: one
  line ("remap-ab sweep: interrupted by Ctrl-C", and what to do next where the command
  knows it, e.g. the run's resume line), exit 130 or 143, never a traceback.

The command line, not ``import remap_ab``, picks the kernel backend: a CPU-only
machine gets the Triton interpreter before any command can import a kernel.

Only the standard library and remap-ab's light modules are imported at the top: the
signals are taken before torch and the commands' machinery load (``main``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from remap_ab.errors import InternalError, RemapABError, UnloadableFileError
from remap_ab.host import interrupts

COMMANDS = {
    "run": "run one case through two implementations and the oracle",
    "sweep": "run the subject's grid of cases (the default subject's: its grid.toml) through A, B and the oracle",
    "replay": "re-run one case from its saved report (or its case ID) and print the verdict",
    "report": "summarise a finished sweep run",
    "mutants": "run the subject's seeded-mutant catalogue against the suite and print the kill matrix",
    "nondet": "count distinct outputs over repeated runs (GPU: quiet/contended; CPU: permuted schedules): the subject's study",
    "bench": "time A vs B inside CUDA graphs and tell the subject's performance story on one page (needs a GPU)",
    "resources": "cross-compile every variant of A and B for GPU targets: registers, spills, shared memory, occupancy",
    "soak": "run fresh random configurations beyond the grid through A, B and the oracle until a deadline",
    "history": "A/B every revision of a file against the one before it (git log --follow), one row per revision",
}

TRACEBACK_VARIABLE = "REMAP_AB_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad option reported like every other bad input: one line on
    stderr (no usage block), exit 2, and where to read about the options."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def build_parser(command: str | None = None, words: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. ``command``: the one subcommand whose module is
    imported and whose options are added (each command's module loads its own
    machinery: ``report`` must not load the sweep's); None: every one. ``words``: the
    command line to be parsed, for a command whose options depend on it."""
    parser = _Parser(prog="remap-ab", description="bit-exact A/B testing of GPU kernel pairs (the default subject: "
                                                  "vLLM's sparse-MLA index remap)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=argparse.RawDescriptionHelpFormatter)
        if command is None or name == command:
            module = importlib.import_module(f"remap_ab.commands.{name}")
            p.description = (module.__doc__ or help_text).strip()
            if hasattr(module, "add_arguments_for"):
                module.add_arguments_for(p, list(words or ()))
            else:
                module.add_arguments(p)
            p.set_defaults(_main=module.main)
    return parser


def _choose_backend_early() -> None:
    # Triton decides interpreter-or-GPU when a kernel is decorated, i.e. imported.
    # A command line without a GPU turns the interpreter on before any command runs;
    # the library itself never touches the environment on import.
    from remap_ab import runtime

    runtime.choose_early()


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


# 128 + SIGPIPE: the status a Unix tool has when its reader went away (``yes | head``).
CLOSED_STDOUT_STATUS = 141


def main(argv=None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    name = " ".join(["remap-ab", *(w for w in words[:1] if w in COMMANDS)])
    # SIGTERM unwinds like Ctrl-C (clean-ups run, no process or semaphore left), and
    # either, at any moment, is one line: taken before the first heavy import.
    with interrupts.command_line_signals():
        try:
            from remap_ab.host import tuning  # after the signals are taken: its imports are heavy

            tuning.tune_this_process()  # the command line's process is remap-ab's own (tuning.py)
            status = _main(argv)
            sys.stdout.flush()  # a reader that left during the last write is seen here, not at exit
            return status
        except BrokenPipeError:
            return _closed_stdout()
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM outside a command's own handling
            return _interrupted(name, exc)


def _interrupted(name: str, exc: KeyboardInterrupt) -> int:
    """The one line of a stopped command, and its exit status (128 + the signal)."""
    stopped = interrupts.as_interrupted(exc)
    then = f"; {stopped.then}" if stopped.then else ""
    try:
        print(f"{name}: interrupted by {'SIGTERM' if stopped.exit_status == 143 else 'Ctrl-C'}{then}",
              file=sys.stderr)
    except (OSError, ValueError):
        pass
    return stopped.exit_status


def _main(argv) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    from remap_ab.options import BISECT_ABORT, bisect_status  # after the signals are taken (the options load the machinery)

    interrupts.moment("imports")
    parser = build_parser(next((w for w in words if w in COMMANDS), ""), words)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 2 and "--bisect" in (sys.argv[1:] if argv is None else argv):
            return BISECT_ABORT  # a bad option must stop `git bisect run`, not mark the revision bad
        raise
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    name = f"remap-ab {args.command}"
    if getattr(args, "bisect", False):
        try:
            status = _run(name, args)
        except UnloadableFileError as exc:
            print(f"{name}: error: {exc} (git bisect: skip this revision)", file=sys.stderr)
            return bisect_status(exc.exit_code, unloadable=True)
        return bisect_status(status)
    try:
        return _run(name, args)
    except UnloadableFileError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(name: str, args) -> int:
    """The command's status; every error but an unloadable implementation file (which
    ``--bisect`` maps on its own) already printed and turned into its status."""

    from remap_ab.options import resolve_implementations  # after the signals are taken (the options load the machinery)

    try:
        _choose_backend_early()
        resolve_implementations(args)
        return int(args._main(args) or 0)
    except (BrokenPipeError, UnloadableFileError):
        raise
    except RemapABError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except InternalError as exc:
        _maybe_traceback()
        print(f"{name}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (interrupts.Interrupted)
        return _interrupted(name, exc)
    except Exception as exc:  # a remap-ab bug: one line, never a wall of traceback unless asked
        _maybe_traceback()
        print(
            f"{name}: internal error: {type(exc).__name__}: {_one_line(exc)[:400]} "
            f"(a remap-ab bug; rerun with {TRACEBACK_VARIABLE}=1 for the traceback)",
            file=sys.stderr,
        )
        return InternalError.exit_code


def _maybe_traceback() -> None:
    if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
        import traceback

        traceback.print_exc()


def _closed_stdout() -> int:
    # The reader went away (``| head``): it had what it wanted. Point stdout at devnull
    # so the interpreter's final flush cannot raise again, and leave quietly with the
    # status of a tool whose reader left.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return CLOSED_STDOUT_STATUS


if __name__ == "__main__":
    sys.exit(main())
