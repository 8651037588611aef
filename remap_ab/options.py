"""Every option the command line and the pytest plugin share, and the command line's
own shared ones, each declared once as data (``Option``).

``add`` turns a declaration into an argparse option (a command's ``add_arguments``);
``add_to_pytest`` into the plugin's ``parser.addoption`` under its ``--remap-`` name.
Flag, default, environment variable, metavar, help, type (the validator) and choices
live only here (the default subject's words in them, such as the size cap's flag, are its
``shared_options`` module's); a surface whose default differs (a resumed sweep's, the plugin's batch)
passes that one field, ``OPTION.but(default=...)``. The ``checked_*`` helpers validate a
value once parsed and raise ``UsageError`` (one line, exit 2) naming the option.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from remap_ab import sources, subjects
from remap_ab.errors import UsageError
from remap_ab.report_cap import DEFAULT_REPORTS, parse_cap

DEVICES = ("auto", "cpu", "cuda")
DEFAULT_ROOT = "reports"  # every command writes under this root (docs/layout.md)


@dataclasses.dataclass(frozen=True)
class Option:
    """One option as data. ``help`` words its default as ``{default}``: ``default_text``
    when given, else the default itself. ``env``: the variable that gives the plugin's
    default when set (pytest's subprocesses and xdist workers inherit it; the command
    line takes the flag). ``plugin``: the pytest plugin's flag, None where only the
    command line has the option."""

    flag: str
    help: str
    default: Any = None
    default_text: Optional[str] = None
    metavar: Optional[str] = None
    type: Optional[Callable[[str], Any]] = None
    choices: Optional[tuple] = None
    action: Optional[str] = None  # "store_true", "append"
    env: Optional[str] = None
    plugin: Optional[str] = None
    short: Optional[str] = None  # a one-letter alias on the command line (-j)
    dest: Optional[str] = None  # the command line's attribute, where not the flag's own (a subject's word)

    def but(self, **changes) -> Option:
        """This option with some fields changed for one surface (a default, its wording)."""
        return dataclasses.replace(self, **changes)

    def help_text(self) -> str:
        words = self.default_text if self.default_text is not None else str(self.default)
        return self.help.replace("{default}", words)

    def keywords(self, default: Any) -> dict:
        """argparse's keywords (pytest's ``addoption`` takes the same)."""
        kw: dict[str, Any] = {"help": self.help_text()}
        if self.action is not None:
            kw["action"] = self.action
        if self.action != "store_true":
            kw["default"] = list(default) if self.action == "append" else default
            for name in ("metavar", "type", "choices"):
                if getattr(self, name) is not None:
                    kw[name] = getattr(self, name)
        return kw


def add(p, *declared: Option) -> None:
    """Each option on an argparse parser (or argument group)."""
    for o in declared:
        p.add_argument(*([o.short] if o.short else []), o.flag, **o.keywords(o.default),
                       **({"dest": o.dest} if o.dest else {}))


def add_to_pytest(group, *declared: Option) -> None:
    """Each option on the pytest plugin's option group, under its ``--remap-`` flag; an
    option with an ``env`` takes its default from that variable when set."""
    for o in declared:
        if o.plugin is None:
            raise ValueError(f"{o.flag} has no plugin flag")
        default = os.environ.get(o.env, o.default) if o.env else o.default
        keywords = o.keywords(default)
        for other in SHARED:  # the help names the plugin's flags: --remap-repo, not --repo
            keywords["help"] = re.sub(rf"{re.escape(other.flag)}(?![\w-])", str(other.plugin), keywords["help"])
        group.addoption(o.plugin, **keywords)


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


def int_list(text: str, option: str) -> list[int]:
    """A comma-separated list of integers given to ``option`` (UsageError otherwise)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{option} {text!r} must be comma-separated integers, e.g. 1,2,8") from None
    if not values:
        raise UsageError(f"{option} is empty; give at least one value")
    return values


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive finite number of seconds")
    return value


# --------------------------------------------------------------------------- shared by the CLI and the plugin

_WHERE = ("old, new, oracle, a dotted module path exposing the two SPEC §1 functions, a .py file, or REV:PATH "
          "(the file at a git revision of --repo, read without checking out; no vLLM needed)")
A = Option("--a", f"implementation A: {_WHERE} (default {{default}})", default="old", metavar="IMPL",
           env="REMAP_AB_A", plugin="--remap-a")
B = Option("--b", "implementation B (default {default})", default="new", metavar="IMPL", env="REMAP_AB_B",
           plugin="--remap-b")
REPO = Option("--repo", "the git repository REV:PATH implementations are read from (default $REMAP_AB_REPO, else "
              "the current directory)", metavar="DIR", env=sources.REPO_VARIABLE, plugin="--remap-repo")
SUBJECT = Option("--subject", f"the kernel pair under test: {', '.join(subjects.names())}, or MODULE:ATTRIBUTE for "
                 "one of your own (docs/subjects.md; default {default})", default=subjects.DEFAULT, metavar="NAME",
                 plugin="--remap-subject")
# The default subject's words in the shared options (its shared_options module).
_WORDS = importlib.import_module(f"remap_ab.subjects.{subjects.DEFAULT}.shared_options")
FILTER = Option(
    "--filter", f"keep configurations whose grid dimension ({_WORDS.FILTER_DIMENSIONS}) or config field has one of "
    "the values, or whose case ID is listed (case=ID[,ID...], as results.csv shows them); repeatable (all must hold)",
    default=(), metavar="NAME=V[,V...]", action="append", plugin="--remap-grid-filter")
MAX_SIZE = Option(**_WORDS.SIZE_CAP, type=positive_int, metavar="N", dest="max_size")  # the grid's size cap
BATCH = Option("--batch", "cases per batch (default {default})", default_text="64 on cuda, 1 on cpu",
               type=positive_int, metavar="N", plugin="--remap-grid-batch")
REPORTS = Option("--reports", f"full report folders ({_WORDS.REPORT_FOLDER}) for the first N failing "
                 "cases of each failure class (the verdict's first check x the wrapper path); all: every failing case "
                 "(default {default}). Every case is judged and has its row either way; the summary says how to get "
                 "any other case's report", default=DEFAULT_REPORTS, type=report_count, metavar="N|all",
                 plugin="--remap-grid-report-cases")
FAIL_SLOWER = Option("--fail-slower", "pr: fail a cell where B is slower than A by more than PCT beyond noise (the "
                     "whole 95%% bootstrap interval of the ratio of medians over the repeats above 1 + PCT; at least 5 "
                     "repeats); a percentage (5%%) or a fraction (0.05), or off (default {default})",
                     default="5%", default_text="5%%", metavar="PCT", env="REMAP_AB_FAIL_SLOWER",
                     plugin="--remap-fail-slower")
SHARED = (A, B, REPO, SUBJECT, FILTER, MAX_SIZE, BATCH, REPORTS, FAIL_SLOWER)  # the plugin has each

# --------------------------------------------------------------------------- the command line's own

DEVICE = Option("--device", "where kernels run: cuda (a GPU) or cpu (the Triton interpreter); default auto: cuda "
                "when present", default="auto", choices=DEVICES)
ROOT = Option("--root", "folder holding the runs and reports (default {default})", default=DEFAULT_ROOT, metavar="DIR")
MEMCHECK = Option("--memcheck", "also check every load and store of the implementations against the argument "
                  "tensors' bounds (CPU: the interpreter's accesses; GPU: compute-sanitizer memcheck)",
                  action="store_true")
CALL_CHECKS = ("sample", "all", "off")
CALL_CHECKS_OPTION = Option(
    "--call-checks", "on a GPU, the checks of the call as vLLM makes it: no host sync inside it (every call "
    "unless off), outputs ready on the caller's stream and a CUDA-graph capture that replays "
    "right (sample = a case of each wrapper path's launch shapes and batch-size buckets, and "
    "each path's largest batch (default); all = every case); off = none of them. Input "
    "writes, aliasing and the output layout are checked on every case on every device regardless",
    default="sample", choices=CALL_CHECKS)
BISECT = Option("--bisect", "exit statuses for `git bisect run`: 0 pass, 1 fail, 125 an implementation file that "
                "does not load at this revision (missing, broken, vLLM imports, no SPEC §1 functions), 128 anything "
                "else (bad input, a remap-ab bug: stops the bisect)", action="store_true")
FULL_TENSORS = Option("--full-tensors", "a report folder also keeps the whole input and output tensors, "
                      "gzip-compressed (inputs.pt.gz, outputs.pt.gz); without it, the inputs are regenerated from the "
                      "configuration on replay (sha256-checked) and only the rows where A, B and the oracle differ are "
                      "kept", action="store_true")


def add_implementations(p: argparse.ArgumentParser, decided_later: tuple[str, str] | None = None) -> None:
    """``--a``, ``--b`` and ``--repo``. ``decided_later``: A and B default to None, decided
    later (from a report, or a resumed run), and these words say how, for each."""
    if decided_later is None:
        add(p, A, B, REPO)
    else:
        add(p, A.but(default=None, default_text=decided_later[0]), B.but(default=None, default_text=decided_later[1]),
            REPO)


def resolve_implementations(args: argparse.Namespace) -> None:
    """After parsing: ``--a``/``--b`` in the canonical form the subject (``--subject``, the
    default without) gives them (``Subject.implementation``: a file's absolute path, a
    revision pinned to its commit), and the repository exported for worker processes. A
    file or revision that does not exist is refused here, once."""
    if not hasattr(args, "repo"):
        return

    os.environ[sources.REPO_VARIABLE] = sources.repo_dir(args.repo)
    if getattr(args, "a", None) is None and getattr(args, "b", None) is None:
        return
    subject = subjects.get(getattr(args, "subject", subjects.DEFAULT))
    for role in ("a", "b"):
        name = getattr(args, role, None)
        if name is not None:
            setattr(args, role, subject.implementation(name))


BISECT_GOOD, BISECT_BAD, BISECT_SKIP, BISECT_ABORT = 0, 1, 125, 128


def bisect_status(status: int, unloadable: bool = False) -> int:
    """The ``--bisect`` exit status for a command's own status (0, 1, 2, 3, 130)."""
    if unloadable:
        return BISECT_SKIP
    return status if status in (BISECT_GOOD, BISECT_BAD) else BISECT_ABORT


def add_bisect(p: argparse.ArgumentParser) -> None:
    add(p, BISECT)


def add_device(p: argparse.ArgumentParser) -> None:
    add(p, DEVICE)


def add_root(p: argparse.ArgumentParser, what: str = "runs and reports") -> None:
    add(p, ROOT.but(help=f"folder holding the {what} (default {{default}})"))


def add_memcheck(p: argparse.ArgumentParser) -> None:
    add(p, MEMCHECK)


def add_call_checks(p: argparse.ArgumentParser) -> None:
    add(p, CALL_CHECKS_OPTION)


def add_reports(p: argparse.ArgumentParser, resumed: bool = False) -> None:
    """``--reports N|all``: how many failing cases of each failure class get a full
    report folder (report_cap.py). ``resumed``: the command can resume a run, whose
    own setting is then the default. None stands for the default (a run's setting)."""
    add(p, REPORTS.but(default=None, default_text=f"{REPORTS.default}" + ("; with --resume, the run's own" if resumed else "")))


def add_full_tensors(p: argparse.ArgumentParser) -> None:
    """``--full-tensors``: a report folder also keeps the whole tensors (report.py)."""
    add(p, FULL_TENSORS)


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
