"""The revisions that touched a file, oldest first, as ``git log --follow`` lists them
(first parent by default), each with the file's path there (renames followed) and its
blob (the bytes' git id: two revisions with one blob hold the same bytes).

Read with three git commands whatever the history's length: ``rev-parse`` (the
repository and the range), ``log`` (the revisions and each one's change to the file)
and ``cat-file --batch-check`` (every revision's blob at once). Nothing is checked out.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from remap_ab.errors import UsageError
from remap_ab.sources import SHORT

_RECORD, _FIELD = "\x1e", "\x1f"
_FORMAT = f"--format={_RECORD}%H{_FIELD}%aI{_FIELD}%s"


@dataclass(frozen=True)
class Revision:
    """One revision of the file. ``change``: git's letter for what the commit did to it
    (A added, M modified, R renamed, D deleted, T type changed; "" for the start of a
    range, which is compared, not walked); ``blob`` is "" where the file is absent."""

    commit: str
    date: str  # the author date, ISO 8601
    subject: str  # the commit message's first line
    path: str  # the file's path at this commit
    blob: str
    change: str
    renamed_from: str = ""

    @property
    def short(self) -> str:
        return self.commit[:SHORT]

    @property
    def name(self) -> str:
        """The implementation name that loads the file at this commit (sources.py)."""
        return f"{self.commit}:{self.path}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Walk:
    """What was walked: the repository's top folder, the file as asked, the bounds."""

    repo: str
    path: str
    start: Optional[str]  # the commit the range starts after (its file is the first compared), None: the file's start
    end: str  # the commit the walk starts from (HEAD by default)
    revisions: tuple[Revision, ...]


def _git(repo: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, input=stdin or None,
                              timeout=300)
    except FileNotFoundError:
        raise UsageError("remap-ab history reads the file's history with git, which is not on PATH; install git") from None


def top_folder(repo: str) -> str:
    """The top folder of the git repository ``repo`` is in (UsageError if none)."""
    if not Path(repo).is_dir():
        raise UsageError(f"--repo {repo}: not a folder; give a git checkout (the repository holding the file)")
    found = _git(repo, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise UsageError(f"--repo {repo}: not inside a git repository; give a git checkout (the repository holding the file)")
    return found.stdout.strip()


def repo_path(top: str, path: str) -> str:
    """``path`` relative to the repository's top folder (an absolute path inside it is
    made relative), in git's spelling."""
    given = Path(path).expanduser()
    if given.is_absolute():
        try:
            path = str(given.resolve().relative_to(Path(top).resolve()))
        except ValueError:
            raise UsageError(f"PATH {path}: outside the repository {top}; give the file's path in it") from None
    norm = posixpath.normpath(path.replace(os.sep, "/"))
    if norm in (".", "..") or norm.startswith("../"):
        raise UsageError(f"PATH {path}: not a file in the repository {top}; give the file's path relative to its top folder")
    return norm


def commit_of(top: str, rev: str, option: str) -> str:
    found = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if found.returncode != 0 or not rev:
        raise UsageError(f"{option}: revision {rev!r} does not exist in the git repository {top}; "
                         "give a branch, tag or commit of it")
    return found.stdout.strip()


def parse_range(top: str, text: Optional[str]) -> tuple[Optional[str], str]:
    """(start, end) commits of ``--range``: ``REV1..REV2`` (the revisions after REV1 up
    to REV2; REV2 empty: HEAD), ``REV`` (every revision up to REV), None (up to HEAD)."""
    if text is None:
        return None, commit_of(top, "HEAD", "the repository's HEAD")
    if "..." in text:
        raise UsageError(f"--range {text}: a symmetric difference (A...B) has no order; give REV1..REV2")
    if ".." in text:
        first, _, last = text.partition("..")
        if not first:
            raise UsageError(f"--range {text}: give the revision the range starts after, REV1..REV2")
        return commit_of(top, first, f"--range {text}"), commit_of(top, last or "HEAD", f"--range {text}")
    return None, commit_of(top, text, f"--range {text}")


def walk(repo: str, path: str, bounds: Optional[str] = None, all_parents: bool = False) -> Walk:
    """The revisions that touched ``path`` (as it is named at the walk's end), oldest
    first. UsageError: not a git repository, a revision of the range that does not
    exist, a file no revision walked ever held."""
    top = top_folder(repo)
    path = repo_path(top, path)
    start, end = parse_range(top, bounds)
    kind = _git(top, "cat-file", "-t", f"{end}:{path}")
    if kind.stdout.strip() == "tree":  # git log would walk every file under it
        raise UsageError(f"PATH {path}: a folder at {end[:SHORT]} in {top}; give the implementation file's path")
    parents = [] if all_parents else ["--first-parent", "--diff-merges=first-parent"]
    spec = f"{start}..{end}" if start else end
    log = _git(top, "log", "--follow", "-M", "--name-status", _FORMAT, *parents, spec, "--", path)
    if log.returncode != 0:
        raise UsageError(f"git log of {path} in {top} failed: {' '.join(log.stderr.split())[:300]}")
    newest_first, current = [], path
    for record in log.stdout.split(_RECORD)[1:]:
        head, _, body = record.partition("\n")
        commit, date, subject = (head.split(_FIELD) + ["", ""])[:3]
        change, here, before = "M", current, ""
        for line in body.splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and parts[0]:
                change = parts[0][0]
                here = parts[-1]
                before = parts[1] if change in "RC" and len(parts) == 3 else ""
                break
        newest_first.append((commit, date, subject, here, change, before if change == "R" else ""))
        current = before or here
    if not newest_first:
        where = f"in {bounds}" if bounds else "in the history of HEAD"
        raise UsageError(f"PATH {path}: no revision {where} of {top} touched it (it never existed there); "
                         f"check the path (git log --follow -- {path})")
    oldest = list(reversed(newest_first))
    if start is not None:  # the range's start: its file is what the first revision walked is compared with
        first = oldest[0]
        shown = _git(top, "log", "-1", _FORMAT, start)
        _, date, subject = (shown.stdout.strip(_RECORD + "\n").split(_FIELD) + ["", ""])[:3]
        oldest.insert(0, (start, date, subject, first[5] or first[3], "", ""))
    blobs = _blobs(top, [(c, p) for c, _, _, p, ch, _ in oldest], [ch == "D" for *_, ch, _ in oldest])
    revisions = tuple(Revision(c, d, s, p, blob, ch, before) for (c, d, s, p, ch, before), blob in zip(oldest, blobs))
    if start is not None and not revisions[0].blob:
        revisions = revisions[1:]  # the file was added inside the range
    return Walk(top, path, start, end, revisions)


def _blobs(top: str, where: list[tuple[str, str]], deleted: list[bool]) -> list[str]:
    """The blob of each (commit, path); "" where the file is absent."""
    found = _git(top, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                 stdin="".join(f"{c}:{p}\n" for c, p in where))
    lines = found.stdout.splitlines()
    if found.returncode != 0 or len(lines) != len(where):
        raise UsageError(f"git cat-file could not read the file's revisions in {top}: {' '.join(found.stderr.split())[:300]}")
    return ["" if gone else (line.split()[0] if line.endswith(" blob") else "") for line, gone in zip(lines, deleted)]


def revision_at(top: str, rev: str, paths: list[str], option: str) -> Revision:
    """The file at ``rev`` (--baseline): under the first of ``paths`` (the names the walk
    saw, newest first) that it holds. UsageError if the revision or the file is missing."""
    commit = commit_of(top, rev, option)
    shown = _git(top, "log", "-1", _FORMAT, commit)
    _, date, subject = (shown.stdout.strip(_RECORD + "\n").split(_FIELD) + ["", ""])[:3]
    blobs = _blobs(top, [(commit, p) for p in paths], [False] * len(paths))
    for path, blob in zip(paths, blobs):
        if blob:
            return Revision(commit, date, subject, path, blob, "")
    raise UsageError(f"{option} {rev}: the file ({', '.join(dict.fromkeys(paths))}) does not exist at commit "
                     f"{commit[:SHORT]}; give a revision that holds it")
