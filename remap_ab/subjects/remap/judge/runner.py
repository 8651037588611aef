"""Run one case: inputs → every implementation → the oracle's reference → verdict.

Every implementation, the oracle's public API too, is called through ``call.call``
(its own copy of the inputs, poisoned ``torch.empty``, input-write and aliasing
checks, and on a GPU the production checks); ``compare`` builds the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab import command_line, runtime
from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.case.backend_views import backend_views
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, check_fits, check_inputs, generate_inputs, host_values, in_layout, ragged_arange
from remap_ab.subjects.remap.judge import call, features, oracle, registry
from remap_ab.subjects.remap.judge.call import poisoned_empty, synchronize
from remap_ab.subjects.remap.judge.compare import Output, Reference, Verdict, compare

__all__ = ["CaseResult", "poisoned_empty", "reference", "reference_batch", "run_case", "run_implementation", "synchronize"]


# One owner calls implementations (call.py); these names stay importable from here.
run_implementation = call.call


def reference(config: CaseConfig, inputs: CaseInputs) -> Reference:
    size, rank, interleave = config.effective_dcp
    lanes, valid = oracle.remap(
        inputs.req_id,
        inputs.block_table,
        inputs.token_indices,
        block_size=config.block_size,
        block_stride=config.row_stride,
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
    names = ("tokens", "topk", "block_size", "dcp_size", "dcp_rank", "interleave", "width", "num_reqs", "req_at", "prefill_at",
             "row_stride")
    columns = []
    for c, (_, req_at, prefill_at) in zip(configs, _case_offsets(configs)):
        size, rank, interleave = c.effective_dcp
        columns.append([c.tokens, c.topk, c.block_size, size, rank, interleave, c.blocks_per_req, c.num_reqs, req_at, prefill_at,
                        c.row_stride])
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
        block_stride=per_row["row_stride"],
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
    inputs_sha256: Optional[tuple] = None  # hash_inputs(inputs), where the run has it already (the sweep's batches)

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
    production: Optional[bool] = None,
) -> CaseResult:
    """Run ``config`` through implementations ``a`` and ``b`` and judge them against
    the oracle (SPEC §7). ``inputs`` defaults to the case's generated inputs (given
    ones are placed in the case's layout). ``memcheck``: also check every memory
    access of ``a`` and ``b`` (memcheck.py); an access outside every argument tensor
    fails the case. ``production``: the CUDA graph, stream and sync checks (default:
    on where the device is a GPU)."""
    dev = runtime.select(device)
    if inputs is not None:
        check_inputs(config, inputs)
    check_fits(config, dev)
    if inputs is None:
        inputs = generate_inputs(config, device=dev)
    else:
        inputs = inputs.to(dev)
        if config.layout != "contiguous":
            inputs = in_layout(config.layout, inputs)
    production = torch.device(dev).type == "cuda" if production is None else production
    impl_a, impl_b = sides(config, a, b)
    # The oracle standing in for a side (features.py) gets neither memcheck nor the GPU call checks.
    named_a, named_b = impl_a.name == registry.get(a).name, impl_b.name == registry.get(b).name
    out_a = call.call(impl_a, config, inputs, schedule, memcheck=memcheck and named_a, production=production and named_a,
                      sync=production and named_a)
    out_b = call.call(impl_b, config, inputs, schedule, memcheck=memcheck and named_b, production=production and named_b,
                      sync=production and named_b)
    ref = reference(config, inputs)
    # The oracle also runs through its public API, so the wrappers' plumbing
    # (delegation, return shapes) is checked against the direct reference too.
    out_o = call.call(registry.get("oracle"), config, inputs)
    verdict = compare(
        config.case_id, out_a, out_b, ref, compacted=config.compacts, counts_returned=config.counts_returned,
        oracle_problem=oracle_problem(out_o, ref), memchecked=memcheck,
        replay=memcheck_run_line(config, a, b, dev) if memcheck else "",
        views=backend_views(config, out_a, out_b, ref), caller=config.caller,
    )
    return CaseResult(config, inputs, out_a, out_b, ref, verdict, oracle=out_o)


def sides(config: CaseConfig, a: str, b: str) -> tuple:
    """The implementations that run ``config`` as A and B: a side whose wrapper (the
    one the case calls) lacks an optional parameter the case passes is replaced by the
    oracle, so the other side is judged against it (features.py). A case neither side
    can take is a ConfigError."""
    runs_a, runs_b = registry.feature_plan(a, b).runs(config)
    if not (runs_a or runs_b):
        raise ConfigError(f"neither {a}'s nor {b}'s {config.mode} wrapper takes {', '.join(features.uses(config))}, "
                          f"which this case passes; give a --b that does (e.g. --b main) or leave the option off")
    return tuple(registry.get(name if runs else "oracle") for name, runs in ((a, runs_a), (b, runs_b)))


def oracle_problem(o: Output, ref: Reference) -> Optional[str]:
    """Why the oracle's public API cannot be trusted on this case (None: it agrees)."""
    if o.error is not None:
        return f"the oracle's API raised: {o.error}"
    if o.out is None or not torch.equal(o.out, ref.out) or o.findings:
        return "the oracle's public API disagrees with its reference"
    return None



def memcheck_run_line(config: CaseConfig, a: str, b: str, device: str) -> str:
    """The ``remap-ab run`` line that reruns ``config`` under memcheck."""
    return command_line.line("run", a=a, b=b, case=config.cli_args(), device=device, memcheck=True)

