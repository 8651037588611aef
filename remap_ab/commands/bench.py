"""Time the kernels and tell their performance story on one HTML page.

--subject NAME (another subject than the default): that subject's bench part (the
module its ``parts["bench"]`` names), with its own options after the shared ones
(--a, --b, --device, --root, --report, --budget-s, --calls, --repeats and --fail-slower);
`remap-ab bench --subject NAME --help` shows them. Without --subject: the default
subject's.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from remap_ab import command_line, options, runtime, subjects
from remap_ab.bench import pairs
from remap_ab.bench.session import Session
from remap_ab.commands.common import compose_subject_part, environment, subject_named, subject_part

# Each subject's bench part (``Subject.parts["bench"]``) declares
#   DESCRIPTION                    its part of this command's --help text;
#   add_arguments(parser, groups)  its options, after the shared ones below (``groups``:
#                                  the shared argument groups by title, for it to extend);
#   main(args, session) -> int     its run (session: remap_ab/bench/session.py);
#   REPEATS_HELP (optional)        --repeats' help where the part decides its default.
SHARED_GROUPS = ("what to run", "timing")


def add_arguments_for(p, words: list[str]) -> None:
    """The shared options, then those of the subject the words name with ``--subject``
    (the default subject's without). Options of the default subject's bench given to
    another subject's: one line saying whose they are, exit 2."""
    name = subject_named(words)
    _compose(p, name)
    if name == subjects.DEFAULT:
        return
    default = argparse.ArgumentParser(add_help=False)
    _compose(default, subjects.DEFAULT)
    theirs = sorted({w.partition("=")[0] for w in words} & (_flags(default) - _flags(p)))
    if theirs:
        p.error(f"{', '.join(theirs)}: the {subjects.DEFAULT} bench's options; bench --subject {name} takes "
                f"{', '.join(sorted(_flags(p) - {'--help', '--subject'}))}")


def _flags(p) -> set:
    return {flag for action in p._actions for flag in action.option_strings if flag.startswith("--")}


def _compose(p, name: str) -> None:
    part = compose_subject_part(p, name, "bench", __doc__ or "")
    options.add_implementations(p, decided_later=(f"{options.A.default}; the subject's own with --subject",
                                                  f"{options.B.default}; the subject's own with --subject"))
    options.add(p, options.SUBJECT)
    options.add_device(p)
    options.add_root(p, "bench pages (written to ROOT/bench/<stamp>/)")
    what = p.add_argument_group("what to run")
    what.add_argument("--budget-s", type=options.positive_float, default=None, metavar="S",
                      help="stop starting new cells after S seconds (what was measured is kept; the page says what was not)")
    what.add_argument("--report", default=None, metavar="DIR",
                      help="write the page and its files into DIR (default ROOT/bench/<stamp>/)")
    t = p.add_argument_group("timing")
    t.add_argument("--calls", type=options.positive_int, default=200, help="calls captured per graph (default 200)")
    t.add_argument("--repeats", type=options.positive_int, default=None,
                   help=getattr(part, "REPEATS_HELP", None) or f"timed replays per graph (default {pairs.DEFAULT_REPEATS})")
    options.add(t, options.FAIL_SLOWER)
    if part is not None:
        part.add_arguments(p, dict(zip(SHARED_GROUPS, (what, t))))


def _output_folder(args) -> Path:
    if args.report:
        return options.checked_output_dir(args.report, "--report")
    options.checked_output_dir(args.root, "--root")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder, n = Path(args.root) / "bench" / stamp, 1
    while folder.exists():  # two runs in one second: never overwrite the first
        n += 1
        folder = Path(args.root) / "bench" / f"{stamp}-{n}"
    return options.checked_output_dir(folder, "--root")


def main(args) -> int:
    part = subject_part(args.subject, "bench")
    device = runtime.select(args.device)
    session = Session(device, environment(device), command_line.line("bench", *sys.argv[2:]),
                      lambda: _output_folder(args), pairs.main)
    return part.main(args, session)
