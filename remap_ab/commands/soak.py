"""Run fresh random configurations — beyond the grid — through A, B and the oracle
until the deadline (--minutes), --max-cases per worker, or Ctrl-C. --subject picks the
kernel pair (docs/subjects.md): what is drawn is the subject's (``Subject.soak``), the
rest is remap_ab/soak/'s; the subject's soak part (the module its ``parts["soak"]`` names)
adds its paragraph below and its size options (a subject without one takes the default
subject's).

Each case that does not pass is listed with its replay command (the first ones as they
come, all of them in ROOT/soak/<time>/soak.json); the first --reports of each failure
class (the subject's classes, as --reports says) get a normal case report folder there
too. Ctrl-C stops after the cases in flight and prints the summary (a second
Ctrl-C abandons them). The deadline holds whatever B does: a case still in flight 5 s
after it is abandoned unjudged and named in the summary (ABANDONED, with the line that
runs it alone); a call stuck where no signal reaches it ends the soak 5 s later still,
the summary printed. Exit status: 0 every case passed,
1 a case did not pass (or none finished), 2 bad input, 130 stopped by Ctrl-C with no
failure.
"""

from __future__ import annotations

import os
import random

from remap_ab import runtime, subjects
from remap_ab.commands.common import compose_subject_part, subject_named
from remap_ab.errors import UsageError
from remap_ab.host import gpus
from remap_ab.options import (
    MAX_SIZE,
    SUBJECT,
    add,
    add_device,
    add_implementations,
    add_reports,
    add_root,
    checked_output_dir,
    non_negative_int,
    positive_float,
    positive_int,
)
from remap_ab.processes.precompile import default_workers
from remap_ab.report_cap import DEFAULT_REPORTS
from remap_ab.soak import session
from remap_ab.subject import SoakSettings
from remap_ab.sweep.run import DEFAULT_CASE_TIMEOUT

# A subject's soak part (``Subject.parts["soak"]``) declares
#   DESCRIPTION       its paragraph of this command's --help;
#   add_arguments(p)  its size options, whose values reach its soak as SoakSettings.options
#                     and their flags as SoakSettings.flags, by the options' names.
SOAK_PART = ("add_arguments",)


def add_arguments_for(p, words: list[str]) -> None:
    """The soak's options, with the size options of the subject the words name (the
    default subject's where it has no soak part)."""
    p.add_argument("--minutes", type=positive_float, required=True, help="how long to soak (no case starts after that; one still in flight "
                        "5 s later is abandoned, named in the summary)")
    p.add_argument("--seed", type=non_negative_int, default=None,
                   help="seed of the draws (default: a random one, printed, so the soak can be repeated)")
    add(p, SUBJECT)
    part = compose_subject_part(p, subject_named(words), "soak", __doc__ or "", SOAK_PART)
    if part is None:
        part = compose_subject_part(p, subjects.DEFAULT, "soak", __doc__ or "", SOAK_PART)
    before = {a.dest for a in p._actions}
    if part is not None:
        part.add_arguments(p)
    added = [a for a in p._actions if a.dest not in before]
    p.set_defaults(_subject_options=tuple(a.dest for a in added),
                   _subject_flags={a.dest: max(a.option_strings, key=len) for a in added})
    p.add_argument("--max-cases", type=positive_int, default=None,
                   help="stop after this many cases per worker (the first ones drawn)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes (default: one per visible GPU; 1 on CPU)")
    p.add_argument("--contend-every", type=non_negative_int, default=4,
                   help="GPU: run every Nth case under a contending side stream (0: never; default 4)")
    p.add_argument("--batch", type=positive_int, default=16, help="GPU: quiet cases judged per batch (default 16)")
    p.add_argument("--fresh-every", type=positive_int, default=None,
                   help="one draw in N is a fresh variant, the others re-draw the data of a recent one "
                        "(default 4 on GPU, where a variant is a compile; 1 on CPU: every draw fresh)")
    p.add_argument("--compile-workers", type=non_negative_int, default=None,
                   help="GPU: processes compiling the coming variants ahead (default: the host's cores less one "
                        "per GPU worker; 0: none, each variant compiles at its launch)")
    add_implementations(p, decided_later=("the subject's: old for the remap, a for topology",
                                          "the subject's: new, or b"))
    add_device(p)
    add_root(p)
    add_reports(p)


def main(args) -> int:
    device = runtime.select(args.device)
    on_gpu = device == "cuda"
    subject = subjects.get(args.subject)
    if args.compile_workers and not on_gpu:
        raise UsageError("--compile-workers is for a GPU soak (the interpreter compiles nothing); drop it")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    gpu_list = gpus.visible_gpus(os.environ, gpus.count_gpus()) if on_gpu else []
    workers = args.workers or (len(gpu_list) if on_gpu else 1)
    if not on_gpu:
        compile_workers = 0
    elif args.compile_workers is not None:
        compile_workers = args.compile_workers
    else:
        compile_workers = default_workers(workers)
    settings = SoakSettings(
        device=device, a=args.a or subject.default_a, b=args.b or subject.default_b, workers=workers, gpus=gpu_list,
        # The shared size cap, whichever name the subject's soak part gives it (a declared subject reads it).
        size_cap=next((getattr(args, d) for d, flag in args._subject_flags.items() if flag == MAX_SIZE.flag), None),
        flags=dict(args._subject_flags), options={**{dest: getattr(args, dest) for dest in args._subject_options},
                 **dict(contend_every=args.contend_every, batch=args.batch, fresh_every=args.fresh_every,
                        compile_workers=compile_workers)})
    root = checked_output_dir(args.root, "--root")
    return session.run(session.Soak(args.subject, settings, args.minutes, seed, root, args.max_cases,
                                    args.reports if args.reports is not None else DEFAULT_REPORTS,
                                    DEFAULT_CASE_TIMEOUT))
