"""Run one case through implementations A and B and the oracle, and print the verdict
and the command that runs it again.

--subject NAME: a case of that kernel pair, through its run part (the module its
``parts["run"]`` names), which declares the case's options; without --subject, the
default subject's.
"""

from __future__ import annotations

from remap_ab.commands.common import add_subject_and_part, run_subject_part

# A subject's run part (``Subject.parts["run"]``) declares
#   DESCRIPTION       its paragraph of this command's --help;
#   add_arguments(p)  its options, after --subject;
#   main(args) -> int the run.


def add_arguments_for(p, words: list[str]) -> None:
    add_subject_and_part(p, words, "run", __doc__ or "")


def main(args) -> int:
    return run_subject_part(args, "run")
