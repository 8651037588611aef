"""§3 Decode-step cost: what the remap costs per decode step of a whole model.

Every layer's sparse attention calls the remap once per step, on one row per query
token; a decode step of a batch of B requests has B x tokens_per_request rows. With
DCP each rank runs the DCP filter on all rows for its own shard, in parallel with the
other ranks, so the per-GPU cost of a step is layers x (µs per call), the same formula.

The pull request quotes about 93 µs (1 token) to 270 µs (256 tokens) saved per step on
GB200; those are 78 layers x its per-call differences at K = 2048 (3.02 - 1.83 and
5.65 - 2.20 µs), so ``pr_saved_per_step`` recomputes them from its table, and ours
comes from our own measured per-call times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from remap_ab.errors import UsageError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench.measure import measure_cell, wrapper_variant
from remap_ab.subjects.remap.parts.bench.pr_table import PR_GB200_US

PR_QUOTED_SAVED_US = {1: 93.0, 256: 270.0}  # the PR's prose, µs per step, GB200
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class DecodeModel:
    layers: int = 78
    topk: int = 2048
    dcp_sizes: tuple = (1, 4)
    tokens_per_request: int = 1

    def __post_init__(self):
        if self.layers < 1:
            raise UsageError(f"--layers {self.layers}: a model has at least one layer")
        if self.tokens_per_request < 1:
            raise UsageError(f"--tokens-per-request {self.tokens_per_request} must be at least 1")
        if not self.dcp_sizes or any(d < 1 for d in self.dcp_sizes):
            raise UsageError(f"--dcp {','.join(map(str, self.dcp_sizes))}: DCP sizes must be 1 or more")

    def tokens(self, batch: int) -> int:
        return batch * self.tokens_per_request


def call_config(model: DecodeModel, dcp: int, batch: int, seed: int = 0) -> CaseConfig:
    """The remap call one layer makes in a step: counts path at DCP 1, compaction above."""
    t = model.tokens(batch)
    if dcp == 1:
        return CaseConfig(mode="convert", topk=model.topk, tokens=t, counts=True, seed=seed)
    return CaseConfig(mode="dcp", topk=model.topk, tokens=t, dcp_size=dcp, dcp_rank=0, compact=True, counts=True, seed=seed)


def step_us(layers: int, call_us: float) -> float:
    return layers * call_us


def pr_saved_per_step(layers: int = 78, topk: int = 2048) -> dict:
    """tokens -> µs saved per step on GB200 by the PR's own per-call figures."""
    return {t: step_us(layers, old - new) for (k, t), (old, new) in PR_GB200_US.items() if k == topk}


def rows(model: DecodeModel, batches: Sequence[int], per_call: Callable[[int, int, str], Optional[float]]) -> list[dict]:
    """One row per (DCP size, batch): per-call and per-step µs, old and new, the
    saving, and the PR's figure where it has one. ``per_call(dcp, batch, impl)`` is
    the measured µs per call (None or NaN: not measured)."""
    pr = pr_saved_per_step(model.layers, model.topk)
    out = []
    for dcp in model.dcp_sizes:
        for b in batches:
            old, new = per_call(dcp, b, "old"), per_call(dcp, b, "new")
            old = float("nan") if old is None else old
            new = float("nan") if new is None else new
            t = model.tokens(b)
            out.append({
                "dcp": dcp, "batch": b, "tokens": t, "layers": model.layers, "topk": model.topk,
                "old_call_us": old, "new_call_us": new,
                "old_step_us": step_us(model.layers, old), "new_step_us": step_us(model.layers, new),
                "saved_step_us": step_us(model.layers, old - new),
                "pr_gb200_saved_step_us": pr.get(t, float("nan")) if dcp == 1 else float("nan"),
                "pr_quoted_saved_step_us": PR_QUOTED_SAVED_US.get(t, float("nan")) if dcp == 1 else float("nan"),
            })
    return out


def measure(model: DecodeModel, batches: Sequence[int], *, calls: int, repeats: int, known=None, budget=None,
            seed: int = 0, device: str = "cuda") -> tuple[dict, int]:
    """Measured µs per call, (dcp, batch, impl) -> µs, for every cell ``known`` (the
    same lookup, e.g. from the contention section) lacks. Returns it and the number of
    cells the budget left unmeasured."""

    old, new = registry.get("old"), registry.get("new")
    found: dict = {}
    todo = []
    for dcp in model.dcp_sizes:
        for b in batches:
            for impl in ("old", "new"):
                v = known(dcp, b, impl) if known else None
                if v is not None and v == v:
                    found[(dcp, b, impl)] = v
            if (dcp, b, "old") not in found or (dcp, b, "new") not in found:
                todo.append((dcp, b))
    left = 0
    for i, (dcp, b) in enumerate(todo):
        if budget is not None and budget.exhausted:
            left = len(todo) - i
            break
        config = call_config(model, dcp, b, seed)
        inputs = generate_inputs(config, device=device)
        cell = measure_cell(config, inputs, [wrapper_variant(old, config, "old"), wrapper_variant(new, config, "new")],
                            calls=calls, repeats=repeats, floors=False)
        if cell.status == "timed" and cell.verified_in_graph:
            found[(dcp, b, "old")], found[(dcp, b, "new")] = cell.us("old"), cell.us("new")
        else:
            found[(dcp, b, "refused")] = cell.why
    return found, left
