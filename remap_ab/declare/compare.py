"""What "equal" means for a named output, and the evidence when it does not hold: how
many elements differ and the first ones, by index, with A's, B's and the oracle's value.

``bit_for_bit`` is every output's default: same type, shape and dtype, and every
element's bits equal (a float's NaN equals a NaN of the same bits, -0.0 differs from
0.0). A subject may declare a relaxation per output (``Output(name, differs=...)``): a
function of two tensors answering a bool tensor, True where they differ (``close`` is
one). A non-tensor output (a Python value) is compared with ``==``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

SHOWN = 8  # mismatching elements a row's evidence and a report list per output

_BITS = {8: "int64", 4: "int32", 2: "int16", 1: "uint8"}


def bit_for_bit(x: Any, y: Any) -> Any:
    """True where ``x`` and ``y`` (tensors of one shape and dtype) differ in their bits."""
    import torch

    if x.dtype.is_complex:
        return bit_for_bit(torch.view_as_real(x), torch.view_as_real(y)).any(-1)
    if x.dtype.is_floating_point:
        as_int = getattr(torch, _BITS[x.element_size()])
        return x.contiguous().view(as_int) != y.contiguous().view(as_int)
    return x != y


def close(atol: float, rtol: float = 0.0) -> Callable[[Any, Any], Any]:
    """A relaxation: elements differ where ``|x - y| > atol + rtol * |y|`` (NaN where
    both are NaN counts as equal)."""
    import torch

    def differs(x: Any, y: Any) -> Any:
        return ~torch.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)

    differs.__doc__ = f"within atol {atol:g}, rtol {rtol:g}"
    return differs


@dataclass(frozen=True)
class Output:
    """A named output and what equal means for it (``differs``; None: bit for bit)."""

    name: str
    differs: Optional[Callable[[Any, Any], Any]] = None

    def equality(self) -> str:
        return "bit for bit" if self.differs is None else (self.differs.__doc__ or self.differs.__name__).strip()


@dataclass
class Mismatch:
    """One output of one side that is not equal to its reference: ``problem`` (a type,
    shape or dtype line) or ``count`` of ``total`` elements differing, the first
    ``first`` (index tuples) of them."""

    output: str
    side: str  # "a" or "b" against the oracle, "b" against A without one
    count: int = 0
    total: int = 0
    first: list = field(default_factory=list)
    problem: str = ""


def _describe(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"{type(x).__name__} {x!r}"[:80]


def mismatch(out: Output, side: str, got: Any, want: Any) -> Optional[Mismatch]:
    """How ``got`` differs from ``want`` as ``out`` declares equality (None: equal)."""
    import torch

    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
        if isinstance(got, torch.Tensor) or isinstance(want, torch.Tensor):
            return Mismatch(out.name, side, problem=f"{_describe(got)}, not {_describe(want)}")
        return None if got == want else Mismatch(out.name, side, 1, 1, [()])
    if got.shape != want.shape or got.dtype != want.dtype:
        return Mismatch(out.name, side, problem=f"{_describe(got)}, not {_describe(want)}")
    if got.device != want.device:
        got = got.to(want.device)
    mask = (out.differs or bit_for_bit)(got, want)
    count = int(mask.sum())
    if count == 0:
        return None
    first = [tuple(int(i) for i in idx) for idx in torch.nonzero(mask.reshape(want.shape))[:SHOWN].tolist()]
    return Mismatch(out.name, side, count, int(want.numel()), first)


def value_at(x: Any, index: tuple) -> Any:
    """``x``'s element at ``index`` as a Python value ("-" where it has none)."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x if index == () else "-"
    try:
        return x[index].item() if index else x.item()
    except (IndexError, RuntimeError, ValueError):
        return "-"
