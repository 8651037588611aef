"""The reference oracle: docs/spec.md §3-§6 in vectorised torch, with no Triton in sight.

It exposes the same two functions as the kernels (SPEC §1), asserting SPEC §6's
preconditions as their wrappers do, so the registry can name it like any other
implementation (as A or B, the sweep's rejection rows included). It is written for
clarity, not speed: every rule is one expression on whole [T, K] tensors, in the
order the SPEC gives.

Two deliberate differences from the kernels' arithmetic:
- Division and remainder truncate toward zero, as Triton's do (torch's ``//`` floors).
  They only ever see negative ids, which are invalid anyway, but truncation keeps every
  intermediate identical to the kernels' and never indexes out of range.
- Gathers are clamped into range and then masked, where the kernels use masked loads.

Compaction is the stable one (valid values in column order), which is exactly the
order a single-tile kernel produces and one of the orders a tiled kernel may produce.
"""

from __future__ import annotations

import torch

__all__ = [
    "triton_convert_req_index_to_global_index",
    "triton_filter_and_convert_dcp_index",
    "remap",
]


def _tdiv(a: torch.Tensor, b: int) -> torch.Tensor:
    return torch.div(a, b, rounding_mode="trunc")


def _tmod(a: torch.Tensor, b: int) -> torch.Tensor:
    return torch.fmod(a, b)


def remap(
    req_id: torch.Tensor,
    block_table: torch.Tensor,
    token_indices: torch.Tensor,
    *,
    block_size: int,
    block_stride=None,
    dcp_size: int = 1,
    dcp_rank: int = 0,
    interleave: int = 1,
    prefill_request_ids: torch.Tensor | None = None,
    prefill_starts: torch.Tensor | None = None,
    widths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-lane values (SPEC §3, int32, -1 where invalid) and the validity mask.

    To run the rows of many cases at once (``runner.reference_batch``), the four
    integers may also be int32 tensors holding one value per row ([rows, 1]; int32 so
    the arithmetic stays int32 and wraps as the kernels' does), and ``widths`` gives
    each row's own table width where ``block_table`` stacks tables of several widths.
    ``block_stride`` (SPEC §9): rows per block in the values, None meaning ``block_size``."""
    t = token_indices.to(torch.int32)
    rows = t.shape[0]
    width = block_table.shape[1] if widths is None else widths
    q = req_id.to(torch.int64)

    invalid = t < 0  # §3.1

    is_prefill = torch.zeros(rows, 1, dtype=torch.bool, device=t.device)  # §3.2
    if prefill_request_ids is not None:
        is_prefill = (prefill_request_ids >= 0).view(rows, 1)

    owner = _tmod(_tdiv(t, interleave), dcp_size)  # §3.3
    remote = owner != dcp_rank
    local = _tdiv(t, dcp_size * interleave) * interleave + _tmod(t, interleave)

    blk = _tdiv(local, block_size)  # §3.4
    off = _tmod(local, block_size)
    valid_block = (blk >= 0) & (blk < width)
    invalid = invalid | ~valid_block | remote

    read = valid_block & ~is_prefill & ~remote  # §3.5
    safe_blk = blk.clamp(min=0).clamp(max=width - 1).to(torch.int64)
    base = block_table[q.view(rows, 1), safe_blk]
    base = torch.where(read, base, torch.zeros_like(base))
    # int32 arithmetic wraps, as it does in the kernels (SPEC §2, §9).
    val = base * (block_size if block_stride is None else block_stride) + off

    if prefill_request_ids is not None:  # §3.6
        assert prefill_starts is not None  # the prefill workspace comes as a pair
        p = prefill_request_ids.to(torch.int64).clamp(min=0)
        start = prefill_starts[p].view(rows, 1)
        val = torch.where(is_prefill, start + t, val)

    val = torch.where(invalid, torch.full_like(val, -1), val)  # §3.7
    return val.to(torch.int32), ~invalid


def compact_rows(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Valid values of each row moved to the front in column order, -1 after them."""
    k = values.shape[1]
    cols = torch.arange(k, device=values.device).expand_as(values)
    # A stable sort on "invalid" keeps valid lanes first and in column order.
    key = torch.where(valid, cols, cols + k)
    order = torch.argsort(key, dim=1, stable=True)
    moved = torch.gather(values, 1, order)
    count = valid.sum(dim=1, keepdim=True)
    return torch.where(cols < count, moved, torch.full_like(moved, -1))


def _counts(valid: torch.Tensor) -> torch.Tensor:
    return valid.sum(dim=1, dtype=torch.int32)


def _into(out, valid_counts_out, values: torch.Tensor, counts):
    """SPEC §10: the results written into the caller's buffers (when given), which are
    what comes back."""
    if out is not None:
        _require(out.shape == values.shape and out.dtype == torch.int32,
                 f"out must be an int32 tensor of shape {tuple(values.shape)}")
        out.copy_(values)
        values = out
    if counts is not None and valid_counts_out is not None:
        _require(valid_counts_out.shape == counts.shape and valid_counts_out.dtype == torch.int32,
                 f"valid_counts_out must be an int32 tensor of shape {tuple(counts.shape)}")
        valid_counts_out.copy_(counts)
        counts = valid_counts_out
    return values, counts


def _require(ok: bool, message: str) -> None:
    """SPEC §6's wrappers assert their preconditions; so does the oracle, with the same
    exception type, so that a rejection call judges it as it judges a kernel (``raise``,
    not ``assert``: the check holds under ``python -O`` too)."""
    if not ok:
        raise AssertionError(message)


def _require_int32(**tensors) -> None:
    for name, t in tensors.items():
        _require(t.dtype == torch.int32, f"{name} must be int32, not {t.dtype}")


def _require_width(token_indices, num_topk: int, block_n: int) -> None:
    _require(token_indices.shape[1] == num_topk,
             f"token_indices has {token_indices.shape[1]} columns; NUM_TOPK_TOKENS says {num_topk}")
    _require(num_topk % block_n == 0, f"NUM_TOPK_TOKENS ({num_topk}) is no multiple of BLOCK_N ({block_n})")


def triton_convert_req_index_to_global_index(
    req_id,
    block_table,
    token_indices,
    BLOCK_SIZE=64,
    BLOCK_STRIDE_ROWS=None,
    NUM_TOPK_TOKENS=2048,
    BLOCK_N=128,
    HAS_PREFILL_WORKSPACE=False,
    prefill_workspace_request_ids=None,
    prefill_workspace_starts=None,
    return_valid_counts=False,
    out=None,
    valid_counts_out=None,
):
    """Reference for the plain convert (SPEC §6, with vLLM main's BLOCK_STRIDE_ROWS, §9,
    and caller-owned buffers, §10): its preconditions, then the remap (BLOCK_N only
    shapes the kernels)."""
    _require_int32(req_id=req_id, block_table=block_table, token_indices=token_indices)
    _require(req_id.shape[0] == token_indices.shape[0],
             f"req_id ({req_id.shape[0]} rows) and token_indices ({token_indices.shape[0]} rows) must cover the same tokens")
    _require_width(token_indices, NUM_TOPK_TOKENS, BLOCK_N)
    if HAS_PREFILL_WORKSPACE:
        for name, t in (("prefill_workspace_request_ids", prefill_workspace_request_ids),
                        ("prefill_workspace_starts", prefill_workspace_starts)):
            _require(t is not None, f"HAS_PREFILL_WORKSPACE needs {name}")
            _require_int32(**{name: t})
            _require(t.is_contiguous(), f"{name} must be contiguous")
    values, valid = remap(
        req_id,
        block_table,
        token_indices,
        block_size=BLOCK_SIZE,
        block_stride=BLOCK_STRIDE_ROWS,
        prefill_request_ids=prefill_workspace_request_ids if HAS_PREFILL_WORKSPACE else None,
        prefill_starts=prefill_workspace_starts if HAS_PREFILL_WORKSPACE else None,
    )
    # The wrappers' outputs are row-major contiguous whatever the inputs' strides (SPEC §6,
    # §8); torch's elementwise results follow a permuted input's layout instead.
    values, counts = _into(out, valid_counts_out, values.contiguous(),
                           _counts(valid).contiguous() if return_valid_counts else None)
    if return_valid_counts:
        return values, counts
    return values


def triton_filter_and_convert_dcp_index(
    req_id,
    block_table,
    token_indices,
    dcp_size,
    dcp_rank,
    cp_kv_cache_interleave_size=1,
    BLOCK_SIZE=64,
    BLOCK_STRIDE_ROWS=None,
    NUM_TOPK_TOKENS=2048,
    BLOCK_N=128,
    return_valid_counts=False,
    compact_valid_to_front=True,
    out=None,
    valid_counts=None,
):
    """Reference for the DCP filter (SPEC §6): its preconditions, then the remap, with
    column-order compaction; caller-owned buffers as the convert wrapper's (§10)."""
    _require(dcp_size >= 1, f"dcp_size must be at least 1, not {dcp_size}")
    _require(0 <= dcp_rank < dcp_size, f"dcp_rank must lie in [0, dcp_size = {dcp_size}), not {dcp_rank}")
    _require(BLOCK_SIZE % cp_kv_cache_interleave_size == 0,
             f"cp_kv_cache_interleave_size ({cp_kv_cache_interleave_size}) must divide BLOCK_SIZE ({BLOCK_SIZE})")
    _require_int32(req_id=req_id, block_table=block_table, token_indices=token_indices)
    _require_width(token_indices, NUM_TOPK_TOKENS, BLOCK_N)
    if dcp_size > 1:
        # This path does not check req_id's length (SPEC §6): its grid covers
        # token_indices' rows, so a longer req_id is read only as far as those.
        req_id = req_id[: token_indices.shape[0]]
    if dcp_size == 1:
        return triton_convert_req_index_to_global_index(
            req_id,
            block_table,
            token_indices,
            BLOCK_SIZE=BLOCK_SIZE,
            BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS,
            NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
            BLOCK_N=BLOCK_N,
            return_valid_counts=return_valid_counts,
            out=out,
            valid_counts_out=valid_counts,
        )
    values, valid = remap(
        req_id,
        block_table,
        token_indices,
        block_size=BLOCK_SIZE,
        block_stride=BLOCK_STRIDE_ROWS,
        dcp_size=dcp_size,
        dcp_rank=dcp_rank,
        interleave=cp_kv_cache_interleave_size,
    )
    if compact_valid_to_front:
        values = compact_rows(values, valid)
    # Contiguous, as the plain convert's.
    values, counts = _into(out, valid_counts, values.contiguous(),
                           _counts(valid).contiguous() if return_valid_counts else None)
    if return_valid_counts:
        return values, counts
    return values
