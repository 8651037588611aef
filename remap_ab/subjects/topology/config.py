"""A topology case: the parameters of one call plus the patterns its inputs are
drawn from, and the value domains the grid and Hypothesis draw from.

A case either names patterns (``lens``, ``learned``, ``seed``: inputs.py draws the
tensors) or carries its rows explicitly (``explicit_learned``/``explicit_lens``: a
shrunk counterexample, replayed exactly).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from remap_ab import command_line

INT32_MAX = 2**31 - 1
MAX_SEGMENTS = 64  # the fused entry point's cap (one int64 occupancy mask)

# Context-length classes (per row): what each means is inputs._length's job.
LENGTH_CLASSES = ("zero", "one", "below", "equal", "above", "far")
# A case's context-length pattern: one class for every row, or "mixed" (each row draws one).
LENS_PATTERNS = (*LENGTH_CLASSES, "mixed")

# Learned-entry classes (per entry):
#   valid    uniform in [0, L)
#   pad      -1
#   dup      one of four values in [0, L): rows repeat entries
#   beyond   in [L, 2**31 - 1]: illegal, but the code clamps it into a segment
#   cluster  in a narrow window of [0, L): most segments stay unoccupied
LEARNED_CLASSES = ("valid", "pad", "dup", "beyond", "cluster")
# A learned pattern: relative weights of the classes above, per entry.
LEARNED_PATTERNS: dict[str, tuple[int, ...]] = {
    "valid": (1, 0, 0, 0, 0),
    "padded": (1, 1, 0, 0, 0),
    "duplicates": (1, 0, 2, 0, 0),
    "beyond": (2, 0, 0, 1, 0),
    "clustered": (0, 1, 0, 0, 3),
    "empty": (0, 1, 0, 0, 0),
    "dense": (0, 0, 1, 0, 0),
    "mixed": (4, 3, 1, 1, 3),
}

# The value domains (issue 42, "Grid and soak cover").
ROWS_DOMAIN = (1, 16384)  # one decode token to a prefill batch
TOPK_DOMAIN = (1, 2048, 2176)  # any width from 1; the model widths 2048 and 2176
SEGMENTS_DOMAIN = (1, MAX_SEGMENTS)


@dataclass(frozen=True)
class TopologyCase:
    """One call: ``fused_topology_witness_merge(learned [rows, topk], context_lens
    [rows], segments, keep, max_replacements)`` on inputs drawn from the patterns."""

    rows: int
    topk: int
    segments: int
    keep: int
    max_replacements: int
    lens: str = "mixed"
    learned: str = "mixed"
    seed: int = 0
    explicit_learned: Optional[tuple[tuple[int, ...], ...]] = None
    explicit_lens: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError(f"topology case {self.key()}: {'; '.join(problems)}")

    def problems(self) -> list[str]:
        """What makes this case unrunnable (empty: a valid case). Bad *call*
        arguments are the rejections' business (rejections.toml), not a case's."""
        out = []
        if self.rows < 0 or self.topk < 0:
            out.append("rows and topk must be >= 0")
        if not 1 <= self.segments <= MAX_SEGMENTS:
            out.append(f"segments must be in 1..{MAX_SEGMENTS}")
        if not 0 <= self.keep <= self.topk:
            out.append("keep must be in [0, topk]")
        if self.max_replacements < 0:
            out.append("max_replacements must be >= 0")
        if self.lens not in LENS_PATTERNS:
            out.append(f"lens must be one of {', '.join(LENS_PATTERNS)}")
        if self.learned not in LEARNED_PATTERNS:
            out.append(f"learned must be one of {', '.join(LEARNED_PATTERNS)}")
        if (self.explicit_learned is None) != (self.explicit_lens is None):
            out.append("explicit_learned and explicit_lens come together")
        if self.explicit_learned is not None and self.explicit_lens is not None:
            if len(self.explicit_learned) != self.rows or len(self.explicit_lens) != self.rows:
                out.append("explicit rows must number `rows`")
            elif any(len(r) != self.topk for r in self.explicit_learned):
                out.append("every explicit learned row must have `topk` entries")
        return out

    @property
    def budget(self) -> int:
        return min(self.max_replacements, self.topk - self.keep)

    def key(self) -> str:
        """A short stable name (grid ids, reports)."""
        base = f"R{self.rows}-k{self.topk}-S{self.segments}-keep{self.keep}-max{self.max_replacements}"
        if self.explicit_learned is not None:
            return base + "-explicit"
        return f"{base}-{self.lens}-{self.learned}-seed{self.seed}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> TopologyCase:
        data = json.loads(text)
        for name in ("explicit_learned", "explicit_lens"):
            if data.get(name) is not None:
                value = data[name]
                data[name] = tuple(tuple(r) for r in value) if name == "explicit_learned" else tuple(value)
        return cls(**data)

    def replay_command(self, a: str = "a", b: str = "b", path_entries: Iterable[str] = ()) -> str:
        """The one line that reruns this case: A, B, the oracle and every property
        (``remap-ab replay --subject topology``), naming A and B where they are not the
        defaults and the PYTHONPATH folders a custom module is imported from."""
        return command_line.line("replay", self.to_json(), subject="topology", a=a if a != "a" else None,
                                 b=b if b != "b" else None, path_entries=path_entries)
