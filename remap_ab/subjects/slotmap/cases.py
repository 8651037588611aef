"""The slot-mapping subject's cases: which products of grid.toml's blocks are cases
(``valid``), a case's scheduled batch (``batch``) and the Hypothesis strategy the soak
draws from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernels_slotmap.adapter import Batch, Params

GRID_FILE = Path(__file__).with_name("grid.toml")
MAX_BATCH_TOKENS = 16384


def valid(c: dict) -> bool:
    """A batch of at most 16384 tokens, a rank of the world, whole kernel blocks, and a
    PAD tail judged only where there is one."""
    return (c["requests"] * c["tokens"] <= MAX_BATCH_TOKENS and 0 <= c["rank"] < c["world"]
            and c["block_size"] % c["split"] == 0 and not (c["pad_tail"] == "judged" and c["tail"] == 0))


def batch(c: dict, seed: int) -> tuple[Batch, Params]:
    """The case's batch: each request's tokens are the last of its context, whose end
    falls anywhere in its last block; the table's rows hold the blocks the contexts use."""
    rng = np.random.default_rng(seed)
    n, kernel_block = c["requests"], c["block_size"] // c["split"]
    counts = np.full(n, c["tokens"]) if c["mix"] == "same" else rng.integers(1, c["tokens"] + 1, n)
    column = c["block_size"] * c["world"]  # positions per allocation block, over every rank
    ends = counts + rng.integers(0, 2 * column, n)
    positions = np.concatenate([np.arange(e - k, e) for e, k in zip(ends, counts)]).astype(np.int64)
    columns = int(-(-int(ends.max()) // column))
    low, span = (0, 4096) if c["ids"] == "low" else (2**31 // c["block_size"] - columns * n, 2 * columns * n)
    table = rng.integers(low, low + span, (n, columns + (3 if c["stride"] == "wide" else 0))).astype(np.int32)
    qsl = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    params = Params(kernel_block, c["world"], c["rank"], c["interleave"], -1, c["split"])
    return Batch(table, columns, qsl, positions, int(qsl[-1]) + c["tail"]), params


def strategy() -> st.SearchStrategy[dict]:
    """Cases as vLLM sends them: the grid's values, sizes drawn anywhere in their range."""
    case: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries({
        "requests": st.integers(1, 256), "tokens": st.integers(1, 2048), "mix": st.sampled_from(["same", "mixed"]),
        "block_size": st.sampled_from([16, 32, 64, 128]), "split": st.sampled_from([1, 2, 4]),
        "world": st.sampled_from([1, 2, 4, 8]), "rank": st.integers(0, 7), "interleave": st.sampled_from([1, 16, 64]),
        "tail": st.integers(0, 2048), "ids": st.sampled_from(["low", "wrap"]), "stride": st.sampled_from(["tight", "wide"]),
        "pad_tail": st.sampled_from(["ignored", "judged"]),
    })
    return case.map(lambda c: {**c, "rank": c["rank"] % c["world"], "tokens": min(c["tokens"], MAX_BATCH_TOKENS // c["requests"]),
                               "pad_tail": c["pad_tail"] if c["tail"] else "ignored"})  # a valid case
