"""The history folder (``<root>/<name>/``): ``history.json`` and one sweep run folder
per pair compared (``<B's commit>-vs-<A's commit>``, ``remap-ab report`` reads it).

history.json holds the settings (what ``--resume`` runs again: ``HistoryOptions.stored``,
the pairs' sweep settings as run.json keeps them, checked by the schema as run.json's
are), each finished pair's row by its folder's name, and what each blob's load gave (loadable, or why not): a
revision whose bytes were loaded once is never loaded again to learn it, in this run or
a resumed one. Written aside and renamed after every pair: a kill loses at most the
pair in flight, whose run folder the resumed sweep continues.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, create_model

from remap_ab import schema
from remap_ab.errors import UsageError
from remap_ab.sweep.run_folder import SIZE_KEY, RunLock

# 2: the pairs' sweep settings under "sweep"; 1 kept them beside the walk's (read as 2).
FORMAT = 2
FILE = "history.json"
PREFIX = "history-"


def new_name(path: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{PREFIX}{stamp}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', Path(path).name)[-40:]}"


def find(root: str, name: Optional[str]) -> Path:
    """The history folder ``name`` under ``root`` (a path works too), or the newest."""
    if name and (Path(name) / FILE).is_file():
        return Path(name)
    if name:
        folder = Path(root) / name
        if not (folder / FILE).is_file():
            raise UsageError(f"--resume --run {name}: no history folder {folder} ({FILE} missing); "
                             f"give the name of a folder under --root {root} that a history run made")
        return folder
    found = sorted(Path(root).glob(f"*/{FILE}"), key=lambda p: p.stat().st_mtime) if Path(root).is_dir() else []
    if not found:
        raise UsageError(f"--resume: no history folder under --root {root}; start one without --resume")
    return found[-1].parent


class State:
    """history.json, held under the folder's lock while a history runs in it."""

    def __init__(self, folder: Path, data: dict):
        self.folder = Path(folder)
        self.data = data
        self.lock = RunLock(self.folder)

    @classmethod
    def create(cls, folder: Path, settings: dict) -> State:
        folder = Path(folder)
        if (folder / FILE).exists():
            raise UsageError(f"history folder {folder} already exists; use --resume --run {folder.name} or another --run")
        folder.mkdir(parents=True, exist_ok=True)
        state = cls(folder, {"format": FORMAT, "settings": settings, "created": _now(), "rows": {}, "loads": {}})
        state.lock.acquire()
        state.save()
        return state

    @classmethod
    def open(cls, folder: Path) -> State:
        try:
            data = json.loads((Path(folder) / FILE).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{Path(folder) / FILE}: cannot be read ({exc}); start a new history without --resume") from None
        if not isinstance(data, dict) or data.get("format") not in (1, FORMAT) or not isinstance(data.get("settings"), dict):
            raise UsageError(f"{Path(folder) / FILE}: not a history this remap-ab wrote (format {FORMAT}); "
                             "start a new history without --resume")
        if data["format"] == 1:
            data["format"], data["settings"] = FORMAT, _from_format_1(data["settings"])
        schema.load(_settings_shape(), data["settings"], where=f"{Path(folder) / FILE}: settings", error=UsageError,
                    remedy="; the history folder is damaged: start a new history without --resume")
        data.setdefault("rows", {})
        data.setdefault("loads", {})
        state = cls(folder, data)
        state.lock.acquire()
        return state

    @property
    def settings(self) -> dict:
        return self.data["settings"]

    def row(self, pair: str) -> Optional[dict]:
        return self.data["rows"].get(pair)

    def finish(self, pair: str, row: dict) -> None:
        self.data["rows"][pair] = row
        self.save()

    def load(self, blob: str) -> Optional[dict]:
        return self.data["loads"].get(blob)

    def loaded(self, blob: str, result: dict[str, Any]) -> None:
        self.data["loads"][blob] = result
        self.save()

    def save(self) -> None:
        path = self.folder / FILE
        tmp = path.with_name(f".{FILE}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        os.replace(tmp, path)

    def close(self) -> None:
        self.lock.release()


# The walk's settings (HistoryOptions'), kept beside the pairs' sweep settings and the command line.
WALK = ("repo", "path", "bounds", "baseline", "all_parents")


def _from_format_1(settings: dict) -> dict:
    """Format 1's settings, the pairs' sweep settings beside the walk's, as format 2 keeps them."""
    walk = (*WALK, "command")
    return {**{k: v for k, v in settings.items() if k in walk}, "sweep": {k: v for k, v in settings.items() if k not in walk}}


@functools.cache
def _settings_shape() -> type:
    """history.json's settings: the walk's, and the pairs' run-level sweep settings in
    run.json's shape (``schema.RunSettings`` and the size cap)."""
    # reports null: not given, each pair's sweep takes its default (a run.json keeps it resolved).
    sweep = create_model("PairSettings", __base__=schema.with_size_cap(schema.RunSettings, SIZE_KEY),
                         reports=(Optional[schema.ReportCap], schema.ABSENT))
    return create_model(
        "HistorySettings", __base__=schema.Open, repo=(str, Field(min_length=1)), path=(str, Field(min_length=1)),
        bounds=(str, Field(min_length=1)), baseline=(Optional[str], ...), all_parents=(bool, ...),
        command=(str, schema.ABSENT), sweep=(sweep, ...))


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")
