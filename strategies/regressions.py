"""Known edges, replayed as ``@example``s before any random case is drawn.

Each regression is a named configuration. ``regressions(*names)`` turns the ones
that fit the running device into examples of a property: the 1024-token batch only
runs where a GPU makes it cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import example

from remap_ab.subjects.remap.case.config import CaseConfig


@dataclass(frozen=True)
class Regression:
    name: str
    config: CaseConfig
    why: str
    needs_cuda: bool = False


_DCP_COMPACT = CaseConfig(mode="dcp", tokens=4, dcp_size=4, dcp_rank=1, compact=True, counts=True)

REGRESSIONS = {
    r.name: r
    for r in (
        Regression("k384_tiled", _DCP_COMPACT.replace(topk=384), "K = 384 is not a power of two: tiled atomic path in both kernels"),
        Regression("k128_one_tile", _DCP_COMPACT.replace(topk=128), "K == BLOCK_N: one tile, column order in both"),
        Regression(
            "one_valid_tile",
            _DCP_COMPACT.replace(row_layout="one_tile", dcp_size=2, dcp_rank=0),
            "valid lanes in one tile only: the old kernel's order is deterministic too",
        ),
        Regression("single_token", _DCP_COMPACT.replace(tokens=1), "T = 1: a grid of one row"),
        Regression(
            "full_dcp_row",
            _DCP_COMPACT.replace(topk=512, row_layout="owned", invalid_ratio=0.0),
            "every lane owned and valid: a compacted row as long as K (count == K, no -1 tail)",
        ),
        Regression(
            "convert_prefill_huge",
            CaseConfig(mode="convert", tokens=3, topk=2048, counts=True, prefill_fraction=0.5, table="huge", out_of_range=0.3),
            "prefill rows beside paged rows, int32 wrap, out-of-range lanes on prefill rows",
        ),
        Regression(
            "tokens_1024_gpu",
            _DCP_COMPACT.replace(tokens=1024, row_layout="mixed"),
            "a full 1024-token batch (GPU only: 16k programs in the old kernel)",
            needs_cuda=True,
        ),
    )
}


def regressions(*names: str, arg: str = "config", transform: Callable[[CaseConfig], CaseConfig] = lambda c: c, **extra):
    """Decorator: add the named regressions as ``@example(<arg>=config, **extra)``.

    ``transform`` adapts a regression to the property's preconditions (for example
    forcing counts on); ``extra`` fills the property's other arguments."""
    from remap_ab import runtime

    on_cuda = runtime.current() == "cuda"
    chosen = [REGRESSIONS[n] for n in names]

    def decorate(test):
        for r in reversed(chosen):
            if r.needs_cuda and not on_cuda:
                continue
            test = example(**{arg: transform(r.config)}, **extra)(test)
        return test

    return decorate
