"""Run one case: inputs → every implementation → the oracle's reference → verdict.

Uninitialised memory is poisoned while an implementation runs (torch's
``fill_uninitialized_memory`` with deterministic algorithms on), so a lane or count the
kernel forgot to write reads as a loud sentinel instead of passing by luck.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch

from remap_ab import backend, oracle, registry
from remap_ab.compare import Output, Reference, Verdict, compare
from remap_ab.config import CaseConfig
from remap_ab.errors import InternalError, exception_line
from remap_ab.inputs import CaseInputs, check_fits, check_inputs, generate_inputs, host_values, ragged_arange

if TYPE_CHECKING:  # memcheck is imported only when asked for (see run_implementation)
    from remap_ab.memcheck import Session


@contextlib.contextmanager
def poisoned_empty():
    """torch.empty and friends return sentinel-filled memory inside this block."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    _set_deterministic(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        _set_deterministic(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # torch.use_deterministic_algorithms also mirrors the flag into inductor's config,
    # importing torch._inductor to do so: ~5 s per process on the H200 image, for a
    # compiler remap-ab never uses. The C-level switch is all the poisoning reads.
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_implementation(
    impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, schedule=None, memcheck: bool = False
) -> Output:
    """One implementation on one case; an exception becomes an ``error`` output.

    ``schedule`` is an optional context manager factory (see ``schedule.py``) that
    wraps the call, e.g. to permute the interpreter's programs. ``memcheck``: check
    every memory access (CPU: in the interpreter; GPU: a compute-sanitizer run in a
    subprocess); what it saw is ``Output.memcheck``."""
    contract = impl.order_contract(config)
    device = inputs.device
    watch: contextlib.AbstractContextManager[Optional[Session]] = contextlib.nullcontext()
    if memcheck and device.type != "cuda":
        from remap_ab import memcheck as memcheck_module

        watch = memcheck_module.watching(inputs.tensors(), impl.name)
    session = None
    try:
        with poisoned_empty(), (schedule() if schedule else contextlib.nullcontext()), watch as session:
            synchronize(device)
            start = time.perf_counter()
            out, counts = impl(config, inputs)
            synchronize(device)
            seconds = time.perf_counter() - start
    except Exception as exc:  # a broken implementation is a verdict, not a crash
        report = session.report if session is not None else None
        return Output(impl.name, None, None, contract, error=exception_line(exc)[:500], memcheck=report)
    report = session.report if session is not None else None
    if memcheck and device.type == "cuda":
        from remap_ab import sanitizer

        report = sanitizer.check_case(impl.name, config, inputs)
    return Output(impl.name, out, counts, contract, seconds=seconds, memcheck=report)


def reference(config: CaseConfig, inputs: CaseInputs) -> Reference:
    size, rank, interleave = config.effective_dcp
    lanes, valid = oracle.remap(
        inputs.req_id,
        inputs.block_table,
        inputs.token_indices,
        block_size=config.block_size,
        dcp_size=size,
        dcp_rank=rank,
        interleave=interleave,
        prefill_request_ids=inputs.prefill_request_ids if config.has_prefill else None,
        prefill_starts=inputs.prefill_starts if config.has_prefill else None,
    )
    out = oracle.compact_rows(lanes, valid) if config.compacts else lanes
    return Reference(lanes=lanes, valid=valid, out=out, counts=valid.sum(dim=1, dtype=torch.int32))


def reference_batch(configs: list, inputs: list) -> list[Reference]:
    """``reference`` for every case, equal tensor for tensor, in a fixed number of tensor
    ops (on a GPU, per-op launch cost dominates small cases).

    All cases' token rows are stacked into one [rows, max K] block whose padding lanes
    are -1 (invalid, so compaction leaves them last and counts skip them), their block
    tables into one [requests, max W] table, and ``oracle.remap`` reads each row's own
    parameters; each case's Reference holds contiguous views of the flat results.
    Like the kernels, it trusts req_id to lie below num_reqs (generated inputs do)."""
    if not configs:
        return []
    dev = inputs[0].device
    names = ("tokens", "topk", "block_size", "dcp_size", "dcp_rank", "interleave", "width", "num_reqs", "req_at", "prefill_at")
    columns = []
    for c, (_, req_at, prefill_at) in zip(configs, _case_offsets(configs)):
        size, rank, interleave = c.effective_dcp
        columns.append([c.tokens, c.topk, c.block_size, size, rank, interleave, c.blocks_per_req, c.num_reqs, req_at, prefill_at])
    per_case = host_values(columns, dev).t()
    case = dict(zip(names, per_case))
    row_case, _ = ragged_arange(case["tokens"], sum(c.tokens for c in configs))
    # One value per row, int32 so that remap's arithmetic stays int32 (SPEC §2).
    per_row = dict(zip(names, per_case[:, row_case].to(torch.int32).unsqueeze(-1)))

    # Lane (row, col) of the flat case-after-case layout -> its place in the stacked block.
    k_max = max(c.topk for c in configs)
    lane_row, lane_col = ragged_arange(per_row["topk"].view(-1), sum(c.tokens * c.topk for c in configs))
    stacked = lane_row * k_max + lane_col
    tokens = torch.full((row_case.numel(), k_max), -1, dtype=torch.int32, device=dev)
    tokens.view(-1)[stacked] = torch.cat([x.token_indices.reshape(-1) for x in inputs])

    w_max = max(c.blocks_per_req for c in configs)
    requests = sum(c.num_reqs for c in configs)
    req_width = torch.repeat_interleave(case["width"], case["num_reqs"], output_size=requests)
    req, entry_col = ragged_arange(req_width, sum(c.num_reqs * c.blocks_per_req for c in configs))
    table = torch.zeros((requests, w_max), dtype=torch.int32, device=dev)
    table.view(-1)[req * w_max + entry_col] = torch.cat([x.block_table.reshape(-1) for x in inputs])

    prefill_ids = prefill_starts = None
    if any(c.has_prefill for c in configs):
        # Rows of cases without prefill read -1, "not a prefill row": to remap, the
        # same as leaving the prefill arguments out.
        none = torch.full((max(c.tokens for c in configs),), -1, dtype=torch.int32, device=dev)
        ids = torch.cat([x.prefill_request_ids if c.has_prefill else none[: c.tokens] for c, x in zip(configs, inputs)])
        prefill_ids = torch.where(ids >= 0, ids + per_row["prefill_at"].view(-1), -1)
        prefill_starts = torch.cat([x.prefill_starts for c, x in zip(configs, inputs) if c.has_prefill])

    lanes, valid = oracle.remap(
        torch.cat([x.req_id for x in inputs]) + per_row["req_at"].view(-1),
        table,
        tokens,
        block_size=per_row["block_size"],
        dcp_size=per_row["dcp_size"],
        dcp_rank=per_row["dcp_rank"],
        interleave=per_row["interleave"],
        prefill_request_ids=prefill_ids,
        prefill_starts=prefill_starts,
        widths=per_row["width"],
    )
    counts = valid.sum(dim=1, dtype=torch.int32)
    flat_lanes, flat_valid = lanes.view(-1)[stacked], valid.view(-1)[stacked]
    flat_out = oracle.compact_rows(lanes, valid).view(-1)[stacked] if any(c.compacts for c in configs) else None

    refs = []
    lane = 0
    for c, (row, _, _) in zip(configs, _case_offsets(configs)):
        n, shape = c.tokens * c.topk, (c.tokens, c.topk)
        case_lanes = flat_lanes[lane : lane + n].view(shape)
        refs.append(
            Reference(
                lanes=case_lanes,
                valid=flat_valid[lane : lane + n].view(shape),
                out=flat_out[lane : lane + n].view(shape) if flat_out is not None and c.compacts else case_lanes,
                counts=counts[row : row + c.tokens],
            )
        )
        lane += n
    return refs


def _case_offsets(configs) -> list[tuple[int, int, int]]:
    """Each case's first token row, first block-table request and first prefill request
    when all cases' lie back to back (prefill requests: only cases that have prefill)."""
    out, row, req, prefill = [], 0, 0, 0
    for c in configs:
        out.append((row, req, prefill))
        row, req = row + c.tokens, req + c.num_reqs
        prefill += c.num_reqs if c.has_prefill else 0
    return out


@dataclass
class CaseResult:
    config: CaseConfig
    inputs: CaseInputs
    a: Output
    b: Output
    reference: Reference
    verdict: Verdict
    oracle: Optional[Output] = None

    @property
    def case_id(self) -> str:
        return self.config.case_id

    def outputs(self) -> dict[str, Output]:
        outs = {self.a.name: self.a, self.b.name: self.b}
        if self.oracle is not None:
            outs["oracle"] = self.oracle
        return outs


def run_case(
    config: CaseConfig,
    a: str = "old",
    b: str = "new",
    *,
    device: Optional[str] = None,
    inputs: Optional[CaseInputs] = None,
    schedule=None,
    memcheck: bool = False,
) -> CaseResult:
    """Run ``config`` through implementations ``a`` and ``b`` and judge them against
    the oracle (SPEC §7). ``inputs`` defaults to the case's generated inputs.
    ``memcheck``: also check every memory access of ``a`` and ``b`` (memcheck.py);
    an access outside every argument tensor fails the case."""
    dev = backend.select(device)
    if inputs is not None:
        check_inputs(config, inputs)
    check_fits(config, dev)
    if inputs is None:
        inputs = generate_inputs(config, device=dev)
    else:
        inputs = inputs.to(dev)
    impl_a, impl_b = registry.get(a), registry.get(b)
    out_a = run_implementation(impl_a, config, inputs, schedule, memcheck=memcheck)
    out_b = run_implementation(impl_b, config, inputs, schedule, memcheck=memcheck)
    ref = reference(config, inputs)
    # The oracle also runs through its public API, so the wrappers' plumbing
    # (delegation, return shapes) is checked against the direct reference too.
    out_o = run_implementation(registry.get("oracle"), config, inputs)
    verdict = compare(
        config.case_id, out_a, out_b, ref, compacted=config.compacts, counts_returned=config.counts_returned
    )
    if memcheck:
        from remap_ab import memcheck as memcheck_module

        memcheck_module.judge(verdict, (out_a, out_b), memcheck_module.replay_command(config, a, b, dev))
    if out_o.error is not None:
        raise InternalError(f"the oracle's API raised on case {config.case_id}: {out_o.error}")
    if out_o.out is None or not torch.equal(out_o.out, ref.out):
        raise InternalError(f"the oracle's API disagrees with its reference on case {config.case_id}")
    return CaseResult(config, inputs, out_a, out_b, ref, verdict, oracle=out_o)
