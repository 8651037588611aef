"""The rejection calls (rejections.toml) and the one check of each."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Optional

import torch

from remap_ab.subjects.topology.calls import ENTRY_POINT

REJECTIONS_FILE = Path(__file__).with_name("rejections.toml")
_CALL_FIELDS = ("learned_shape", "lens_shape", "segments", "keep", "max_replacements")


@dataclass(frozen=True)
class Rejection:
    """One bad call and the ValueError message it must raise."""

    id: str
    learned_shape: tuple[int, ...]
    lens_shape: tuple[int, ...]
    segments: int
    keep: int
    max_replacements: int
    match: str

    def arguments(self, device: str = "cpu") -> tuple:
        learned = torch.zeros(self.learned_shape, dtype=torch.int32, device=device)
        lens = torch.zeros(self.lens_shape, dtype=torch.int32, device=device)
        return learned, lens, self.segments, self.keep, self.max_replacements


@cache
def rejections() -> tuple[Rejection, ...]:
    data = tomllib.loads(REJECTIONS_FILE.read_text())
    base = data["base"]
    out = []
    for entry in data["rejection"]:
        fields = {name: entry.get(name, base[name]) for name in _CALL_FIELDS}
        fields["learned_shape"] = tuple(fields["learned_shape"])
        fields["lens_shape"] = tuple(fields["lens_shape"])
        out.append(Rejection(id=entry["id"], match=entry["match"], **fields))
    return tuple(out)


def check(mod: ModuleType, rejection: Rejection, device: str = "cpu") -> Optional[str]:
    """None when ``mod``'s entry point rejects the call as declared, else what
    happened instead (one line)."""
    try:
        getattr(mod, ENTRY_POINT)(*rejection.arguments(device))
    except ValueError as exc:
        if re.search(rejection.match, str(exc)) is None:
            return f"{rejection.id}: ValueError {str(exc)!r} does not match {rejection.match!r}"
        return None
    except Exception as exc:  # any other exception is a wrong rejection, reported as such
        return f"{rejection.id}: raised {type(exc).__name__} ({exc}), not ValueError"
    return f"{rejection.id}: accepted (no ValueError)"
