"""Deterministic inputs from a case configuration, bit-identical on every device.

torch's random generators differ between CPU and CUDA, so inputs are drawn from a
counter-based integer hash instead: lane ``i`` of stream ``s`` gets
``mix32(i, key(seed, s))``, computed with int64 tensor arithmetic whose every
intermediate stays below 2**63. The same configuration therefore yields the same
tensors, byte for byte, whether generated on the CPU or directly on a GPU, and the
sha256 of each input proves it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from typing import Optional

import torch

from remap_ab.config import INT32_MAX, CaseConfig
from remap_ab.errors import InputError

INT32_MIN = -(2**31)
_M32 = 0xFFFFFFFF
_U32 = 1 << 32


def _mix32_int(x: int) -> int:
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x5BD1E995) & _M32
    x ^= x >> 16
    return x


def _mix32(x: torch.Tensor) -> torch.Tensor:
    # Both multipliers are below 2**31, so a 32-bit operand never overflows int64.
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x5BD1E995) & _M32
    return x ^ (x >> 16)


_STREAMS = {
    name: i + 1
    for i, name in enumerate(
        (
            "req_id", "table", "table_len", "table_kind", "lane_class", "lane_pos", "lane_oor",
            "lane_oor_kind", "lane_neg", "lane_neg_kind", "row_tile", "row_len", "prefill",
            "prefill_req",
        )
    )
}


def _stream_key(seed: int, stream: str) -> int:
    return _mix32_int(_mix32_int(seed & _M32) ^ _mix32_int(_STREAMS[stream] * 0x9E3779B9) ^ (seed >> 32))


def _u32(seed: int, stream: str, n: int, device) -> torch.Tensor:
    """n uniform 32-bit values (int64 tensor) for one named stream."""
    return _u32_streams(seed, (stream,), n, device)[stream]


def _u32_streams(seed: int, streams, n: int, device) -> dict[str, torch.Tensor]:
    """Several equally long streams in one pass: the same values as ``_u32`` for
    each, with a handful of tensor ops instead of a handful per stream (on a GPU,
    per-op launch cost dominates generating a small case)."""
    keys = torch.tensor([_stream_key(seed, s) for s in streams], dtype=torch.int64, device=device).view(-1, 1)
    idx = torch.arange(n, dtype=torch.int64, device=device).view(1, -1)
    values = _mix32(_mix32((idx + keys) & _M32) ^ keys)
    return dict(zip(streams, values.unbind(0)))


def _below(u: torch.Tensor, fraction: float) -> torch.Tensor:
    """True with probability ``fraction``; exactly never at 0 and always at 1."""
    return u < int(round(fraction * _U32))


@dataclass
class CaseInputs:
    """The tensors one case feeds every implementation (all int32, one device)."""

    req_id: torch.Tensor
    block_table: torch.Tensor
    token_indices: torch.Tensor
    prefill_request_ids: Optional[torch.Tensor] = None
    prefill_starts: Optional[torch.Tensor] = None

    def tensors(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def to(self, device) -> "CaseInputs":
        return CaseInputs(**{name: t.to(device) for name, t in self.tensors().items()})

    @property
    def device(self) -> torch.device:
        return self.token_indices.device

    def sha256(self) -> dict[str, str]:
        return {name: tensor_sha256(t) for name, t in self.tensors().items()}


def tensor_sha256(t: torch.Tensor) -> str:
    """Hash of dtype, shape and bytes: equal hashes mean identical tensors."""
    host = t.detach().to("cpu").contiguous()
    h = hashlib.sha256(f"{host.dtype}:{tuple(host.shape)}:".encode())
    h.update(host.view(torch.uint8).numpy().tobytes() if host.numel() else b"")
    return h.hexdigest()


def in_range_limit(config: CaseConfig) -> int:
    """Global token positions below this reach a block < W on every DCP rank."""
    size, _, _ = config.effective_dcp
    return config.blocks_per_req * config.block_size * size


def generate_inputs(config: CaseConfig, device="cpu") -> CaseInputs:
    """Build the case's inputs on ``device``; identical bytes on any device."""
    c = config
    T, K, W, B, R = c.tokens, c.topk, c.blocks_per_req, c.block_size, c.num_reqs
    seed = c.seed
    lanes = T * K

    lane_streams = ["lane_class", "lane_pos", "lane_oor", "lane_oor_kind"]
    if c.negatives != "minus_one":
        lane_streams += ["lane_neg", "lane_neg_kind"]
    lane = _u32_streams(seed, lane_streams, lanes, device)
    row = _u32_streams(seed, ("req_id", "row_tile", "row_len", "prefill", "prefill_req"), T, device)

    req_id = (row["req_id"] % R).to(torch.int32)
    block_table = _block_table(c, device)

    # Lane classes: 0 valid, 1 negative (padding), 2 out of range.
    u_class = lane["lane_class"]
    is_neg = _below(u_class, c.invalid_ratio)
    is_oor = (~is_neg) & _below(u_class, c.invalid_ratio + c.out_of_range)
    lane_class = is_neg.to(torch.int8) + 2 * is_oor.to(torch.int8)
    lane_class = _apply_row_layout(c, lane_class.view(T, K), row, device).reshape(-1)

    limit = in_range_limit(c)
    pos = lane["lane_pos"] % limit
    if c.row_layout == "owned":
        # Same DCP chunk, this rank's slot in it: t' = ⌊t/(S·I)⌋·S·I + ρ·I + t mod I,
        # which stays below the limit (a multiple of S·I).
        size, rank, inter = c.effective_dcp
        pos = torch.div(pos, size * inter, rounding_mode="floor") * (size * inter) + rank * inter + pos % inter
    oor = _out_of_range_values(c, lane, limit)
    neg = _negative_values(c, lane, lanes, device)
    tok = torch.where(lane_class == 0, pos, torch.where(lane_class == 1, neg, oor))
    token_indices = tok.to(torch.int32).view(T, K)

    inputs = CaseInputs(req_id=req_id, block_table=block_table, token_indices=token_indices)
    if c.has_prefill:
        is_prefill = _below(row["prefill"], c.prefill_fraction)
        which = row["prefill_req"] % R
        inputs.prefill_request_ids = torch.where(is_prefill, which, torch.full_like(which, -1)).to(torch.int32)
        # Workspace rows of consecutive prefill requests, each as long as a full request.
        inputs.prefill_starts = (torch.arange(R, dtype=torch.int64, device=device) * W * B).to(torch.int32)
    return inputs


def _block_table(c: CaseConfig, device) -> torch.Tensor:
    R, W, B = c.num_reqs, c.blocks_per_req, c.block_size
    table = _u32_streams(c.seed, ("table", "table_kind"), R * W, device)
    u = table["table"].view(R, W)
    if c.table == "huge":
        # Half the ids straddle INT32_MAX // B (so base * B wraps right there), half
        # are anywhere in int32's positive range.
        near = (INT32_MAX // B) - 2048 + (u % 4096)
        anywhere = u % (INT32_MAX + 1)
        kind = table["table_kind"].view(R, W) & 1
        return torch.where(kind == 0, near, anywhere).to(torch.int32)
    physical = u % max(4 * R * W, 1024)
    if c.table == "padded":
        # Each request uses a prefix of its row; the rest is padding, -1 for even
        # requests and 0 for odd ones (both occur in practice).
        used = _u32(c.seed, "table_len", R, device) % (W + 1)
        cols = torch.arange(W, device=device).view(1, W)
        pad = torch.where(torch.arange(R, device=device) % 2 == 0, -1, 0).view(R, 1)
        physical = torch.where(cols < used.view(R, 1), physical, pad.to(physical.dtype))
    return physical.to(torch.int32)


def _out_of_range_values(c: CaseConfig, lane: dict, limit: int) -> torch.Tensor:
    """Positions whose block is >= W: exactly the first block past the table,
    somewhat beyond, and near INT32_MAX."""
    u = lane["lane_oor"]
    kind = lane["lane_oor_kind"] % 10
    size, _, _ = c.effective_dcp
    boundary = limit + u % (c.block_size * size)
    far = limit + u % (1 << 20)
    extreme = INT32_MAX - u % 1024
    return torch.where(kind < 5, boundary, torch.where(kind < 8, far, extreme)).clamp_(max=INT32_MAX)


def _negative_values(c: CaseConfig, lane: dict, lanes: int, device) -> torch.Tensor:
    if c.negatives == "minus_one":
        return torch.full((lanes,), -1, dtype=torch.int64, device=device)
    u = lane["lane_neg"]
    kind = lane["lane_neg_kind"] % 10
    choices = (
        torch.full_like(u, -1),
        torch.full_like(u, -2),
        torch.full_like(u, -(c.block_size + 1)),
        -(u % (2**31)) - 1,
        torch.full_like(u, INT32_MIN),
    )
    # 60% stay -1; the rest spread over the other kinds.
    out = choices[0]
    for k, values in zip((6, 7, 8, 9), choices[1:]):
        out = torch.where(kind == k, values, out)
    return out


def _apply_row_layout(c: CaseConfig, lane_class: torch.Tensor, row: dict, device) -> torch.Tensor:
    T, K = lane_class.shape
    if c.row_layout in ("uniform", "owned"):
        return lane_class
    cols = torch.arange(K, device=device).view(1, K)
    tiles = c.tiles_per_row
    row_tile = (row["row_tile"] % tiles).view(T, 1)
    padding = torch.ones_like(lane_class)  # class 1: -1 padding

    # one_tile: only one BLOCK_N tile per row keeps its drawn lanes.
    one_tile = torch.where(cols // c.block_n == row_tile, lane_class, padding)

    # tail_padded: no padding among the first n lanes, -1 after them.
    keep = round(K * (1.0 - c.invalid_ratio))
    if 0 < keep < K:
        jitter = (row["row_len"] % (2 * c.block_n + 1)).view(T, 1) - c.block_n
        length = (keep + jitter).clamp(0, K)
    else:
        length = torch.full((T, 1), keep, device=device)
    head = torch.where(lane_class == 1, torch.zeros_like(lane_class), lane_class)
    tail_padded = torch.where(cols < length, head, padding)

    if c.row_layout == "one_tile":
        return one_tile
    if c.row_layout == "tail_padded":
        return tail_padded
    # mixed: rows cycle through the shapes, so one case holds every kind of row.
    all_valid = torch.where(lane_class == 1, torch.zeros_like(lane_class), lane_class)
    kinds = torch.arange(T, device=device).view(T, 1) % 5
    return torch.where(
        kinds == 0,
        lane_class,
        torch.where(kinds == 1, all_valid, torch.where(kinds == 2, padding, torch.where(kinds == 3, one_tile, tail_padded))),
    )


def check_inputs(config: CaseConfig, inputs: CaseInputs) -> None:
    """Refuse inputs that break the kernels' contract, in one line, before any launch."""
    expected = {
        "req_id": (config.tokens,),
        "token_indices": (config.tokens, config.topk),
    }
    for name, t in inputs.tensors().items():
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{name} is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype != torch.int32:
            raise InputError(f"{name} has dtype {t.dtype}; the kernels take int32 — convert it with .to(torch.int32)")
    if inputs.req_id.dim() != 1 or inputs.token_indices.dim() != 2:
        raise InputError(
            f"req_id must be 1-D and token_indices 2-D (got {inputs.req_id.dim()}-D and {inputs.token_indices.dim()}-D)"
        )
    if inputs.req_id.shape[0] != inputs.token_indices.shape[0]:
        raise InputError(
            f"req_id has {inputs.req_id.shape[0]} rows but token_indices has {inputs.token_indices.shape[0]}; "
            f"they need one req_id per token row"
        )
    for name, shape in expected.items():
        actual = tuple(getattr(inputs, name).shape)
        if actual != shape:
            raise InputError(f"{name} has shape {actual} but the case expects {shape} (tokens={config.tokens}, topk={config.topk})")
    bt = tuple(inputs.block_table.shape)
    if bt != (config.num_reqs, config.blocks_per_req):
        raise InputError(
            f"block_table has shape {bt} but the case expects ({config.num_reqs}, {config.blocks_per_req})"
        )
    if config.has_prefill and (inputs.prefill_request_ids is None or inputs.prefill_starts is None):
        raise InputError("the case has prefill rows but prefill_request_ids or prefill_starts is missing")
    devices = {t.device for t in inputs.tensors().values()}
    if len(devices) > 1:
        raise InputError(f"inputs live on several devices ({', '.join(map(str, devices))}); move them to one")
