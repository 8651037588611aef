"""A topology case's tensors, the same bytes on every device.

Every value is drawn from a counter-based integer hash (a 32-bit xorshift-multiply
finaliser whose multipliers are below 2**31): element ``i`` of stream ``name`` is ``mix(mix(i ^ key) ^ key)`` with ``key`` derived
from the case's seed and the stream's number. The arithmetic is int64 tensor
arithmetic whose every intermediate stays below 2**63, so a CPU and a GPU compute
identical integers: the inputs are generated directly on the device that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from remap_ab.subjects.topology.config import INT32_MAX, LEARNED_PATTERNS, LENGTH_CLASSES, TopologyCase

_M32 = 0xFFFFFFFF
# Each stream's number keys its values: a number, once given, never changes (the inputs would).
_STREAMS = {"length_class": 1, "length": 2, "entry_class": 3, "entry": 4, "cluster": 5}


def _mix_int(x: int) -> int:
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x5BD1E995) & _M32
    return x ^ (x >> 16)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """``_mix_int`` on every element (int64, values below 2**32): both multipliers are
    below 2**31, so no product reaches 2**63, and each is masked before the next step."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x5BD1E995) & _M32
    return x ^ (x >> 16)


def _key(seed: int, stream: str) -> int:
    return _mix_int(_mix_int(seed & _M32) ^ _mix_int(_STREAMS[stream] * 0x9E3779B9) ^ (seed >> 32))


def _draw(seed: int, stream: str, index: torch.Tensor) -> torch.Tensor:
    """Uniform 32-bit values (int64) for the given element indices of a stream."""
    key = _key(seed, stream)
    return _mix(_mix((index & _M32) ^ key) ^ key)


def _pick(u: torch.Tensor, weights: tuple[int, ...]) -> torch.Tensor:
    """Class index per element, class i with probability weights[i] / sum(weights)."""
    total = sum(weights)
    scaled = u * total  # below 2**32 * total
    picked = torch.zeros_like(u)
    bound = 0
    for w in weights[:-1]:
        bound += w
        picked += (scaled >= bound << 32).to(picked.dtype)
    return picked


@dataclass
class TopologyInputs:
    """The tensors one case feeds every implementation (int32, one device)."""

    learned: torch.Tensor  # [rows, topk]
    context_lens: torch.Tensor  # [rows]


def _lengths(case: TopologyCase, device: torch.device | str) -> torch.Tensor:
    rows = torch.arange(case.rows, device=device, dtype=torch.int64)
    if case.lens == "mixed":
        kind = _draw(case.seed, "length_class", rows) % len(LENGTH_CLASSES)
    else:
        kind = torch.full_like(rows, LENGTH_CLASSES.index(case.lens))
    u = _draw(case.seed, "length", rows)
    s = case.segments
    far_low = 1 << 24
    by_class = torch.stack(
        [
            torch.zeros_like(u),  # zero
            torch.ones_like(u),  # one
            1 + u % (s - 1) if s > 1 else torch.zeros_like(u),  # below S (0 when S is 1)
            torch.full_like(u, s),  # equal
            s + 1 + u % (63 * s),  # above: up to 64 S
            far_low + u % (INT32_MAX - far_low + 1),  # far: up to 2**31 - 1
        ]
    )
    return by_class.gather(0, kind[None, :])[0]


def _per_entry(per_row: torch.Tensor, topk: int) -> torch.Tensor:
    """A row's value for each of its ``topk`` entries, row-major: ``[rows * topk]``."""
    return per_row[:, None].expand(per_row.numel(), topk).reshape(-1)


def _learned(case: TopologyCase, length: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    entries = torch.arange(case.rows * case.topk, device=device, dtype=torch.int64)
    kind = _pick(_draw(case.seed, "entry_class", entries), LEARNED_PATTERNS[case.learned])
    u = _draw(case.seed, "entry", entries)
    row_len = _per_entry(length, case.topk)
    has = row_len > 0
    span = row_len.clamp(min=1)
    minus_one = torch.full_like(u, -1)
    valid = torch.where(has, u % span, minus_one)
    dup = torch.where(has, (u % 4) * row_len // 4, minus_one)
    # Just past the end (L .. L+3) or anywhere up to 2**31 - 1.
    near = (row_len + (u & 3)).clamp(max=INT32_MAX)
    far = row_len + (u >> 2) % (INT32_MAX - row_len + 1)
    beyond = torch.where((u >> 31) == 1, near, far)
    row_base = _draw(case.seed, "cluster", torch.arange(case.rows, device=device, dtype=torch.int64))
    base = _per_entry(row_base, case.topk) % span
    width = (span // (4 * case.segments)).clamp(min=1)
    cluster = torch.where(has, (base + u % width).clamp(max=span - 1), minus_one)
    by_class = torch.stack([valid, minus_one, dup, beyond, cluster])
    return by_class.gather(0, kind[None, :])[0].view(case.rows, case.topk)


def generate(case: TopologyCase, device: torch.device | str = "cpu") -> TopologyInputs:
    """The case's inputs on ``device``: drawn from its patterns and seed, or its
    explicit rows."""
    if case.explicit_learned is not None and case.explicit_lens is not None:
        learned = torch.tensor(case.explicit_learned, dtype=torch.int32, device=device).view(case.rows, case.topk)
        lens = torch.tensor(case.explicit_lens, dtype=torch.int32, device=device).view(case.rows)
        return TopologyInputs(learned=learned, context_lens=lens)
    length = _lengths(case, device)
    learned = _learned(case, length, device)
    return TopologyInputs(learned=learned.to(torch.int32), context_lens=length.to(torch.int32))
