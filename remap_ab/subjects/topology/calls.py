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
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Optional

import torch

from remap_ab import sources
from remap_ab.errors import ImplementationError, exception_line
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


# What each role's module must expose: A is the pair (its witnesses are compared with
# the oracle's), B only the fused entry point.
REQUIRED = {"a": ("topology_witnesses", ENTRY_POINT), "b": (ENTRY_POINT,)}


@dataclass(frozen=True)
class Resolved:
    """An implementation name, loaded: its canonical name (what run.json and the workers
    use), its module and, for a file or a revision, where its bytes came from."""

    name: str
    module: ModuleType
    source: Optional[dict] = None


_RESOLVED: dict[tuple[str, str], Resolved] = {}


def resolve(name: str, role: str) -> Resolved:
    """``name`` as side ``role`` ("a" or "b"): ``a``/``b`` (IMPLEMENTATIONS), a ``.py``
    file, ``REV:PATH`` or a dotted module path exposing ``REQUIRED[role]``;
    ImplementationError (one line) when it does not load or lacks them."""
    key = (name, role)
    if key in _RESOLVED:
        return _RESOLVED[key]
    source = None
    if name in IMPLEMENTATIONS:
        mod, canonical = module(name), name
    else:
        spec = sources.parse(name)
        if spec is not None:
            mod, loaded = sources.load(spec)
            canonical, source = spec.canonical, loaded.to_dict()
        else:
            try:
                mod, canonical = importlib.import_module(name), name
            except Exception as exc:  # whatever the module does while importing is its own
                raise ImplementationError(
                    f"--{role} {name}: cannot import it ({exception_line(exc)}); give a, b, a .py file, REV:PATH or a "
                    f"dotted module path exposing {ENTRY_POINT}"
                ) from None
    missing = [f for f in REQUIRED[role] if not callable(getattr(mod, f, None))]
    if missing:
        raise ImplementationError(
            f"--{role} {name}: it has no {' and no '.join(missing)}; side {role} must expose {', '.join(REQUIRED[role])}"
        )
    _RESOLVED[key] = Resolved(canonical, mod, source)
    return _RESOLVED[key]


def forget(name: str) -> None:
    """Drop what ``resolve`` loaded for ``name``: a later ``resolve`` imports it again
    (a module of that name written elsewhere since, as the suite's mutants are)."""
    for key in [k for k in _RESOLVED if k[0] == name]:
        del _RESOLVED[key]
    sys.modules.pop(name, None)


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
    return witnesses_of(module("a"), inputs, case)


def witnesses_of(mod: ModuleType, inputs: TopologyInputs, case: TopologyCase) -> torch.Tensor:
    """``mod``'s witnesses ``[rows, S]`` (a module with the pair's first function)."""
    return mod.topology_witnesses(inputs.learned, inputs.context_lens, case.segments)
