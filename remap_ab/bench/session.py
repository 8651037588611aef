"""What ``remap-ab bench`` hands a subject's bench part, beside the parsed options: the
device chosen, the environment recorded beside the page, the command line as run, and
the output folder, made only when the part asks for it (after its options are checked:
bad input writes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Session:
    device: str  # "cuda" or "cpu" (the interpreter)
    environment: dict  # python, torch, triton and, on a GPU, its name: the page's metadata
    command: str  # the command line as run (remap_ab/command_line.py)
    output_folder: Callable[[], Path]  # --report DIR, else ROOT/bench/<stamp>/, made when called
    # bench.pairs.main, for a part that is a pair bench (shapes and their pairs) but lives
    # below the bench machinery (a declared subject's: declare/parts.py)
    time_pairs: Optional[Callable[..., int]] = None
