"""Re-run one case exactly: from a report folder's saved inputs (PATH), or by case ID
(the newest report of that case under --root, else the grid's configuration with
freshly generated inputs), and print the verdict beside the saved one. --subject picks
the kernel pair: its replay part (the module its ``parts["replay"]`` names) reads the
target (--subject topology also takes a case's JSON text, as its replay lines give it).

Exit status: 0 the case passes now, 1 it fails, 2 bad input (missing or corrupt report,
an implementation that cannot be imported: the message names the PYTHONPATH entry the
report recorded for it).
"""

from __future__ import annotations

from remap_ab import options
from remap_ab.commands.common import subject_part

# A subject's replay part (``Subject.parts["replay"]``) declares
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


def main(args) -> int:
    return subject_part(args.subject, "replay", ("main",)).main(args)
