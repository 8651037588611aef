"""Re-run one case exactly: from a report folder's saved inputs (PATH), or by case ID
(the newest report of that case under --root, else the grid's configuration with
freshly generated inputs), and print the verdict beside the saved one. --subject picks
the kernel pair: its replay part (the module its ``parts["replay"]`` names) reads the
target (--subject topology also takes a case's JSON text, as its replay lines give it).

--repeat N judges it N times (default 5 when the saved verdict failed): a failure that
not every run repeats, or that no run repeats on the same code, is a nondeterministic
failure (exit 1), printed with a ``nondet`` line to study it (replays.py).

Exit status: 0 the case passes now, 1 it fails or failed nondeterministically, 2 bad input (missing or corrupt report,
an implementation that cannot be imported: the message names the PYTHONPATH entry the
report recorded for it).
"""

from __future__ import annotations

import json

from remap_ab import options, replays, runtime, subjects
from remap_ab.commands.common import subject_part
from remap_ab.errors import RemapABError, UsageError, exception_line
from remap_ab.status import Status
from remap_ab.subject import BatchTimes, JudgeSettings

# A subject's replay part (``Subject.parts["replay"]``) declares
#   main(args) -> int   the replay of ``args.target``, with the options below.
# A subject without one gets the generic replay: TARGET a case's JSON (its ``case_dict``),
# judged again by the subject's ``judge``, its verdict printed.


def add_arguments(p):
    p.add_argument("target", metavar="TARGET", help="a report folder (or a file in it), or a 12-hex-digit case ID; "
                   "--subject topology, or a subject without a replay part of its own: a case's JSON text")
    options.add_implementations(p, decided_later=("the report's A; without a report the subject's: old for the remap, "
                                                  "a for topology", "the report's B; without a report the subject's: "
                                                  "new, or b"))
    options.add(p, options.SUBJECT)
    options.add_device(p)
    options.add_root(p, "runs whose reports a case ID is looked up in")
    options.add_memcheck(p)
    p.add_argument("--repeat", type=options.positive_int, default=None, metavar="N", help=replays.REPEAT_HELP)


def main(args) -> int:
    subject = subjects.get(args.subject)
    if subject.command_part("replay") is not None or "replay" in subject.parts:
        return subject_part(args.subject, "replay", ("main",)).main(args)
    return _judged_again(args, subject)


def _judged_again(args, subject) -> int:
    """The generic replay: the case ``args.target`` holds as JSON, judged by the subject."""
    try:
        case = subject.case_from_dict(json.loads(args.target))
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"replay --subject {args.subject} {args.target!r}: not a case's JSON ({type(exc).__name__}: "
                         f"{exc}); give the case as its JSON (the subject's case_dict), or declare parts = "
                         "{'replay': MODULE} on the subject for a replay of its own") from None
    device = runtime.select(args.device)
    settings = JudgeSettings(args.a or subject.default_a, args.b or subject.default_b, device, None,
                             memcheck=args.memcheck)
    try:
        row = subject.judge([case], settings, BatchTimes())[0]
    except RemapABError:
        raise
    except Exception as exc:  # the subject's judge, on a case given by hand: name it, one line
        raise UsageError(f"replay --subject {args.subject} {args.target!r}: the subject's judge raised "
                         f"{exception_line(exc)}; give a case as the subject's case_dict writes it") from None
    status = Status(row["status"])
    detail = f" [{row['check']}] {row['first_mismatch']}" if status != Status.PASS and row.get("first_mismatch") else ""
    print(f"case {row['case_id']}: {status.value.upper()}{detail} (A {settings.a}, B {settings.b}, {device})")
    return 0 if status == Status.PASS else 1
