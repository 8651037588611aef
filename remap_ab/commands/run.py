"""Run one case through implementations A and B and the oracle, and print the verdict
and the command that runs it again.

--subject NAME: a case of that kernel pair, through its run part
(remap_ab/subjects/NAME/run_command.py), which declares the case's options; without
--subject, the default subject's.
"""

from __future__ import annotations

from remap_ab import options
from remap_ab.commands.common import compose_subject_part, subject_named, subject_part

# A subject's run part (remap_ab/subjects/NAME/run_command.py) declares
#   DESCRIPTION       its paragraph of this command's --help;
#   add_arguments(p)  its options, after --subject;
#   main(args) -> int the run.


def add_arguments_for(p, words: list[str]) -> None:
    """``--subject``, then the options of the subject the words name (the default
    subject's without); a subject without a run part adds none, and main says so."""
    part = compose_subject_part(p, subject_named(words), "run_command", "run", __doc__ or "")
    options.add(p, options.SUBJECT)
    if part is not None:
        part.add_arguments(p)


def main(args) -> int:
    return subject_part(args.subject, "run_command", "run").main(args)
