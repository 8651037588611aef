"""Equivalence classes of cases: the named corners of the configuration space.

``case_classes`` names every class a case belongs to, from its configuration and,
for the row-level classes (an all-invalid row, a row whose valid lanes sit in one
tile, int32 wrap...), from what the oracle says about its generated inputs — a
configuration that *asks* for out-of-range lanes is not a case that *has* one.

``record_classes`` reports them as ``hypothesis.event``s (see
``--hypothesis-show-statistics``); ``REQUIRED_CLASSES`` is what the ci profile must
visit (``tests/test_coverage.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

import torch

from remap_ab.subjects.remap.case.config import BACKEND_CALLS, BACKEND_NAMES, INT32_MAX, CaseConfig
from remap_ab.subjects.remap.case.inputs import INT32_MIN, CaseInputs, generate_inputs, in_range_limit
from remap_ab.subjects.remap.case.layouts import LAYOUTS

# Grouped by the question they answer; every label is "<group>: <class>".
REQUIRED_CLASSES = (
    "path: single tile (new, K power of two, counting)",
    "path: tiled (K / BLOCK_N tiles)",
    "path: one tile in both (K == BLOCK_N)",
    "wrapper: convert",
    "wrapper: dcp, size 1 (delegates to convert)",
    "wrapper: dcp",
    "placement: compacted",
    "placement: in place",
    "counts: returned",
    "counts: not returned",
    "dcp: size 2 rank 0",
    "dcp: size 2 rank 1",
    "dcp: size 4 rank 0",
    "dcp: size 4 rank 1",
    "dcp: size 4 rank 2",
    "dcp: size 4 rank 3",
    "interleave: 1",
    "interleave: BLOCK_SIZE",
    "interleave: other divisor",
    "K: power of two",
    "K: not a power of two",
    "BLOCK_SIZE: other than 64",
    "BLOCK_N: other than 128",
    "invalid ratio: 0%",
    "invalid ratio: 100%",
    "invalid ratio: between",
    "row: all lanes invalid",
    "row: all lanes valid",
    "row: full after DCP filtering (count == K)",
    "row: valid lanes in exactly one of several tiles",
    "lanes: out of range (block >= W)",
    "lanes: block == W exactly (first past the table)",
    "lanes: id within 1024 of INT32_MAX",
    "lanes: negative ids other than -1",
    "lanes: INT32_MIN",
    "table: padded (-1 / 0 entries)",
    "table: int32 wrap of base * BLOCK_SIZE",
    "prefill: rows present",
    "requests: several in one batch",
    "tokens: 1",
    "tokens: several",
    "layout: contiguous",
    "layout: strided token_indices (rows or columns)",
    "layout: block table a column slice",
    "layout: strided req_id",
    "layout: storage offsets",
    "BLOCK_SIZE: 32",
    "BLOCK_SIZE: 256",
    # The attention backends' calls (issue 24): every backend in every pattern it makes.
    *(f"backend: {BACKEND_NAMES[b]}, pattern {p}" for b, (patterns, _) in BACKEND_CALLS.items() for p in patterns),
    "caller: CUDA-graph padding rows",
    "caller: several rows per request (speculative decoding)",
    "caller: prefill starts rebased per chunk",
    "caller: persistent block table",
)


def case_classes(config: CaseConfig, inputs: Optional[CaseInputs] = None, reference=None) -> list[str]:
    """Every class label ``config`` belongs to.

    ``inputs`` and ``reference`` (the oracle's ``Reference``) are the case's, when the
    caller has them already; otherwise they are generated (on the GPU when there is
    one: a 1024-token case is 2M lanes) and the oracle alone runs — no kernel."""
    if inputs is None or reference is None:
        from remap_ab import runtime
        from remap_ab.subjects.remap.judge.runner import reference as oracle_reference

        inputs = generate_inputs(config, device=runtime.current())
        reference = oracle_reference(config, inputs)
    return list(_config_classes(config)) + list(
        _input_classes(config, inputs, reference.valid.cpu(), reference.lanes.cpu())
    )


def _config_classes(c: CaseConfig) -> Iterable[str]:
    # The new kernel's launch shape (SPEC §6 table); the old one is always tiled.
    if c.tiles_per_row == 1:
        yield "path: one tile in both (K == BLOCK_N)"
    elif c.counts_computed and c.topk_is_pow2:
        yield "path: single tile (new, K power of two, counting)"
    else:
        yield "path: tiled (K / BLOCK_N tiles)"

    if c.mode == "convert":
        yield "wrapper: convert"
    elif c.dcp_size == 1:
        yield "wrapper: dcp, size 1 (delegates to convert)"
    else:
        yield "wrapper: dcp"
        yield f"dcp: size {c.dcp_size} rank {c.dcp_rank}"
        if c.interleave == 1:
            yield "interleave: 1"
        elif c.interleave == c.block_size:
            yield "interleave: BLOCK_SIZE"
        else:
            yield "interleave: other divisor"

    yield "placement: compacted" if c.compacts else "placement: in place"
    yield "counts: returned" if c.counts_returned else "counts: not returned"
    layout = LAYOUTS[c.layout]
    if c.layout == "contiguous":
        yield "layout: contiguous"
    if layout.token_row_pad or layout.token_col_step > 1:
        yield "layout: strided token_indices (rows or columns)"
    if layout.table_col_pad:
        yield "layout: block table a column slice"
    if layout.req_step > 1:
        yield "layout: strided req_id"
    if layout.offset:
        yield "layout: storage offsets"
    yield "K: power of two" if c.topk_is_pow2 else "K: not a power of two"
    if c.block_size != 64:
        yield "BLOCK_SIZE: other than 64"
    if c.block_size in (32, 256):
        yield f"BLOCK_SIZE: {c.block_size}"
    if c.backend != "none":
        yield f"backend: {BACKEND_NAMES[c.backend]}, pattern {c.pattern}"
    if c.graph_padding:
        yield "caller: CUDA-graph padding rows"
    if c.tokens_per_req > 1 and c.real_tokens > 1:
        yield "caller: several rows per request (speculative decoding)"
    if c.has_prefill and c.prefill_chunk:
        yield "caller: prefill starts rebased per chunk"
    if c.table == "persistent":
        yield "caller: persistent block table"
    if c.block_n != 128:
        yield "BLOCK_N: other than 128"
    if c.invalid_ratio == 0.0:
        yield "invalid ratio: 0%"
    elif c.invalid_ratio == 1.0:
        yield "invalid ratio: 100%"
    else:
        yield "invalid ratio: between"
    yield "tokens: 1" if c.tokens == 1 else "tokens: several"


def _input_classes(c: CaseConfig, inputs: CaseInputs, valid: torch.Tensor, lanes: torch.Tensor) -> Iterable[str]:
    tok = inputs.token_indices.cpu().to(torch.int64)
    per_row = valid.sum(dim=1)
    if bool((per_row == 0).any()):
        yield "row: all lanes invalid"
    if bool((per_row == c.topk).any()):
        yield "row: all lanes valid"
        if c.is_dcp:
            yield "row: full after DCP filtering (count == K)"
    if c.tiles_per_row > 1:
        tiles_with_valid = valid.view(c.tokens, c.tiles_per_row, c.block_n).any(dim=2).sum(dim=1)
        if bool((tiles_with_valid == 1).any()):
            yield "row: valid lanes in exactly one of several tiles"
    if bool((tok >= in_range_limit(c)).any()):
        yield "lanes: out of range (block >= W)"
        size, rank, interleave = c.effective_dcp
        t = tok.clamp(min=0)
        owned = (tok >= 0) & ((t // interleave) % size == rank)
        local = (t // (size * interleave)) * interleave + t % interleave
        if bool((owned & (local // c.block_size == c.blocks_per_req)).any()):
            yield "lanes: block == W exactly (first past the table)"
        if bool((tok > INT32_MAX - 1024).any()):
            yield "lanes: id within 1024 of INT32_MAX"
    if bool((tok < -1).any()):
        yield "lanes: negative ids other than -1"
    if bool((tok == INT32_MIN).any()):
        yield "lanes: INT32_MIN"
    if c.table == "padded" and bool((inputs.block_table <= 0).any()):
        yield "table: padded (-1 / 0 entries)"
    # Huge tables hold non-negative ids, so a valid lane below zero wrapped.
    if c.table == "huge" and bool((valid & (lanes < 0)).any()):
        yield "table: int32 wrap of base * BLOCK_SIZE"
    if c.has_prefill and inputs.prefill_request_ids is not None and bool((inputs.prefill_request_ids >= 0).any()):
        yield "prefill: rows present"
    if c.num_reqs > 1 and inputs.req_id.unique().numel() > 1:
        yield "requests: several in one batch"


def record_classes(config: CaseConfig, result=None) -> list[str]:
    """Report the case's classes as Hypothesis events and return them.

    ``result`` is the ``CaseResult`` when the test ran the case, so nothing is
    generated twice."""
    from hypothesis import event

    if result is not None:
        labels = case_classes(config, result.inputs, result.reference)
    else:
        labels = case_classes(config)
    for label in labels:
        event(label)
    return labels
