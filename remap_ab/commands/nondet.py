"""The subject's nondeterminism study, through its nondet part (the module its
``parts["nondet"]`` names, which declares the options); without --subject, the
default subject's."""

from __future__ import annotations

from remap_ab.commands.common import add_subject_and_part, run_subject_part

# A subject's nondet part (``Subject.parts["nondet"]``) declares
#   DESCRIPTION       its paragraphs of this command's --help;
#   add_arguments(p)  its options, after --subject;
#   main(args) -> int the study.


def add_arguments_for(p, words: list[str]) -> None:
    add_subject_and_part(p, words, "nondet", __doc__ or "")


def main(args) -> int:
    return run_subject_part(args, "nondet")
