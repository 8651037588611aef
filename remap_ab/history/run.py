"""The walk: each revision of the file, oldest first, compared by a sweep with the last
revision before it that loads (or with ``--baseline``'s), one row each.

A revision is loaded once per blob to learn whether it loads (``Subject.select`` with
it as A and B: the sweep's own import, here once; its answer kept in history.json by
blob), so a file that does not load at a revision is a row (not loadable: why), and the
next revision is compared with the last one that loaded. A pair whose two files have
the same bytes is not swept (skipped: nothing can differ); a pair holding the same two
files as one swept before takes its verdict (``same_as``). Every other pair is one
``sweep.run.Sweep`` in the history folder: its worker pool (``-j``), its GPUs, its run
folder, its summary, its resume.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Optional

from remap_ab import command_line, runtime, sources, subjects
from remap_ab.errors import ImplementationError, UnloadableFileError, UsageError
from remap_ab.history import row as rowmod
from remap_ab.history import state as statemod
from remap_ab.history.revisions import Revision, revision_at, walk
from remap_ab.history.row import Row
from remap_ab.options import checked_output_dir
from remap_ab.schema import Strict
from remap_ab.sweep.run import Sweep, SweepOptions
from remap_ab.sweep.run_folder import SIZE_KEY
from remap_ab.sweep.settings import arguments

FORMAT = 1  # --json's document
# What --json prints of the settings (history.json's, flat), in this order.
SETTINGS = ("repo", "path", "bounds", "baseline", "all_parents", "subject", "grid_file", "filters", SIZE_KEY, "device",
            "reports")


class HistoryOptions(Strict):
    """What a history walks, and every pair's sweep settings whole (``sweep``), validated
    once from the command line; None where ``History.prepare`` decides. ``prepare``
    replaces it with the options resolved (a resume's read back from history.json)."""

    repo: Optional[str] = None  # None: $REMAP_AB_REPO, else the current folder; resolved: the top folder
    path: Optional[str] = None  # the file, as named at the walk's end (None only with resume)
    bounds: Optional[str] = None  # REV1..REV2 or REV; None: up to HEAD; resolved: commits
    baseline: Optional[str] = None  # every revision against this one instead of the one before; resolved: its commit
    all_parents: bool = False
    resume: bool = False  # the history's; each pair's sweep resumes where its run folder has a run.json
    # Every pair's sweep but its A, B and run folder (``pair``); its root and run name the
    # history folder; workers, batch and case_timeout are this session's, a resume's too.
    sweep: SweepOptions = SweepOptions(progress=False)

    # What history.json keeps beside the sweep's run-level settings (``stored``).
    WALK: ClassVar[tuple[str, ...]] = statemod.WALK
    ARGUMENTS: ClassVar[dict[str, str]] = {"bounds": "range"}  # a field whose argparse dest has another name
    PAIR: ClassVar[tuple[str, ...]] = ("a", "b")  # each pair's own, not kept for the history

    @classmethod
    def from_args(cls, args: Any) -> HistoryOptions:
        """The options ``remap-ab history``'s arguments give (--no-progress is the
        command's; no pair's sweep prints progress)."""
        return cls(**arguments(cls, args, cls.ARGUMENTS), sweep=SweepOptions.from_args(args, resume=False, progress=False))

    def replaced(self, **changes: Any) -> HistoryOptions:
        """These options with ``changes``: a new object, validated like the first."""
        return type(self).model_validate({**dict(self), **changes})

    def stored(self) -> dict[str, Any]:
        """What history.json keeps (what --resume runs again): the walk, and the pairs'
        run-level sweep settings as run.json keeps them (``SweepOptions.stored``)."""
        sweep = {k: v for k, v in self.sweep.stored().items() if k not in self.PAIR}
        return {**self.model_dump(include=set(self.WALK)), "sweep": sweep}

    def resumed(self, settings: dict) -> HistoryOptions:
        """These options with history.json's ``settings`` (``state.State.open`` checked
        them); this session's workers, batch and timeout kept."""
        return self.replaced(**{f: settings[f] for f in self.WALK}, sweep=self.sweep.resumed(settings["sweep"]))

    def pair(self, a: str, b: str, folder: Path, name: str, resume: bool) -> SweepOptions:
        """A pair's sweep: these settings, A and B, its run folder in the history folder."""
        return self.sweep.replaced(a=a, b=b, root=str(folder), run=name, resume=resume)

    def flat(self) -> dict[str, Any]:
        """The settings as --json prints them (``SETTINGS``)."""
        stored = self.stored()
        return {k: stored["sweep"][k] if k in stored["sweep"] else stored.get(k) for k in SETTINGS}


class History:
    """``prepare`` (every check before anything is written), then ``run``: the rows,
    each handed to ``on_row`` as it is made, and the document ``--json`` prints."""

    def __init__(self, opts: HistoryOptions, on_row: Callable[[Row], None] = lambda row: None,
                 on_pair: Callable[[str], None] = lambda line: None):
        self.opts = opts
        self.on_row = on_row
        self.on_pair = on_pair  # a line before each pair's sweep (stderr, in the command)
        self.rows: list[Row] = []
        self.ran = 0
        self.reused = 0
        self.pair_seconds: list[float] = []
        self.interrupted = ""
        self.interrupted_status = 0

    # -- setup
    def prepare(self) -> None:
        o = self.opts  # what was asked; self.opts becomes the options resolved, a new object
        if o.resume:
            self.state = statemod.State.open(statemod.find(o.sweep.root, o.sweep.run))
            try:
                self.opts = o.resumed(self.state.settings)
                self._walk_of(self.opts)
            except BaseException:
                self.state.close()
                raise
            return
        self._walk_of(o)
        if self.baseline is not None:  # every pair's A: a baseline that does not load is the command's input
            with self._repository():
                why = self._probe(self.baseline)
            if why:
                raise UsageError(f"--baseline {o.baseline}: the file does not load at {self.baseline.short}: {why}")
        w = self.walk
        self.opts = o = o.replaced(repo=w.repo, path=w.path, bounds=f"{w.start}..{w.end}" if w.start else w.end,
                                   baseline=self.baseline.commit if self.baseline else None,
                                   sweep=o.sweep.replaced(subject=self.subject.name, device=self.device))
        checked_output_dir(o.sweep.root, "--root")
        name = o.sweep.run or statemod.new_name(w.path)
        self.state = statemod.State.create(Path(o.sweep.root) / name, {**o.stored(), "command": " ".join(sys.argv)})

    def _walk_of(self, o: HistoryOptions) -> None:
        """The subject, the revisions, the baseline and the device that ``o`` names."""
        self.subject = subjects.get(o.sweep.subject)
        self.walk = walk(sources.repo_dir(o.repo), o.path or "", o.bounds, o.all_parents)
        self.baseline = revision_at(self.walk.repo, o.baseline, self._paths(), "--baseline") if o.baseline else None
        self.device = runtime.select(o.sweep.device)

    def _paths(self) -> list[str]:
        return list(dict.fromkeys(p for r in reversed(self.walk.revisions) for p in (r.path, r.renamed_from) if p))

    # -- running
    def run(self) -> dict:
        try:
            with self._repository():
                self._walk()
        except KeyboardInterrupt as exc:  # between pairs (a pair's sweep returns its own interruption)
            self.interrupted = getattr(exc, "name", "SIGINT")
            self.interrupted_status = int(getattr(exc, "exit_status", 130))
        finally:
            self.state.close()
        return self.document()

    @contextlib.contextmanager
    def _repository(self) -> Iterator[None]:
        """$REMAP_AB_REPO the walk's repository, where this process and the pairs' workers
        read the revisions (COMMIT:PATH names), restored after."""
        saved = os.environ.get(sources.REPO_VARIABLE)
        os.environ[sources.REPO_VARIABLE] = self.walk.repo
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(sources.REPO_VARIABLE, None)
            else:
                os.environ[sources.REPO_VARIABLE] = saved

    def _walk(self) -> None:
        previous: Optional[Revision] = None  # the last revision that loaded
        swept: dict[tuple[str, str], Row] = {}  # (A's blob, B's blob) -> the row of the pair that held them
        for rev in self.walk.revisions:
            against = self.baseline or previous
            why = self._load(rev)
            if why:
                self._emit(Row.of(rev, rowmod.UNLOADABLE, verdict_text=rowmod.UNLOADABLE, change=why,
                                  against=against.commit if against else ""))
                continue
            if self.baseline is not None and rev.commit == self.baseline.commit:
                self._emit(Row.of(rev, rowmod.BASE, verdict_text=rowmod.BASE, change="--baseline: every revision is compared with it"))
                continue
            if against is None:
                previous = rev
                self._emit(Row.of(rev, rowmod.BASE, verdict_text=rowmod.BASE,
                                  change="the first revision that loads: the next is compared with it"))
                continue
            previous = rev
            if rev.blob == against.blob:
                self._emit(Row.of(rev, rowmod.SKIPPED, against=against.commit, verdict_text=rowmod.SKIPPED,
                                  change=f"the file's bytes are those at {against.short} (not swept)"))
                continue
            key = (against.blob, rev.blob)
            if key in swept:
                self._emit(rowmod.same_files(rev, against, swept[key]))
                continue
            row = self._pair(rev, against)
            self._emit(row)
            if row.verdict == rowmod.INCOMPLETE:
                return  # interrupted: --resume continues this pair's sweep
            swept[key] = row

    def _emit(self, row: Row) -> None:
        self.rows.append(row)
        self.on_row(row)

    def _load(self, rev: Revision) -> str:
        """"" where the file loads at ``rev``, else why not (one line); per blob, once."""
        if not rev.blob:
            return f"the file is deleted at this revision ({rev.path})"
        known = self.state.load(rev.blob)
        if known is not None:
            return str(known.get("why", ""))
        why = self._probe(rev)
        self.state.loaded(rev.blob, {"why": why, "first_seen": rev.commit})
        return why

    def _probe(self, rev: Revision) -> str:
        """"" where the subject's selection loads the file at ``rev`` as A and B, else why not."""
        s = self.opts.sweep
        try:
            self.subject.select(s.grid_file, list(s.filters), s.max_size, rev.name, rev.name, self.device, None)
            return ""
        except ImplementationError as exc:  # the revision and its file exist: what fails is the file's (UnloadableFileError)
            return " ".join(str(exc).replace(f"{rev.short}:{rev.path}", rev.path).split())

    def _pair(self, rev: Revision, against: Revision) -> Row:
        name = f"{rev.short}-vs-{against.short}"
        done = self.state.row(name)
        if done is not None:
            self.reused += 1
            return Row.from_dict(done)
        folder = self.state.folder / name
        resume = (folder / "run.json").is_file()
        if folder.exists() and not resume:
            shutil.rmtree(folder)  # made, then cut short before its run.json: holds nothing
        self.on_pair(f"{'resuming' if resume else 'sweeping'} {rev.short} against {against.short} ({rev.subject[:60]})")
        sweep = Sweep(self.opts.pair(against.name, rev.name, self.state.folder, name, resume))
        start = time.perf_counter()
        try:
            sweep.prepare()
        except UnloadableFileError as exc:  # loaded above; a file that stops loading is still the file's
            return Row.of(rev, rowmod.UNLOADABLE, against=against.commit, verdict_text=rowmod.UNLOADABLE,
                          change=" ".join(str(exc).split()))
        summary = sweep.run()
        seconds = time.perf_counter() - start
        self.ran += 1
        self.pair_seconds.append(seconds)
        report_file = self.subject.summary_lines(summary).report_file
        row = rowmod.judged(rev, against, summary, report_file, seconds)
        if summary.get("interrupted"):
            self.interrupted, self.interrupted_status = summary["interrupted"], int(summary["interrupted_status"])
        else:
            self.state.finish(name, row.to_dict())
        return row

    # -- the outcome
    def status(self) -> int:
        """The exit status, by a sweep's rules: 0 every row passed (a pair swept, skipped
        or the base), 1 some did not (a pair failed, a revision does not load, a pair not
        finished), 130/143 interrupted."""
        if self.interrupted:
            return self.interrupted_status
        return 0 if self.rows and all(r.passed for r in self.rows) else 1

    def document(self) -> dict:
        """What ``--json`` prints: the settings, every row, the counts and the status."""
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        complete = not self.interrupted and len(self.rows) == len(self.walk.revisions)
        return {
            "format": FORMAT,
            "folder": str(self.state.folder),
            **self.opts.flat(),
            "revisions": len(self.walk.revisions),
            "rows": [r.to_dict() for r in self.rows],
            "counts": counts,
            "pairs_run": self.ran,
            "pairs_done_before": self.reused,
            "seconds_per_pair": round(sum(self.pair_seconds) / len(self.pair_seconds), 3) if self.pair_seconds else None,
            "complete": complete,
            "interrupted": self.interrupted,
            "passed": complete and self.status() == 0,
            "exit_status": self.status(),
            "resume": "" if complete else resume_command(self.state.folder),
        }


def resume_command(folder: Path) -> str:
    return command_line.line("history", options=[("--resume", None), ("--run", folder.name),
                                                 ("--root", str(folder.parent))])


def refuse_with_resume(opts: HistoryOptions, given: list[str]) -> None:
    """--resume runs a history with its own settings: any of them given is refused."""
    if opts.resume and given:
        raise UsageError(f"--resume continues a history with its own settings; drop {', '.join(given)}")
