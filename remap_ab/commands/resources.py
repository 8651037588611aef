"""The subject's cross-compile of A's and B's variants for GPU targets, through its
resources part (the module its ``parts["resources"]`` names, which declares the
options); without --subject, the default subject's."""

from __future__ import annotations

from remap_ab.commands.common import add_subject_and_part, run_subject_part

# A subject's resources part (``Subject.parts["resources"]``) declares
#   DESCRIPTION       its paragraphs of this command's --help;
#   add_arguments(p)  its options (--a, --b among them), after --subject;
#   main(args) -> int the compile, its table and its verdict.


def add_arguments_for(p, words: list[str]) -> None:
    add_subject_and_part(p, words, "resources", __doc__ or "")


def main(args) -> int:
    return run_subject_part(args, "resources")
