"""Re-run one case exactly: from a report folder's saved inputs (PATH), or by case ID
(the newest report of that case under --root, else the grid's configuration with
freshly generated inputs), and print the verdict beside the saved one. --subject picks
the kernel pair: its replay part (remap_ab/subjects/NAME/replay_command.py) reads the
target (--subject topology also takes a case's JSON text, as its replay lines give it).

--repeat N judges it N times (default 5 when the saved verdict failed): a failure that
not every run repeats, or that no run repeats on the same code, is a nondeterministic
failure (exit 1), printed with a ``nondet`` line to study it (replays.py).

Exit status: 0 the case passes now, 1 it fails or failed nondeterministically, 2 bad input (missing or corrupt report,
an implementation that cannot be imported: the message names the PYTHONPATH entry the
report recorded for it).
"""

from __future__ import annotations

from remap_ab import options, replays
from remap_ab.commands.common import subject_part

# A subject's replay part (remap_ab/subjects/NAME/replay_command.py) declares
#   main(args) -> int   the replay of ``args.target``, with the options below.


def add_arguments(p):
    p.add_argument("target", metavar="TARGET", help="a report folder (or a file in it), or a 12-hex-digit case ID; "
                   "--subject topology: or a case's JSON text")
    options.add_implementations(p, decided_later=("the report's A; without a report the subject's: old for the remap, "
                                                  "a for topology", "the report's B; without a report the subject's: "
                                                  "new, or b"))
    options.add(p, options.SUBJECT)
    options.add_device(p)
    options.add_root(p, "runs whose reports a case ID is looked up in")
    options.add_memcheck(p)
    p.add_argument("--repeat", type=options.positive_int, default=None, metavar="N", help=replays.REPEAT_HELP)


def main(args) -> int:
    return subject_part(args.subject, "replay_command", "replay").main(args)
