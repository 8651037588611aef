"""The one way to call the subject's implementations, and what "equal" means.

Sides: ``a`` (the torch pair), ``b`` (the fused Triton kernel, forced to launch on
any device: on the CPU it runs in Triton's interpreter, never the torch fallback)
and ``oracle`` (oracle.py). Each is called through its module's
``fused_topology_witness_merge``; a mutant of B is a module with the same entry
point (``call_module``).
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Optional

import torch

from remap_ab.subjects.topology import oracle
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import TopologyInputs

IMPLEMENTATIONS = {"a": "kernels_topology.torch_pair", "b": "kernels_topology.fused"}
ENTRY_POINT = "fused_topology_witness_merge"

# What "equal" means for each output: every output of this subject is compared bit
# for bit (dtype, shape and every element).
EQUALITY = {"merged": "bit-exact", "witnesses": "bit-exact"}


@dataclass(frozen=True)
class Mismatch:
    """The first element (row-major) where two outputs differ."""

    output: str
    row: int
    col: int
    left: int
    right: int

    def describe(self, left: str, right: str) -> str:
        return f"{self.output}[{self.row}, {self.col}]: {left} {self.left}, {right} {self.right}"


def first_mismatch(output: str, left: torch.Tensor, right: torch.Tensor) -> Optional[Mismatch]:
    """None when ``left`` and ``right`` are bit-identical, else the first difference
    (a dtype or shape difference is reported at (-1, -1))."""
    if left.dtype != right.dtype or left.shape != right.shape:
        return Mismatch(output, -1, -1, -1, -1)
    diff = (left.cpu() != right.cpu()).nonzero()
    if diff.numel() == 0:
        return None
    row, col = (int(v) for v in diff[0])
    return Mismatch(output, row, col, int(left[row, col]), int(right[row, col]))


def module(side: str) -> ModuleType:
    return importlib.import_module(IMPLEMENTATIONS[side])


def _forced(mod: ModuleType):
    """B's kernel launched whatever the device; A has nothing to force."""
    force = getattr(mod, "kernel_forced", None)
    return force() if force is not None else contextlib.nullcontext()


def call_module(mod: ModuleType, inputs: TopologyInputs, case: TopologyCase) -> torch.Tensor:
    """``mod``'s entry point on the case (merged ``[rows, topk]``)."""
    with _forced(mod):
        return getattr(mod, ENTRY_POINT)(inputs.learned, inputs.context_lens, case.segments, case.keep, case.max_replacements)


def call(side: str, inputs: TopologyInputs, case: TopologyCase) -> torch.Tensor:
    """The merged result of side ``a``, ``b`` or ``oracle`` on the case."""
    if side == "oracle":
        wit = oracle.witnesses(inputs.learned, inputs.context_lens, case.segments)
        return oracle.merge(inputs.learned, wit, case.keep, case.max_replacements)
    return call_module(module(side), inputs, case)


def witnesses(side: str, inputs: TopologyInputs, case: TopologyCase) -> torch.Tensor:
    """The witnesses ``[rows, S]`` of side ``a`` (the pair's first function) or the
    oracle; the fused kernel never materialises them."""
    if side == "oracle":
        return oracle.witnesses(inputs.learned, inputs.context_lens, case.segments)
    if side != "a":
        raise ValueError(f"only side a and the oracle compute witnesses, not {side!r}")
    return module("a").topology_witnesses(inputs.learned, inputs.context_lens, case.segments)
