"""The index remap as vLLM main runs it (docs/spec.md §1-§6 column "new", §9, §10):
kernels_new plus ``BLOCK_STRIDE_ROWS`` on both wrappers and caller-owned ``out`` /
``valid_counts_out`` on the convert wrapper.

``_remap_tiling`` picks the launch shape. When the valid lanes are counted and
``NUM_TOPK_TOKENS`` is a power of two, one program owns the whole row
(``SINGLE_TILE``): the count is an in-register reduction written with a plain store
into an ``empty`` buffer, and compaction starts at slot 0, so the compacted prefix is
in column order and deterministic. Otherwise the grid is ``(T, K // BLOCK_N)`` and
counting and compaction use the same atomic slot allocator as the old kernel.

The power-of-two guard exists because ``tl.arange`` needs a power-of-two extent.

Each statement that encodes one rule of the SPEC stands on its own line: the mutant
catalogue (``remap_ab.mutants``) edits this source line by line.
"""

import functools

import torch
import triton
import triton.language as tl

_TILED_NUM_WARPS = 4
_SINGLE_TILE_NUM_WARPS = 8


@functools.cache
def _remap_tiling(NUM_TOPK_TOKENS, BLOCK_N, count_valid):
    """Return ``(single_tile, block_n, tiles_per_row, num_warps)`` for a launch
    (cached: it depends only on these three values and runs on every call)."""
    is_pow2 = NUM_TOPK_TOKENS > 0 and (NUM_TOPK_TOKENS & (NUM_TOPK_TOKENS - 1)) == 0
    if count_valid and is_pow2:
        return True, NUM_TOPK_TOKENS, 1, _SINGLE_TILE_NUM_WARPS
    return False, BLOCK_N, NUM_TOPK_TOKENS // BLOCK_N, _TILED_NUM_WARPS


@triton.jit
def _convert_req_index_to_global_index_kernel(
    req_id_ptr,  # [T] int32
    block_table_ptr,  # [Rq, W] int32
    token_indices_ptr,  # [T, K] int32
    out_ptr,  # [T, K] int32
    valid_counts_ptr,  # [T] int32 when COUNT_VALID (empty if SINGLE_TILE, else zeros), else None
    prefill_request_id_ptr,  # [T] int32 when HAS_PREFILL, else None
    workspace_starts_ptr,  # [P] int32 when HAS_PREFILL, else None
    bt_stride0,
    bt_stride1,
    ti_stride0,
    ti_stride1,
    out_stride0,
    out_stride1,
    max_num_blocks_per_req: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE_ROWS: tl.constexpr,
    NUM_TOPK_TOKENS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HAS_PREFILL: tl.constexpr,
    COUNT_VALID: tl.constexpr,
    COMPACT_TO_FRONT: tl.constexpr,
    DCP_SIZE: tl.constexpr,
    DCP_RANK: tl.constexpr,
    CP_INTERLEAVE: tl.constexpr,
    SINGLE_TILE: tl.constexpr,
):
    row = tl.program_id(0)
    tile = tl.program_id(1)
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)

    req = tl.load(req_id_ptr + row)
    tok = tl.load(token_indices_ptr + row * ti_stride0 + cols * ti_stride1)

    # §3.1: any negative id is padding.
    invalid = tok < 0

    # §3.3: ownership and de-interleave. `//` and `%` truncate here; that only
    # matters for negative ids, which are already invalid.
    owner = (tok // CP_INTERLEAVE) % DCP_SIZE
    remote = owner != DCP_RANK
    local = (tok // (DCP_SIZE * CP_INTERLEAVE)) * CP_INTERLEAVE + tok % CP_INTERLEAVE

    # §3.4
    blk = local // BLOCK_SIZE
    off = local % BLOCK_SIZE
    valid_block = (blk >= 0) & (blk < max_num_blocks_per_req)
    invalid = invalid | (~valid_block) | remote

    # §3.2 and §3.5: the block table is read only where the lane is local, in range
    # and not served from the prefill workspace.
    load_mask = valid_block & (~remote)
    if HAS_PREFILL:
        prefill_req = tl.load(prefill_request_id_ptr + row)
        is_prefill = prefill_req >= 0
        load_mask = load_mask & (~is_prefill)
    base = tl.load(block_table_ptr + req * bt_stride0 + blk * bt_stride1, mask=load_mask, other=0)
    # §9: a block id stands for BLOCK_STRIDE_ROWS physical rows (int32, wrapping).
    val = base * BLOCK_STRIDE_ROWS + off

    # §3.6: prefill rows address the workspace with the raw token id.
    if HAS_PREFILL:
        ws_start = tl.load(workspace_starts_ptr + prefill_req, mask=is_prefill, other=0)
        val = tl.where(is_prefill, ws_start + tok, val)

    # §3.7: invalidity has the last word.
    val = tl.where(invalid, -1, val)

    valid = ~invalid
    if COMPACT_TO_FRONT:
        # §5: lanes land at base + e, e the exclusive prefix sum within the tile.
        excl = tl.cumsum(valid.to(tl.int32), axis=0) - valid.to(tl.int32)
        if SINGLE_TILE:
            # The program owns the row: it starts at slot 0 and stores the count.
            slot_base = 0
        else:
            n_valid = tl.sum(valid.to(tl.int32), axis=0)
            slot_base = tl.atomic_add(valid_counts_ptr + row, n_valid)
        # The row's base address comes after the sums, as in the kernel this models.
        out_row = out_ptr + row * out_stride0
        if SINGLE_TILE:
            # Reduced here, inside its store: on sm_90 at K = 2048 a register fewer than
            # reduced earlier or into a named value (docs/measured/h200-2026-12-01-f).
            tl.store(valid_counts_ptr + row, tl.sum(valid.to(tl.int32), axis=0))
        tl.store(out_row + (slot_base + excl) * out_stride1, val, mask=valid)
    else:
        out_row = out_ptr + row * out_stride0
        tl.store(out_row + cols * out_stride1, val)
        if COUNT_VALID:
            # The row is stored first and reduced after, as in the kernel this models:
            # emitted before the store, the reduction delays it (measured on an H200).
            n_valid = tl.sum(valid.to(tl.int32), axis=0)
            if SINGLE_TILE:
                tl.store(valid_counts_ptr + row, n_valid)
            else:
                tl.atomic_add(valid_counts_ptr + row, n_valid)


def _launch(
    req_id,
    block_table,
    token_indices,
    out,
    valid_counts,
    prefill_request_ids,
    workspace_starts,
    BLOCK_SIZE,
    BLOCK_STRIDE_ROWS,
    NUM_TOPK_TOKENS,
    BLOCK_N,
    HAS_PREFILL,
    COUNT_VALID,
    COMPACT_TO_FRONT,
    DCP_SIZE,
    DCP_RANK,
    CP_INTERLEAVE,
):
    single_tile, block_n, tiles_per_row, num_warps = _remap_tiling(NUM_TOPK_TOKENS, BLOCK_N, COUNT_VALID)
    # Host cost per launch matters (a decode step launches this once per layer):
    # one stride() call per tensor, and an unused pointer argument passed as None,
    # which Triton specialises away instead of inspecting a stand-in tensor each
    # launch; no branch that reads it is compiled (its constexpr flag is off).
    bt_stride0, bt_stride1 = block_table.stride()
    ti_stride0, ti_stride1 = token_indices.stride()
    out_stride0, out_stride1 = out.stride()
    grid = (token_indices.shape[0], tiles_per_row)
    _convert_req_index_to_global_index_kernel[grid](
        req_id,
        block_table,
        token_indices,
        out,
        valid_counts,
        prefill_request_ids,
        workspace_starts,
        bt_stride0,
        bt_stride1,
        ti_stride0,
        ti_stride1,
        out_stride0,
        out_stride1,
        max_num_blocks_per_req=block_table.shape[1],
        BLOCK_SIZE=BLOCK_SIZE,
        BLOCK_STRIDE_ROWS=BLOCK_SIZE if BLOCK_STRIDE_ROWS is None else BLOCK_STRIDE_ROWS,
        NUM_TOPK_TOKENS=NUM_TOPK_TOKENS,
        BLOCK_N=block_n,
        HAS_PREFILL=HAS_PREFILL,
        COUNT_VALID=COUNT_VALID,
        COMPACT_TO_FRONT=COMPACT_TO_FRONT,
        DCP_SIZE=DCP_SIZE,
        DCP_RANK=DCP_RANK,
        CP_INTERLEAVE=CP_INTERLEAVE,
        SINGLE_TILE=single_tile,
        num_warps=num_warps,
    )


def _valid_counts_buffer(token_indices, NUM_TOPK_TOKENS, BLOCK_N, given=None):
    # The single tile overwrites its row's count; the tiled path accumulates into it,
    # so a caller's buffer (§10: it may hold the last step's counts) is zeroed there.
    single_tile = _remap_tiling(NUM_TOPK_TOKENS, BLOCK_N, True)[0]
    if given is not None:
        assert given.dtype == torch.int32 and tuple(given.shape) == (token_indices.shape[0],), (
            f"valid_counts_out must be int32 of shape ({token_indices.shape[0]},)"
        )
        if not single_tile:
            given.zero_()
        return given
    alloc = torch.empty if single_tile else torch.zeros
    return alloc(token_indices.shape[0], dtype=torch.int32, device=token_indices.device)


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
    """Map request-local top-k token positions to global KV-cache slots (§6, plain)."""
    assert req_id.dtype == torch.int32, f"req_id must be int32, not {req_id.dtype}"
    assert block_table.dtype == torch.int32, f"block_table must be int32, not {block_table.dtype}"
    assert token_indices.dtype == torch.int32, f"token_indices must be int32, not {token_indices.dtype}"
    assert req_id.shape[0] == token_indices.shape[0], (
        f"req_id ({req_id.shape[0]} rows) and token_indices ({token_indices.shape[0]} rows) must cover the same tokens"
    )
    assert token_indices.shape[1] == NUM_TOPK_TOKENS, (
        f"token_indices is {token_indices.shape[1]} wide, NUM_TOPK_TOKENS is {NUM_TOPK_TOKENS}: they must be equal"
    )
    assert NUM_TOPK_TOKENS % BLOCK_N == 0, (
        f"NUM_TOPK_TOKENS ({NUM_TOPK_TOKENS}) must be divisible by BLOCK_N ({BLOCK_N})"
    )
    if HAS_PREFILL_WORKSPACE:
        assert prefill_workspace_request_ids is not None, (
            "HAS_PREFILL_WORKSPACE needs prefill_workspace_request_ids"
        )
        assert prefill_workspace_starts is not None, "HAS_PREFILL_WORKSPACE needs prefill_workspace_starts"
        assert prefill_workspace_request_ids.dtype == torch.int32, (
            f"prefill_workspace_request_ids must be int32, not {prefill_workspace_request_ids.dtype}"
        )
        assert prefill_workspace_starts.dtype == torch.int32, (
            f"prefill_workspace_starts must be int32, not {prefill_workspace_starts.dtype}"
        )
        assert prefill_workspace_request_ids.is_contiguous(), "prefill_workspace_request_ids must be contiguous"
        assert prefill_workspace_starts.is_contiguous(), "prefill_workspace_starts must be contiguous"

    req_id = req_id.contiguous()
    block_table = block_table.contiguous()
    token_indices = token_indices.contiguous()
    if out is None:
        out = torch.empty_like(token_indices)
    else:
        assert out.dtype == torch.int32 and out.shape == token_indices.shape, (
            f"out must be int32 of shape {tuple(token_indices.shape)}"
        )
    valid_counts = None
    if return_valid_counts:
        valid_counts = _valid_counts_buffer(token_indices, NUM_TOPK_TOKENS, BLOCK_N, valid_counts_out)

    _launch(
        req_id,
        block_table,
        token_indices,
        out,
        valid_counts,
        prefill_workspace_request_ids if HAS_PREFILL_WORKSPACE else None,
        prefill_workspace_starts if HAS_PREFILL_WORKSPACE else None,
        BLOCK_SIZE,
        BLOCK_STRIDE_ROWS,
        NUM_TOPK_TOKENS,
        BLOCK_N,
        HAS_PREFILL=HAS_PREFILL_WORKSPACE,
        COUNT_VALID=return_valid_counts,
        COMPACT_TO_FRONT=False,
        DCP_SIZE=1,
        DCP_RANK=0,
        CP_INTERLEAVE=1,
    )
    if return_valid_counts:
        return out, valid_counts
    return out


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
):
    """Keep the lanes this DCP rank owns, remap them, optionally compact (§6, DCP)."""
    assert dcp_size >= 1, f"dcp_size must be at least 1, not {dcp_size}"
    assert 0 <= dcp_rank < dcp_size, f"dcp_rank must satisfy 0 <= dcp_rank < dcp_size ({dcp_size}), not {dcp_rank}"
    assert BLOCK_SIZE % cp_kv_cache_interleave_size == 0, (
        f"cp_kv_cache_interleave_size ({cp_kv_cache_interleave_size}) must divide BLOCK_SIZE ({BLOCK_SIZE})"
    )
    assert req_id.dtype == torch.int32, f"req_id must be int32, not {req_id.dtype}"
    assert block_table.dtype == torch.int32, f"block_table must be int32, not {block_table.dtype}"
    assert token_indices.dtype == torch.int32, f"token_indices must be int32, not {token_indices.dtype}"
    assert token_indices.shape[1] == NUM_TOPK_TOKENS, (
        f"token_indices is {token_indices.shape[1]} wide, NUM_TOPK_TOKENS is {NUM_TOPK_TOKENS}: they must be equal"
    )
    assert NUM_TOPK_TOKENS % BLOCK_N == 0, (
        f"NUM_TOPK_TOKENS ({NUM_TOPK_TOKENS}) must be divisible by BLOCK_N ({BLOCK_N})"
    )

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
        )

    count_valid = return_valid_counts or compact_valid_to_front
    req_id = req_id.contiguous()
    block_table = block_table.contiguous()
    token_indices = token_indices.contiguous()
    if compact_valid_to_front:
        out = torch.full_like(token_indices, -1)
    else:
        out = torch.empty_like(token_indices)
    valid_counts = None
    if count_valid:
        valid_counts = _valid_counts_buffer(token_indices, NUM_TOPK_TOKENS, BLOCK_N)

    _launch(
        req_id,
        block_table,
        token_indices,
        out,
        valid_counts,
        None,
        None,
        BLOCK_SIZE,
        BLOCK_STRIDE_ROWS,
        NUM_TOPK_TOKENS,
        BLOCK_N,
        HAS_PREFILL=False,
        COUNT_VALID=count_valid,
        COMPACT_TO_FRONT=compact_valid_to_front,
        DCP_SIZE=dcp_size,
        DCP_RANK=dcp_rank,
        CP_INTERLEAVE=cp_kv_cache_interleave_size,
    )
    if return_valid_counts:
        return out, valid_counts
    return out
