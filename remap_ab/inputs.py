"""Deterministic inputs from a case configuration, bit-identical on every device.

torch's random generators differ between CPU and CUDA, so inputs are drawn from a
counter-based integer hash instead: lane ``i`` of stream ``s`` gets
``mix32(i, key(seed, s))``, computed with int64 tensor arithmetic whose every
intermediate stays below 2**63. The same configuration therefore yields the same
tensors, byte for byte, whether generated on the CPU or directly on a GPU, and the
sha256 of each input proves it.

Since a value depends on nothing but its stream key and index, many cases are
generated at once, each element reading its own case's parameters
(``generate_inputs_batch``); one case is a batch of one.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import torch

from remap_ab.config import INT32_MAX, CaseConfig
from remap_ab.errors import InputError, ResourceError
from remap_ab.layouts import copy_all, place_all
from remap_ab.processes import gil

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


def _mix32_(x: torch.Tensor) -> torch.Tensor:
    """``_mix32_int`` on every element of ``x``, in place (the caller owns ``x``).
    Both multipliers are below 2**31, so a 32-bit operand never overflows int64.
    In place because this is most of input generation's time: the sweep's largest
    cases hash millions of lanes, and every out-of-place step would allocate."""
    x.bitwise_xor_(x >> 16)
    x.mul_(0x7FEB352D).bitwise_and_(_M32)
    x.bitwise_xor_(x >> 15)
    x.mul_(0x5BD1E995).bitwise_and_(_M32)
    return x.bitwise_xor_(x >> 16)


_STREAMS = {
    name: i + 1
    for i, name in enumerate(
        (
            "req_id", "table", "table_len", "table_kind", "lane_class", "lane_pos", "lane_oor",
            "lane_oor_kind", "lane_neg", "lane_neg_kind", "row_tile", "row_len", "prefill",
            "prefill_req", "prefill_len",
        )
    )
}


def _stream_key(seed: int, stream: str) -> int:
    return _mix32_int(_mix32_int(seed & _M32) ^ _mix32_int(_STREAMS[stream] * 0x9E3779B9) ^ (seed >> 32))


def _draw(keys: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Value ``index`` of the stream keyed ``keys`` (the two broadcast together):
    uniform 32-bit values in an int64 tensor."""
    x = _mix32_((index + keys).bitwise_and_(_M32))  # the sum is a new tensor: ours to change
    return _mix32_(x.bitwise_xor_(keys))


def _threshold(fraction: float) -> int:
    """``u < _threshold(f)`` holds with probability f: exactly never at 0, always at 1."""
    return int(round(fraction * _U32))


TENSOR_NAMES = ("req_id", "block_table", "token_indices", "prefill_request_ids", "prefill_starts")


@dataclass
class CaseInputs:
    """The tensors one case feeds every implementation (all int32, one device)."""

    req_id: torch.Tensor
    block_table: torch.Tensor
    token_indices: torch.Tensor
    prefill_request_ids: Optional[torch.Tensor] = None
    prefill_starts: Optional[torch.Tensor] = None
    # Input name -> (storage address, first, one past the last storage element) of this
    # case's part of the buffer its layout placed it in (layouts.place_all): what its
    # writes are looked for in. A tensor replaced since is in another storage: not its part.
    owned: dict = field(default_factory=dict, repr=False, compare=False)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in TENSOR_NAMES if getattr(self, name) is not None}

    def to(self, device) -> CaseInputs:
        moved: dict = {name: t.to(device) for name, t in self.tensors().items()}
        return CaseInputs(**moved)

    @property
    def device(self) -> torch.device:
        return self.token_indices.device

    def sha256(self) -> dict[str, str]:
        return {name: tensor_sha256(t) for name, t in self.tensors().items()}


def tensor_sha256(t: torch.Tensor) -> str:
    """Hash of dtype, shape and bytes: equal hashes mean identical tensors."""
    host = t.detach().to("cpu").contiguous()
    # A size-1 dimension may carry any stride and still be "contiguous" (a strided req_id
    # of one row), and reshape(-1) keeps that stride: view the same elements with stride 1.
    flat = host.as_strided((host.numel(),), (1,))
    return _sha256(host, flat.view(torch.uint8).numpy().data if host.numel() else None)


def _sha256(t: torch.Tensor, data) -> str:
    """``tensor_sha256``'s digest, given ``t``'s bytes (None when it has none)."""
    h = hashlib.sha256(f"{t.dtype}:{tuple(t.shape)}:".encode())
    if data is not None:
        h.update(data)
    return h.hexdigest()


def hash_inputs(inputs: CaseInputs) -> tuple[dict, str]:
    """Per-tensor sha256 (as ``CaseInputs.sha256``) and one digest over all of them."""
    per = inputs.sha256()
    return per, combined_sha256(per)


HASHING_THREADS = 8  # the sweep's hashing pool (batch._hashers); a batch's large inputs are cut into this many tasks
BACKGROUND_BYTES = 1 << 16  # inputs this large are hashed by the threads beside the caller's launches
# The host copy goes into pinned buffers of this size (or of the largest input's), which
# the next batches reuse: one buffer per batch is rounded up to a power of two, each size
# pinned anew.
HOST_CHUNK_BYTES = 16 << 20


def hashing_started(inputs: list, threads: Optional[ThreadPoolExecutor] = None) -> Callable[[], list[tuple[dict, str]]]:
    """Start copying every case's inputs to the host and hashing them; the function
    returned waits for that and returns ``hash_inputs`` of each, digest for digest.

    On a GPU every input is first gathered, in its elements' logical order, into one
    flat device buffer (a strided view too: on the device, not on the host under the
    GIL), which is copied on a side stream into pinned host buffers of
    ``HOST_CHUNK_BYTES`` (no input across two). With
    ``threads``, the inputs of ``BACKGROUND_BYTES`` or more (99 % of the sweep's bytes in
    a fifth of its tensors) are hashed there as soon as the copy lands, in a
    few tasks of about equal bytes, beside the caller's launches: a task holds the GIL
    only between hashlib calls, which release it, and the switch interval is short
    while they run (gil.py). The small rest is hashed by the function returned. On the
    CPU each tensor is hashed where it lies, when the function is called."""
    device = inputs[0].device if inputs else torch.device("cpu")
    if device.type != "cuda":
        return lambda: _digests(inputs, threads)
    chunk = max([HOST_CHUNK_BYTES] + [-(-_nbytes(t) // 16) * 16 for x in inputs for t in x.tensors().values()])
    flat, place = flattened(inputs, chunk)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    pieces = []
    with torch.cuda.stream(side):
        for lo in range(0, flat.numel(), chunk):
            host = torch.empty(min(chunk, flat.numel() - lo), dtype=torch.uint8, pin_memory=True)
            host.copy_(flat[lo : lo + chunk], non_blocking=True)
            pieces.append(host.numpy().data)
    flat.record_stream(side)  # its memory is not reused before the copy is done
    copies_done = torch.cuda.Event()
    copies_done.record(side)
    return _hashing(inputs, pieces, chunk, place, threads, lambda: _copied(copies_done))


def _hashing(inputs: list, pieces: list, chunk: int, place: list, threads: Optional[ThreadPoolExecutor],
             wait: Callable[[], None]) -> Callable[[], list[tuple[dict, str]]]:
    """``hashing_started``'s hashing of the flat host bytes in ``pieces`` of ``chunk``
    bytes (mapped by ``place``), whose contents are there once ``wait()`` returns."""
    jobs = _jobs(inputs, pieces, chunk, place)
    large = [k for k, (_, _, t, _) in enumerate(jobs) if threads is not None and _nbytes(t) >= BACKGROUND_BYTES]
    parts = _parts(large, jobs, HASHING_THREADS)
    early: list = []
    release: Optional[Callable[[], None]] = None
    if parts and threads is not None:
        release = gil.hand_over_quickly()
        landed = threads.submit(wait)
        early = [threads.submit(_after, landed, [jobs[k] for k in part]) for part in parts]
        _when_all_done(early, release)

    def finished() -> list[tuple[dict, str]]:
        wait()
        digests: list = [None] * len(jobs)
        _scatter(digests, parts, [future.result() for future in early])
        if release is not None:  # now, not in the last task's callback, which may run after this returns
            release()
        rest = [k for k in range(len(jobs)) if digests[k] is None]
        for k, d in zip(rest, _digest([jobs[k] for k in rest])):
            digests[k] = d
        return _assembled(inputs, jobs, digests)

    return finished


def _copied(done: torch.cuda.Event) -> None:
    # Polled, not synchronize(): safe wherever the call's sync check may have made any
    # host synchronisation in the process an error.
    while not done.query():
        time.sleep(0.001)


def _after(copied, part: list) -> list[str]:
    copied.result()
    return _digest(part)


def _when_all_done(futures: list, then: Callable[[], None]) -> None:
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            then()

    for f in futures:
        f.add_done_callback(one_done)


def flattened(inputs: list, chunk: int = 0) -> tuple[torch.Tensor, list]:
    """Every case's inputs, each in its elements' logical order, back to back in one
    flat uint8 tensor on their device (each tensor's first byte 16-aligned; with
    ``chunk``, a multiple of 16 no smaller than any tensor, none across a multiple of
    it), and per case name -> (tensor, [first, one past the last) byte of it there)."""
    place: list = []
    total = 0
    for x in inputs:
        placed = {}
        for name, t in x.tensors().items():
            n = _nbytes(t)
            total = -(-total // 16) * 16
            if chunk and n and total // chunk != (total + n - 1) // chunk:
                total = -(-total // chunk) * chunk
            placed[name] = (t, total, total + n)
            total += n
        place.append(placed)
    flat = torch.empty(total, dtype=torch.uint8, device=inputs[0].device if inputs else "cpu")
    dst, src = [], []
    for placed in place:
        for t, lo, hi in placed.values():
            if hi > lo:
                dst.append(flat[lo:hi].view(t.dtype).view(t.shape))
                src.append(t)
    copy_all(dst, src)
    return flat, place


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _jobs(inputs: list, pieces: Optional[list], chunk: int, place: list) -> list[tuple]:
    """Per input tensor ``(case, name, tensor, its bytes or None)``: its bytes from the
    flat host ``pieces`` of ``chunk`` bytes that ``place`` maps, None without pieces."""
    jobs: list[tuple] = []
    for i, x in enumerate(inputs):
        for name, t in x.tensors().items():
            if pieces is None:
                jobs.append((i, name, t, None))
                continue
            _, lo, hi = place[i][name]
            k = lo // chunk if hi > lo else 0
            jobs.append((i, name, t, pieces[k][lo - k * chunk : hi - k * chunk] if hi > lo else memoryview(b"")))
    return jobs


def _digest(jobs: list) -> list[str]:
    return [tensor_sha256(t) if raw is None else _sha256(t, raw if len(raw) else None) for _, _, t, raw in jobs]


def _assembled(inputs: list, jobs: list, digests: list) -> list[tuple[dict, str]]:
    per: list[dict] = [{} for _ in inputs]
    for (i, name, _, _), d in zip(jobs, digests):
        per[i][name] = d
    return [(p, combined_sha256(p)) for p in per]


def _digests(inputs: list, threads: Optional[ThreadPoolExecutor]) -> list[tuple[dict, str]]:
    """``hash_inputs`` of each case, from each tensor where it lies, at once; in
    ``threads`` if given."""
    jobs = _jobs(inputs, None, 0, [])
    everything = list(range(len(jobs)))
    if threads is None or len(jobs) < 2:
        return _assembled(inputs, jobs, _digest(jobs))
    parts = _parts(everything, jobs, HASHING_THREADS)
    digests: list = [None] * len(jobs)
    _scatter(digests, parts, threads.map(lambda p: _digest([jobs[k] for k in p]), parts))
    return _assembled(inputs, jobs, digests)


def _scatter(digests: list, parts: list, results) -> None:
    """Each part's digests (one result per part, in its order) into ``digests`` by job index."""
    for part, got in zip(parts, results):
        for k, d in zip(part, got):
            digests[k] = d


def _parts(chosen: list, jobs: list, n: int) -> list[list]:
    """The job indices ``chosen`` cut in order into at most ``n`` runs of about equal bytes."""
    sizes = [_nbytes(jobs[k][2]) for k in chosen]
    share = max(1, -(-sum(sizes) // n))
    parts, run, held = [], [], 0
    for k, size in zip(chosen, sizes):
        run.append(k)
        held += size
        if held >= share:
            parts.append(run)
            run, held = [], 0
    if run:
        parts.append(run)
    return parts


def combined_sha256(per: dict) -> str:
    """The results table's ``inputs_sha256``: sha256 of ``name:digest;`` in name order."""
    return hashlib.sha256("".join(f"{k}:{per[k]};" for k in sorted(per)).encode()).hexdigest()


def in_range_limit(config: CaseConfig) -> int:
    """Global token positions below this reach a block < W on every DCP rank."""
    size, _, _ = config.effective_dcp
    return config.blocks_per_req * config.block_size * size


def generate_inputs(config: CaseConfig, device="cpu") -> CaseInputs:
    """Build the case's inputs on ``device``; identical bytes on any device."""
    return generate_inputs_batch([config], device)[0]


# What a token row's layout makes of its drawn lane classes.
DRAWN, ALL_VALID, ALL_PADDING, ONE_TILE, TAIL_PADDED = range(5)
_MIXED = -1  # rows cycle through the five shapes above, in that order
_ROW_SHAPE = {"uniform": DRAWN, "owned": DRAWN, "one_tile": ONE_TILE, "tail_padded": TAIL_PADDED, "mixed": _MIXED}

_LANE_STREAMS = ("lane_class", "lane_pos", "lane_oor", "lane_oor_kind", "lane_neg", "lane_neg_kind")
_ROW_STREAMS = ("req_id", "row_tile", "row_len", "prefill", "prefill_req")
_TABLE_STREAMS = ("table", "table_kind", "table_len")


def generate_inputs_batch(configs, device="cpu") -> list[CaseInputs]:
    """Every case's inputs, byte for byte as ``generate_inputs`` builds them, in a fixed
    number of tensor ops for the whole batch (on a GPU, per-op launch cost dominates
    generating small cases).

    All cases' lanes (and token rows, table entries) lie back to back in flat tensors,
    each element reading its own case's parameters; then every case is placed in its
    layout, for the whole batch at once (``layouts.place_all``: one buffer per input
    for all cases, each case's tensors views into them). A stream's value depends only
    on its key and the element's index within the case, so drawing a stream that a
    case does not use changes nothing."""
    configs = list(configs)
    if not configs:
        return []
    rows = _token_rows(configs, device)
    tokens = _token_indices(configs, rows, device)
    tables = _block_tables(configs, device)
    starts = _prefill_starts(configs, device)

    cases = []
    lane_at = _offsets(c.tokens * c.topk for c in configs)
    row_at = _offsets(c.tokens for c in configs)
    entry_at = _offsets(c.num_reqs * c.blocks_per_req for c in configs)
    req_at = _offsets(c.num_reqs for c in configs)
    for c, lane, row, entry, req in zip(configs, lane_at, row_at, entry_at, req_at):
        T, K, R, W = c.tokens, c.topk, c.num_reqs, c.blocks_per_req
        x = CaseInputs(
            req_id=rows["req_id"][row : row + T],
            block_table=tables[entry : entry + R * W].view(R, W),
            token_indices=tokens[lane : lane + T * K].view(T, K),
        )
        if c.has_prefill:
            x.prefill_request_ids = rows["prefill_request_ids"][row : row + T]
            x.prefill_starts = starts[req : req + R]
        cases.append(x)
    # Every case is placed in its layout (``contiguous`` too): its tensors then lie in the
    # layouts' few buffers, 128-byte aligned as a fresh tensor is (Triton specialises on
    # alignment: the sweep, ``run`` and a replay of a case compile the same kernel).
    return in_layouts([(c.layout, x) for c, x in zip(configs, cases)])


def in_layouts(cases: list[tuple[str, CaseInputs]]) -> list[CaseInputs]:
    """Each ``(layout name, inputs)``'s values in that layout (``layouts.place_all``),
    each case recording its part of the shared buffers in ``owned``."""
    placed = place_all([(name, x.tensors()) for name, x in cases])
    return [CaseInputs(**tensors, owned=owned) for tensors, owned in placed]


def in_layout(name: str, inputs: CaseInputs) -> CaseInputs:
    """``inputs``' values in layout ``name`` (``contiguous``: a contiguous copy)."""
    return in_layouts([(name, inputs)])[0]


def _offsets(counts) -> list[int]:
    """Where each case's elements start when all cases' lie back to back."""
    return list(itertools.accumulate(counts, initial=0))[:-1]


def ragged_arange(counts: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``total = sum(counts)`` elements of consecutive groups, group i holding
    ``counts[i]`` of them: each element's group and its index within the group.
    No host synchronisation (``total`` is known on the host)."""
    device = counts.device
    group = torch.repeat_interleave(torch.arange(counts.numel(), device=device), counts, output_size=total)
    start = torch.cumsum(counts, 0) - counts
    return group, torch.arange(total, device=device) - start[group]


def host_values(values: list, device) -> torch.Tensor:
    """A host list of integers (nested lists allowed) as an int64 tensor on ``device``.
    On a GPU through pinned memory, so the host does not wait for the device's queue
    (a plain ``torch.tensor(..., device="cuda")`` copies synchronously: measured
    about a third of the sweep's generation phase on the H200)."""
    host = torch.tensor(values, dtype=torch.int64)
    if torch.device(device).type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host


def _per_element(per_case: list[dict], device) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Elements of all cases back to back, case i holding ``per_case[i]["count"]``:
    each element's index within its case, and every integer of its case's dict
    (one host-to-device copy and one gather for all of them)."""
    names = list(per_case[0])
    table = host_values([[p[n] for p in per_case] for n in names], device)
    total = sum(p["count"] for p in per_case)
    if len(per_case) == 1:  # one case: its parameters broadcast, no gather needed
        return torch.arange(total, device=device), dict(zip(names, table))
    case, index = ragged_arange(table[names.index("count")], total)
    return index, dict(zip(names, table.index_select(1, case)))


def _keys(seed: int, streams) -> dict[str, int]:
    return {"key:" + s: _stream_key(seed, s) for s in streams}


def _draw_streams(p: dict, streams, index: torch.Tensor) -> dict[str, torch.Tensor]:
    """Several streams at once (one [streams, elements] tensor), keyed per element."""
    values = _draw(torch.stack([p["key:" + s] for s in streams]), index)
    return dict(zip(streams, values.unbind(0)))


def _token_rows(configs, device) -> dict[str, torch.Tensor]:
    """Per token row of every case: req_id, prefill_request_ids, and what the row
    layout makes of the row's lanes (its shape, kept tile and unpadded length)."""
    per_case = []
    for c in configs:
        # tail_padded: no padding among the first n lanes, -1 after them, with n jittered
        # around the lanes the invalid ratio keeps (unless it keeps none or all).
        keep = round(c.topk * (1.0 - c.invalid_ratio))
        per_case.append({
            "count": c.tokens, **_keys(c.seed, _ROW_STREAMS),
            "num_reqs": c.num_reqs, "tiles": c.tiles_per_row, "block_n": c.block_n, "topk": c.topk,
            "keep": keep, "jitter": int(0 < keep < c.topk), "shape": _ROW_SHAPE[c.row_layout],
            "prefill": _threshold(c.prefill_fraction),
            "real": c.real_tokens, "per_req": c.tokens_per_req, "first_prefill_req": _first_prefill_request(c),
        })
    t, p = _per_element(per_case, device)
    u = _draw_streams(p, _ROW_STREAMS, t)
    jitter = u["row_len"] % (2 * p["block_n"] + 1) - p["block_n"]
    req_id = u["req_id"] % p["num_reqs"]
    is_prefill = u["prefill"] < p["prefill"]
    prefill_id = u["prefill_req"] % p["num_reqs"]
    if any(c.tokens_per_req or c.graph_padding for c in configs):
        # Runs of tokens_per_req rows per request, request by request; with prefill, the
        # last requests are the prefill ones (the scheduler puts decodes first), each
        # numbered from 0 in the workspace. CUDA-graph padding rows read request 0 with
        # every index -1 and are no prefill row.
        runs = p["per_req"] >= 1
        by_run = torch.div(t, p["per_req"].clamp(min=1), rounding_mode="floor")
        req_id = torch.where(runs, by_run, req_id)
        is_prefill = torch.where(runs, by_run >= p["first_prefill_req"], is_prefill)
        prefill_id = torch.where(runs, by_run - p["first_prefill_req"], prefill_id)
        padding = t >= p["real"]
        req_id = torch.where(padding, 0, req_id)
        is_prefill = is_prefill & ~padding
    return {
        "req_id": req_id.to(torch.int32),
        "prefill_request_ids": torch.where(is_prefill, prefill_id, -1).to(torch.int32),
        "padding": t >= p["real"],
        "shape": torch.where(t >= p["real"], ALL_PADDING, torch.where(p["shape"] == _MIXED, t % 5, p["shape"])),
        "tile": u["row_tile"] % p["tiles"],
        "length": torch.where(p["jitter"] == 1, (p["keep"] + jitter).clamp(min=0).minimum(p["topk"]), p["keep"]),
    }


def _first_prefill_request(c: CaseConfig) -> int:
    """With runs of rows per request: the first prefill request (the last
    ``prefill_fraction`` of the real requests, at least one when there are prefill
    rows at all); the request count when there are none."""
    if not c.tokens_per_req:
        return c.num_reqs
    requests = -(-c.real_tokens // c.tokens_per_req)
    if not c.has_prefill:
        return c.num_reqs
    return requests - max(1, round(c.prefill_fraction * requests))


def _token_indices(configs, rows: dict, device) -> torch.Tensor:
    """Every case's token_indices, flat, int32."""
    per_case = []
    for c, row_start in zip(configs, _offsets(c.tokens for c in configs)):
        size, rank, inter = c.effective_dcp
        per_case.append({
            "count": c.tokens * c.topk, **_keys(c.seed, _LANE_STREAMS),
            "row_start": row_start, "topk": c.topk, "block_n": c.block_n, "block_size": c.block_size,
            "negative": _threshold(c.invalid_ratio),
            "negative_or_oor": _threshold(c.invalid_ratio + c.out_of_range),
            "limit": in_range_limit(c), "boundary": c.block_size * size,
            "owned": int(c.row_layout == "owned"), "chunk": size * inter, "slot": rank * inter, "interleave": inter,
            "any_negative": int(c.negatives != "minus_one"),
        })
    i, p = _per_element(per_case, device)
    # Work that no case of the batch needs is skipped (it would be selected away).
    any_negatives = any(c.negatives != "minus_one" for c in configs)
    u = _draw_streams(p, _LANE_STREAMS if any_negatives else _LANE_STREAMS[:4], i)

    # Lane classes: 0 valid, 1 negative (padding), 2 out of range.
    is_neg = u["lane_class"] < p["negative"]
    is_oor = (~is_neg) & (u["lane_class"] < p["negative_or_oor"])
    drawn = is_neg.to(torch.int8) + 2 * is_oor.to(torch.int8)
    lane_class = drawn
    if any(_ROW_SHAPE[c.row_layout] != DRAWN or c.graph_padding for c in configs):
        row = p["row_start"] + torch.div(i, p["topk"], rounding_mode="floor")
        per_lane = {name: rows[name][row] for name in ("shape", "tile", "length")}
        lane_class = _apply_row_layout(drawn, i % p["topk"], p["block_n"], per_lane)

    limit = p["limit"]
    pos = u["lane_pos"] % limit
    # owned: same DCP chunk, this rank's slot in it: t' = ⌊t/(S·I)⌋·S·I + ρ·I + t mod I,
    # which stays below the limit (a multiple of S·I).
    if any(c.row_layout == "owned" for c in configs):
        owned = torch.div(pos, p["chunk"], rounding_mode="floor") * p["chunk"] + p["slot"] + pos % p["interleave"]
        pos = torch.where(p["owned"] == 1, owned, pos)

    # Out of range: exactly the first block past the table, somewhat beyond, and near INT32_MAX.
    u_oor, kind = u["lane_oor"], u["lane_oor_kind"] % 10
    boundary = limit + u_oor % p["boundary"]
    far = limit + u_oor % (1 << 20)
    extreme = INT32_MAX - u_oor % 1024
    oor = torch.where(kind < 5, boundary, torch.where(kind < 8, far, extreme)).clamp_(max=INT32_MAX)

    neg = _negative_values(u["lane_neg"], u["lane_neg_kind"], p) if any_negatives else -1
    out = torch.where(lane_class == 0, pos, torch.where(lane_class == 1, neg, oor))
    if any_negatives and any(c.graph_padding for c in configs):
        # A CUDA-graph padding row is the indexer's -1 fill, never another negative.
        row = p["row_start"] + torch.div(i, p["topk"], rounding_mode="floor")
        out = torch.where(rows["padding"][row], -1, out)
    return out.to(torch.int32)


def _apply_row_layout(drawn: torch.Tensor, col: torch.Tensor, block_n: torch.Tensor, row: dict) -> torch.Tensor:
    """Each lane's class once its row's shape (gathered per lane in ``row``) is applied."""
    padding = torch.ones_like(drawn)  # class 1: -1 padding
    all_valid = torch.where(drawn == 1, torch.zeros_like(drawn), drawn)
    # one_tile: only one BLOCK_N tile per row keeps its drawn lanes.
    one_tile = torch.where(torch.div(col, block_n, rounding_mode="floor") == row["tile"], drawn, padding)
    tail_padded = torch.where(col < row["length"], all_valid, padding)
    shape = row["shape"]
    return torch.where(
        shape == DRAWN,
        drawn,
        torch.where(
            shape == ALL_VALID,
            all_valid,
            torch.where(shape == ALL_PADDING, padding, torch.where(shape == ONE_TILE, one_tile, tail_padded)),
        ),
    )


def _negative_values(u: torch.Tensor, kind: torch.Tensor, p: dict) -> torch.Tensor:
    """negatives "minus_one": all -1; "any": 60% stay -1, the rest spread over -2,
    -(B+1), anything negative and INT32_MIN."""
    kind = torch.where(p["any_negative"] == 1, kind % 10, 0)
    choices = (-2, -(p["block_size"] + 1), -(u % (2**31)) - 1, INT32_MIN)
    out = torch.full_like(u, -1)
    for k, values in zip((6, 7, 8, 9), choices):
        out = torch.where(kind == k, values, out)
    return out


def _near_edge(c: CaseConfig) -> int:
    """Where a huge table's ids start: 2048 below INT32_MAX // (rows per block), so
    that base * rows wraps right above them (less below a stride so large that there
    are fewer ids than that)."""
    top = INT32_MAX // c.row_stride
    return top - min(2048, top // 2)


def _block_tables(configs, device) -> torch.Tensor:
    """Every case's block_table, flat (row-major per case), int32."""
    per_case = [
        {
            "count": c.num_reqs * c.blocks_per_req, **_keys(c.seed, _TABLE_STREAMS), "width": c.blocks_per_req,
            "ids": max(4 * c.num_reqs * c.blocks_per_req, 1024), "near": _near_edge(c),
            "huge": int(c.table == "huge"), "padded": int(c.table == "padded"),
            "persistent": int(c.table == "persistent"),
            "real_reqs": -(-c.real_tokens // c.tokens_per_req) if c.tokens_per_req else c.num_reqs,
        }
        for c in configs
    ]
    e, p = _per_element(per_case, device)
    req = torch.div(e, p["width"], rounding_mode="floor")
    col = e - req * p["width"]
    u = _draw_streams(p, ("table", "table_kind"), e)
    ids = u["table"]

    # huge: half the ids straddle INT32_MAX // B (so base * B wraps right there), half
    # are anywhere in int32's positive range.
    near = p["near"] + ids % 4096
    anywhere = ids % (INT32_MAX + 1)
    huge = torch.where((u["table_kind"] & 1) == 0, near, anywhere)

    physical = ids % p["ids"]
    # padded: each request uses a prefix of its row; the rest is padding, -1 for even
    # requests and 0 for odd ones (both occur in practice).
    used = _draw(p["key:table_len"], req) % (p["width"] + 1)
    padded = torch.where(col < used, physical, torch.where(req % 2 == 0, -1, 0))
    table = torch.where(p["huge"] == 1, huge, torch.where(p["padded"] == 1, padded, physical))
    if any(c.table == "persistent" for c in configs):
        # The backends' persistent table: a request's used blocks (at least one), then
        # the buffer's zeros; rows of requests no real row reads stay all 0.
        persistent = torch.where((col < used.clamp(min=1)) & (req < p["real_reqs"]), physical, 0)
        table = torch.where(p["persistent"] == 1, persistent, table)
    return table.to(torch.int32)


def _prefill_starts(configs, device) -> torch.Tensor:
    """Every case's prefill_starts, flat: the workspace rows of consecutive prefill
    requests, each as long as a full request."""
    per_case = [
        {"count": c.num_reqs, "stride": c.blocks_per_req * c.block_size, "chunk": c.prefill_chunk,
         **_keys(c.seed, ("prefill_len",))}
        for c in configs
    ]
    r, p = _per_element(per_case, device)
    starts = r * p["stride"]
    if any(c.prefill_chunk for c in configs):
        # Chunked prefill: each request as long as drawn (1 to a full request), the
        # starts rebased to 0 at every chunk of prefill_chunk requests: 0, 10, 0, 20.
        length = 1 + _draw(p["key:prefill_len"], r) % p["stride"]
        before = torch.cumsum(length, 0) - length  # exclusive, over the whole batch
        first = torch.arange(r.numel(), device=r.device) - r % p["chunk"].clamp(min=1)
        starts = torch.where(p["chunk"] >= 1, before - before[first], starts)
    return starts.to(torch.int32)


_INPUT_RANKS = {"req_id": 1, "block_table": 2, "token_indices": 2, "prefill_request_ids": 1, "prefill_starts": 1}


def check_inputs(config: CaseConfig, inputs: CaseInputs) -> None:
    """Refuse inputs that break the kernels' contract (SPEC §2, §6), in one line naming
    the tensor and the first bad index, before any kernel or the oracle sees them.

    The SPEC leaves ``0 <= req_id < Rq`` and ``prefill_request_ids < P`` unchecked in
    the kernels (an out-of-bounds read, or a crash); saved inputs are checked here
    instead. Non-contiguous tensors are fine: the wrappers make them contiguous."""
    present = {name: getattr(inputs, name) for name in TENSOR_NAMES if getattr(inputs, name) is not None}
    for name in ("req_id", "block_table", "token_indices"):
        if name not in present:
            raise InputError(f"{name} is missing; a case needs req_id, block_table and token_indices")
    for name, t in present.items():
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{name} is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype != torch.int32:
            raise InputError(f"{name} has dtype {t.dtype}; the kernels take int32 — convert it with .to(torch.int32)")
        if t.dim() != _INPUT_RANKS[name]:
            raise InputError(f"{name} is {t.dim()}-D with shape {tuple(t.shape)}; it must be {_INPUT_RANKS[name]}-D")
        if t.device.type not in ("cpu", "cuda"):
            raise InputError(f"{name} lives on {t.device}; inputs must be cpu or cuda tensors")
    devices = sorted({str(t.device) for t in present.values()})
    if len(devices) > 1:
        raise InputError(f"inputs live on several devices ({', '.join(devices)}); move them to one")
    if inputs.req_id.shape[0] != inputs.token_indices.shape[0]:
        raise InputError(
            f"req_id has {inputs.req_id.shape[0]} rows but token_indices has {inputs.token_indices.shape[0]}; "
            f"they need one req_id per token row"
        )
    expected = {
        "req_id": (config.tokens,),
        "token_indices": (config.tokens, config.topk),
        "block_table": (config.num_reqs, config.blocks_per_req),
    }
    for name, shape in expected.items():
        actual = tuple(present[name].shape)
        if actual != shape:
            raise InputError(
                f"{name} has shape {actual} but the case expects {shape} "
                f"(tokens={config.tokens}, topk={config.topk}, num_reqs={config.num_reqs}, "
                f"blocks_per_req={config.blocks_per_req})"
            )
    _check_below(inputs.req_id, "req_id", 0, config.num_reqs, "block_table rows (num_reqs)")
    if config.has_prefill:
        if inputs.prefill_request_ids is None or inputs.prefill_starts is None:
            raise InputError("the case has prefill rows (prefill_fraction > 0) but prefill_request_ids or "
                             "prefill_starts is missing")
        if tuple(inputs.prefill_request_ids.shape) != (config.tokens,):
            raise InputError(f"prefill_request_ids has shape {tuple(inputs.prefill_request_ids.shape)} but the case "
                             f"expects ({config.tokens},), one entry per token row")
        prefills = inputs.prefill_starts.shape[0]
        if prefills == 0:
            raise InputError("prefill_starts is empty but the case has prefill rows (prefill_fraction > 0); "
                             "it needs one start per prefill request")
        # Any negative id means "not a prefill row" (SPEC §3 step 2): only the top is bounded.
        _check_below(inputs.prefill_request_ids, "prefill_request_ids", None, prefills, "prefill_starts entries")


def _check_below(t: torch.Tensor, name: str, low: Optional[int], high: int, what: str) -> None:
    """InputError naming the first index of ``t`` outside [low, high)."""
    bad = t >= high if low is None else (t < low) | (t >= high)
    if bool(bad.any()):
        first = int(torch.nonzero(bad.reshape(-1))[0])
        allowed = f"below {high}" if low is None else f"in [{low}, {high})"
        raise InputError(
            f"{name}[{first}] = {int(t.reshape(-1)[first])} is outside the {high} {what}: every value must lie "
            f"{allowed} (SPEC §2)"
        )


# Bytes a case needs per element, with room for the int64 intermediates of input
# generation, the three implementations' outputs (A, B, oracle) and the reference.
_BYTES_PER_LANE = 256
_BYTES_PER_TABLE_ENTRY = 96
_BYTES_PER_ROW = 128


def bytes_needed(config: CaseConfig) -> int:
    """A generous estimate of the memory one case needs at its peak."""
    lanes = config.tokens * config.topk
    entries = config.num_reqs * config.blocks_per_req
    return lanes * _BYTES_PER_LANE + entries * _BYTES_PER_TABLE_ENTRY + (config.tokens + config.num_reqs) * _BYTES_PER_ROW


def available_bytes(device: str) -> tuple[int, str]:
    """(bytes free, where) for tensors on ``device``: free GPU memory for cuda, the
    kernel's MemAvailable (else free physical pages) for the CPU."""
    if str(device).startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free), "free GPU memory"
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available host memory"
    except (OSError, ValueError, IndexError):
        pass
    import os

    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free host memory"
    except (ValueError, OSError, AttributeError):
        return 1 << 62, "host memory (unknown)"  # no way to know: do not refuse


def check_fits(config: CaseConfig, device: str) -> None:
    """ResourceError when the case cannot fit in this machine's memory, before any
    allocation (which would fail with a traceback or be killed by the OOM killer)."""
    need = bytes_needed(config)
    free, where = available_bytes(device)
    if need > free:
        raise ResourceError(
            f"case {config.case_id} needs about {_gib(need)} but only {_gib(free)} of {where} is left "
            f"(tokens x topk = {config.tokens * config.topk:,} lanes, num_reqs x blocks_per_req = "
            f"{config.num_reqs * config.blocks_per_req:,} table entries); shrink tokens, topk, num_reqs or blocks_per_req"
        )


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
