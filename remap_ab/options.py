"""Command-line options that several commands share, each defined once.

A command calls the ``add_*`` helpers in its ``add_arguments``; the option's flag,
default, choices and help text live only here. The ``checked_*`` helpers validate a
value once parsed and raise ``UsageError`` (one line, exit 2) naming the option.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from remap_ab import sources
from remap_ab.errors import UsageError
from remap_ab.report_cap import DEFAULT_REPORTS, parse_cap
from remap_ab.subjects.remap import registry

DEVICES = ("auto", "cpu", "cuda")
DEFAULT_ROOT = "reports"  # every command writes under this root (docs/layout.md)


def add_implementations(p: argparse.ArgumentParser, default_a: str | None = "old", default_b: str | None = "new",
                        default_text: tuple[str, str] | None = None) -> None:
    """``--a`` and ``--b``. A default of None means "decided later" (from a report, or
    a resumed run); ``default_text`` then says what the default is, for each."""
    where = ("old, new, oracle, a dotted module path exposing the two SPEC §1 functions, a .py file, or REV:PATH "
             "(the file at a git revision of --repo, read without checking out; no vLLM needed)")
    text_a, text_b = default_text or (default_a or "the recorded one", default_b or "the recorded one")
    p.add_argument("--a", default=default_a, metavar="IMPL", help=f"implementation A: {where} (default {text_a})")
    p.add_argument("--b", default=default_b, metavar="IMPL", help=f"implementation B (default {text_b})")
    p.add_argument("--repo", default=None, metavar="DIR",
                   help="the git repository REV:PATH implementations are read from (default $REMAP_AB_REPO, else "
                        "the current directory)")


def resolve_implementations(args: argparse.Namespace) -> None:
    """After parsing: ``--a``/``--b`` in their canonical form (a file's absolute path, a
    revision pinned to its commit: registry.resolve), and the repository exported for
    worker processes. A file or revision that does not exist is refused here, once."""
    if not hasattr(args, "repo"):
        return

    os.environ[sources.REPO_VARIABLE] = sources.repo_dir(args.repo)
    for role in ("a", "b"):
        name = getattr(args, role, None)
        if name is not None:
            setattr(args, role, registry.resolve(name))


BISECT_GOOD, BISECT_BAD, BISECT_SKIP, BISECT_ABORT = 0, 1, 125, 128


def add_bisect(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bisect", action="store_true",
                   help="exit statuses for `git bisect run`: 0 pass, 1 fail, 125 an implementation file that does not "
                        "load at this revision (missing, broken, vLLM imports, no SPEC §1 functions), 128 anything "
                        "else (bad input, a remap-ab bug: stops the bisect)")


def bisect_status(status: int, unloadable: bool = False) -> int:
    """The ``--bisect`` exit status for a command's own status (0, 1, 2, 3, 130)."""
    if unloadable:
        return BISECT_SKIP
    return status if status in (BISECT_GOOD, BISECT_BAD) else BISECT_ABORT


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=DEVICES,
                   help="where kernels run: cuda (a GPU) or cpu (the Triton interpreter); default auto: cuda when present")


def add_root(p: argparse.ArgumentParser, what: str = "runs and reports") -> None:
    p.add_argument("--root", default=DEFAULT_ROOT, metavar="DIR", help=f"folder holding the {what} (default {DEFAULT_ROOT})")


def add_memcheck(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memcheck", action="store_true",
                   help="also check every load and store of the implementations against the argument tensors' "
                        "bounds (CPU: the interpreter's accesses; GPU: compute-sanitizer memcheck)")


CALL_CHECKS = ("sample", "all", "off")


def add_call_checks(p: argparse.ArgumentParser) -> None:
    p.add_argument("--call-checks", default="sample", choices=CALL_CHECKS,
                   help="on a GPU, the checks of the call as vLLM makes it: no host sync inside it (every call "
                        "unless off), outputs ready on the caller's stream and a CUDA-graph capture that replays "
                        "right (sample = a case of each wrapper path's launch shapes and batch-size buckets, and "
                        "each path's largest batch (default); all = every case); off = none of them. Input "
                        "writes, aliasing and the output layout are checked on every case on every device regardless")


def add_reports(p: argparse.ArgumentParser, resumed: bool = False) -> None:
    """``--reports N|all``: how many failing cases of each failure class get a full
    report folder (report_cap.py). ``resumed``: the command can resume a run, whose
    own setting is then the default."""

    default = f"{DEFAULT_REPORTS}" + ("; with --resume, the run's own" if resumed else "")
    p.add_argument("--reports", type=report_count, default=None, metavar="N|all",
                   help="full report folders (inputs, outputs, lane picture, diff) for the first N failing cases of "
                        "each failure class (the verdict's first check x the wrapper path); all: every failing case "
                        f"(default {default}). Every case is judged and has its row either way; the summary says "
                        "how to get any other case's report")


def add_full_tensors(p: argparse.ArgumentParser) -> None:
    """``--full-tensors``: a report folder also keeps the whole tensors (report.py)."""
    p.add_argument("--full-tensors", action="store_true",
                   help="a report folder also keeps the whole input and output tensors, gzip-compressed "
                        "(inputs.pt.gz, outputs.pt.gz); without it, the inputs are regenerated from the configuration "
                        "on replay (sha256-checked) and only the rows where A, B and the oracle differ are kept")


def report_count(text: str):
    """argparse ``type=`` of ``--reports``: a count (0 or more) or ``all``."""

    try:
        return parse_cap(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a count (0 or more) nor 'all'") from None


def _int_at_least(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} must be {what}")
    return value


def positive_int(text: str) -> int:
    """argparse ``type=`` for counts that must be >= 1."""
    return _int_at_least(text, 1, "at least 1")


def non_negative_int(text: str) -> int:
    """argparse ``type=`` for counts where 0 means something (e.g. ``-j 0``: in this process)."""
    return _int_at_least(text, 0, "0 or more")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive finite number of seconds")
    return value


def checked_output_dir(path: str | os.PathLike, option: str) -> Path:
    """A folder remap-ab may write into: created if missing; UsageError if it is a
    file, lies under a file, or cannot be written."""
    folder = Path(path)
    for parent in (folder, *folder.parents):
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{option} {folder}: {parent} is a file, not a folder; give a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {folder}: cannot create it ({exc.strerror}); give a writable folder") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {folder}: not writable; give a writable folder")
    return folder


def checked_output_file(path: str | os.PathLike, option: str) -> Path:
    """A file remap-ab may (over)write: its folder must exist and be writable, and the
    path must not be a folder."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {target}: is a folder; give a file path")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{option} {target}: not writable; give a writable path")
    return target
