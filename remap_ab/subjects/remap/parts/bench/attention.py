"""§5 End-to-end determinism: what a deterministic in-order prefix buys downstream.

A small sparse-attention consumer reads the compacted indices the way a decode step
does: for each query row, gather the K and V rows at the first ``valid_count``
compacted slots, and compute softmax(q·Kᵀ/√d)·V. Floating-point sums depend on their
order, so a compaction whose order changes from call to call makes the attention
output change too, bit for bit, even though the *set* of slots is the same.

Each run is a fresh kernel call on the same inputs (DCP 4 compaction, rank 0), then
the consumer in bf16 and in fp32. Per (condition, K, tokens, implementation, dtype):
distinct index outputs and distinct attention outputs (bitwise), and the largest
|Δ| between any two runs (elementwise max minus min over the runs).

On a GPU the conditions are a quiet device and one with a contending matmul on a side
stream (nondet.SideStreamLoad); on the CPU the interpreter's programs run in permuted
orders (schedule.py) instead, which is what plays the GPU scheduler's part there.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch

from remap_ab.errors import UsageError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, generate_inputs
from remap_ab.subjects.remap.judge import nondet, registry
from remap_ab.subjects.remap.judge.call import call
from remap_ab.subjects.remap.judge.nondet import nondet_cases

DTYPES = (torch.bfloat16, torch.float32)
HEAD_DIM = 128


@dataclass
class Consumer:
    """Fixed random K/V cache and queries for one case (seeded, CPU-generated, so the
    same on every device)."""

    keys: torch.Tensor  # [slots, d]
    values: torch.Tensor  # [slots, d]
    queries: torch.Tensor  # [T, d]

    @classmethod
    def for_case(cls, config: CaseConfig, inputs: CaseInputs, head_dim: int = HEAD_DIM, seed: int = 0) -> Consumer:
        table = inputs.block_table
        # Enough slots for every block id the table holds (capped: slots wrap modulo the cache).
        slots = min(max(int(table.max().item()) + 1, 1) * config.block_size, 1 << 18)
        g = torch.Generator().manual_seed(seed)
        dev = inputs.device
        keys = torch.randn(slots, head_dim, generator=g).to(dev)
        values = torch.randn(slots, head_dim, generator=g).to(dev)
        queries = torch.randn(config.tokens, head_dim, generator=g).to(dev)
        return cls(keys, values, queries)

    def attend(self, out: torch.Tensor, counts: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """softmax(q·Kᵀ/√d)·V over each row's first ``counts`` compacted slots, in ``dtype``.
        Slots are taken modulo the cache (a valid slot can be -1 with a padded block
        table; this is a consumer of indices, not a checker of them). Rows without a
        valid slot give zeros."""
        t, k = out.shape
        slots = self.keys.shape[0]
        idx = torch.remainder(out.to(torch.int64), slots)
        keys = self.keys.to(dtype)[idx]  # [T, K, d]
        values = self.values.to(dtype)[idx]
        q = self.queries.to(dtype)
        scores = torch.bmm(keys, q.unsqueeze(-1)).squeeze(-1) * (1.0 / math.sqrt(q.shape[-1]))  # [T, K]
        live = torch.arange(k, device=out.device).unsqueeze(0) < counts.to(torch.int64).unsqueeze(1)
        scores = scores.masked_fill(~live, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        probs = torch.where(live.any(dim=-1, keepdim=True), probs, torch.zeros_like(probs))
        return torch.bmm(probs.unsqueeze(1), values).squeeze(1)  # [T, d]


def _digest(t: torch.Tensor) -> str:
    host = t.detach().to("cpu").contiguous()
    return hashlib.sha256(host.view(torch.uint8).numpy().tobytes() if host.numel() else b"").hexdigest()[:16]


@dataclass
class Tally:
    condition: str
    config: CaseConfig
    impl: str
    dtype: str
    runs: int = 0
    index_hashes: set = field(default_factory=set)
    output_hashes: set = field(default_factory=set)
    low: Optional[torch.Tensor] = None
    high: Optional[torch.Tensor] = None
    errors: list = field(default_factory=list)

    def add(self, index_hash: str, attention: torch.Tensor) -> None:
        self.runs += 1
        self.index_hashes.add(index_hash)
        self.output_hashes.add(_digest(attention))
        a = attention.detach().float()
        self.low = a.clone() if self.low is None else torch.minimum(self.low, a)
        self.high = a.clone() if self.high is None else torch.maximum(self.high, a)

    @property
    def max_abs_delta(self) -> float:
        if self.low is None or self.high is None:  # set together by add()
            return float("nan")
        return float((self.high - self.low).max().item()) if self.low.numel() else 0.0

    def row(self) -> dict:
        c = self.config
        return {
            "condition": self.condition, "topk": c.topk, "tokens": c.tokens, "impl": self.impl, "dtype": self.dtype,
            "runs": self.runs, "distinct_index_outputs": len(self.index_hashes),
            "distinct_attention_outputs": len(self.output_hashes), "max_abs_delta": self.max_abs_delta,
            "errors": len(self.errors), "first_error": self.errors[0] if self.errors else "", "case_id": c.case_id,
        }


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def characterise(impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, consumer: Consumer,
                 runs: Sequence, condition: str, dtypes: Sequence[torch.dtype] = DTYPES) -> list[Tally]:
    """One fresh kernel call per run (``runs``: nondet.Run-like objects with a
    ``context()``), the consumer in every dtype on its output."""
    tallies = {d: Tally(condition, config, impl.name, dtype_name(d)) for d in dtypes}
    for run in runs:
        o = call(impl, config, inputs, context=run.context, settle=False)
        if o.error is not None or o.out is None or o.counts is None:  # a failing run is counted and named, never a crash of the section
            for d in dtypes:
                tallies[d].errors.append(f"{getattr(run, 'label', '?')}: {' '.join(str(o.error).split())[:200]}")
            continue
        index_hash = _digest(o.out)
        for d in dtypes:
            tallies[d].add(index_hash, consumer.attend(o.out, o.counts, d))
    if inputs.device.type == "cuda":
        torch.cuda.synchronize()
    return list(tallies.values())


def cases(topks: Sequence[int], tokens: Sequence[int], seed: int = 0) -> list[CaseConfig]:
    return nondet_cases(topks, tokens, dcp_size=4, invalid_ratio=0.3, seed=seed)


def run(
    *,
    device: str,
    topks: Sequence[int] = (2048, 384),
    tokens: Sequence[int] = (1, 8, 256),
    runs: int = 20,
    impls: Sequence[str] = ("old", "new"),
    conditions: Optional[Sequence[str]] = None,
    head_dim: int = HEAD_DIM,
    budget=None,
    on_tally: Optional[Callable[[Tally], None]] = None,
) -> tuple[list[dict], int]:
    """Rows for every (condition, case, implementation, dtype); and how many
    (condition, case) groups the budget left undone."""

    if runs < 2:
        raise UsageError(f"--det-runs {runs}: comparing runs needs at least 2")
    on_gpu = device == "cuda"
    conditions = list(conditions or (nondet.GPU_CONDITIONS if on_gpu else nondet.CPU_CONDITIONS))
    implementations = [registry.get(n) for n in impls]
    load = nondet.SideStreamLoad() if on_gpu and "contended" in conditions else None
    configs = cases(topks, tokens)
    prepared = []
    for config in configs:
        inputs = generate_inputs(config, device=device)
        prepared.append((config, inputs, Consumer.for_case(config, inputs, head_dim)))
    rows, left = [], 0
    groups = [(cond, p) for cond in conditions for p in prepared]
    for i, (condition, (config, inputs, consumer)) in enumerate(groups):
        if budget is not None and budget.exhausted:
            left = len(groups) - i
            break
        plan = nondet.gpu_runs(condition, runs, load) if on_gpu else nondet.cpu_schedule_runs(runs)
        for impl in implementations:
            for tally in characterise(impl, config, inputs, consumer, plan, condition):
                rows.append(tally.row())
                if on_tally:
                    on_tally(tally)
    return rows, left


def summary(rows: Sequence[dict]) -> list[str]:
    """One sentence per (condition, K): old vs new distinct attention outputs."""
    out = []
    keys = sorted({(r["condition"], r["topk"]) for r in rows}, key=lambda k: (k[0], -k[1]))
    for cond, k in keys:
        parts = []
        for impl in sorted({r["impl"] for r in rows}):
            mine = [r for r in rows if r["condition"] == cond and r["topk"] == k and r["impl"] == impl]
            if not mine:
                continue
            worst: dict[str, dict] = {}
            for r in mine:
                w = worst.get(r["dtype"])
                if w is None or r["distinct_attention_outputs"] > w["distinct_attention_outputs"]:
                    worst[r["dtype"]] = r
            text = ", ".join(
                f"{d} up to {w['distinct_attention_outputs']}/{w['runs']} distinct (T={w['tokens']}, max |Δ| {w['max_abs_delta']:.3g})"
                for d, w in sorted(worst.items())
            )
            parts.append(f"{impl}: {text}")
        out.append(f"{cond}, K={k}: " + "; ".join(parts))
    return out

