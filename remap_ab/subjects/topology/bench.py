"""What ``remap-ab bench --subject topology`` times: the shapes, as data, and each one
as a pair of calls (A: the torch pair, B: the fused kernel, or ``--a``/``--b``) on the
same inputs, equal bit for bit (calls.first_mismatch) before and after timing.

The shapes run from one decode row to a 16384-row prefill step, at the model widths
topk 2048 and 2176, with S 8, 32 and 64; keep = topk / 2 and max_replacements = S (the
budget the merge spends), inputs from the grid's patterns ("mixed": every class of
entry, lengths from zero to 2**31 - 1). The timing, the gate and the page are the
bench's (remap_ab/bench/pairs.py), and so are the options: the shared ones alone.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab.bench import pairs
from remap_ab.bench.session import Session
from remap_ab.subjects.topology import calls
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import generate

ROWS = (1, 16, 256, 1024, 4096, 16384)  # decode batches to a prefill step
TOPKS = (2048, 2176)  # the models' index widths
SEGMENTS = (8, 32, 64)
LEARNED = "mixed"
SEED = 1

# remap-ab bench --help's text for this subject.
DESCRIPTION = """\
--subject topology: the shapes of remap_ab/subjects/topology/bench.py (rows 1 to 16384,
topk 2048 and 2176, S 8, 32 and 64), A and B on the same inputs, each shape checked equal
before and after timing, each side in a CUDA graph where it can be captured and eagerly
where not; µs per call of A and B, B/A and the speed gate (remap_ab/bench/pairs.py),
written to <root>/bench/<stamp>/ (or --report DIR): index.html, results.json and
tables.zip. It takes the shared options alone. Exit status: 0 every shape timed, equal
before and after and not slower beyond noise; 1 otherwise; 2 bad input, or without a
GPU."""

KEY = "topology"
TITLE = "Topology-witness merge: the fused kernel (B) against the torch pair (A)"
QUESTION = ("µs per call of B and A on the same inputs, from one decode row to a 16384-row prefill step, at topk 2048 "
            "and 2176; keep = topk / 2, max_replacements = S; each shape checked bit-exact (B equal to A) before "
            "and after timing.")


def shape(rows: int, topk: int, segments: int, learned: str = LEARNED, seed: int = SEED) -> TopologyCase:
    """One shape as a case (its inputs are the case's: the same bytes on any device)."""
    return TopologyCase(rows=rows, topk=topk, segments=segments, keep=topk // 2, max_replacements=segments,
                        learned=learned, seed=seed)


def shapes(rows=ROWS, topks=TOPKS, segments=SEGMENTS) -> tuple[TopologyCase, ...]:
    """Every shape, rows outermost (the smallest run first)."""
    return tuple(shape(r, k, s) for r, k, s in itertools.product(rows, topks, segments))


def labels(case: TopologyCase) -> dict:
    return {"rows": case.rows, "topk": case.topk, "segments": case.segments, "keep": case.keep,
            "max_replacements": case.max_replacements, "learned": case.learned}


@dataclass(frozen=True)
class Pair:
    """One shape's two calls on inputs made on the device (pairs.TimedPair)."""

    case: TopologyCase
    a: Callable[[], torch.Tensor]
    b: Callable[[], torch.Tensor]
    names: tuple[str, str] = ("a", "b")  # A's and B's canonical names, for the replay line
    eager: tuple = ()  # both sides are kernels: each timed in a CUDA graph

    @property
    def labels(self) -> dict:
        return labels(self.case)

    @property
    def replay(self) -> str:
        return self.case.replay_command(*self.names)

    def disagreement(self, a_out: object, b_out: object) -> Optional[str]:
        if not isinstance(a_out, torch.Tensor) or not isinstance(b_out, torch.Tensor):
            return f"a side returned {type(a_out).__name__} and {type(b_out).__name__}, not tensors"
        mismatch = calls.first_mismatch("merged", a_out, b_out)
        if mismatch is None:
            return None
        if mismatch.row < 0:
            return f"merged: A {a_out.dtype} {tuple(a_out.shape)}, B {b_out.dtype} {tuple(b_out.shape)}"
        return mismatch.describe("A", "B")


def pair(case: TopologyCase, a: str, b: str, device: str) -> Pair:
    """``case``'s inputs on ``device`` and the calls of implementations ``a`` and ``b``
    (names as ``--a``/``--b`` take them: calls.resolve)."""
    impl_a, impl_b = calls.resolve(a, "a"), calls.resolve(b, "b")
    a_mod, b_mod = impl_a.module, impl_b.module
    inputs = generate(case, device)
    return Pair(case, lambda: calls.call_module(a_mod, inputs, case), lambda: calls.call_module(b_mod, inputs, case),
                (impl_a.name, impl_b.name))


def add_arguments(parser, groups: dict) -> None:
    """No options beyond the shared ones (remap_ab/commands/bench.py)."""


def main(args, session: Session) -> int:
    return pairs.main(sys.modules[__name__], args, session)
