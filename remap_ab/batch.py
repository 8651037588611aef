"""Run many cases at once with as few host synchronisations as possible.

``run_case`` (runner.py) judges one case and synchronises the device several times
doing so; on a GPU, 1728 of those are dominated by Python and sync overhead. This
module runs a *batch* of cases in four timed phases, each ending in one sync (the
compare phase in two at most):

  gen       every case's inputs, generated on the device in one batched pass;
  kernels   A and B on every case (poisoned ``empty``, CUDA events for per-case time);
  compare   the oracle's reference for every case (one batched pass), its public API
            on one case per wrapper path, and a device-side *proof of passing*: one
            small flag vector per case, pulled to the host once for the whole batch
            (and once more for the outputs whose tile order needs a witness);
  write     input hashes (the reports of cases that did not pass are the caller's:
            a non-passing outcome carries its full ``CaseResult``).

The proof of passing is exact in one direction only: a flag set means ``compare``
(compare.py) would pass the implementation; a flag clear sends that case through
``compare`` itself, which gives the verdict. So verdicts are always ``compare``'s.
For a tiled compaction whose prefix order differs from the oracle's, the proof
exhibits a witness: an order of the tile segments, found greedily on the device, whose
concatenation is the prefix lane by lane. When the greedy walk finds none,
``compare``'s exhaustive search decides.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import torch

from remap_ab import registry
from remap_ab.compare import Mismatch, Output, Verdict, compare, note_order_differs, proof_of_pass
from remap_ab.compare import shape_ok as _shape_ok
from remap_ab.config import CaseConfig
from remap_ab.errors import exception_line
from remap_ab.inputs import CaseInputs, generate_inputs_batch, hash_inputs
from remap_ab.runner import CaseResult, poisoned_empty, reference_batch, run_case, synchronize
from remap_ab.status import Check, Status

PHASES = ("gen", "kernels", "compare", "write")


@dataclass
class CaseOutcome:
    """What the sweep records about one case. ``result`` (tensors and all, for a
    report) is kept only for a case that did not pass; passing ones drop it."""

    config: CaseConfig
    verdict: Verdict
    a_ms: Optional[float]
    b_ms: Optional[float]
    inputs_sha256: str = ""
    max_row_valid: int = 0  # the oracle's largest per-row valid count
    result: Optional[CaseResult] = None


@dataclass
class BatchTimes:
    seconds: dict = field(default_factory=lambda: {p: 0.0 for p in PHASES})


class _Clock:
    """Per-call timing: CUDA events on a GPU (no sync), perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def elapsed_ms(self, start, end) -> float:
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) * 1e3


def _call(impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, clock: _Clock):
    contract = impl.order_contract(config)
    try:
        t0 = clock.start()
        out, counts = impl(config, inputs)
        t1 = clock.start()
    except Exception as exc:  # a broken implementation is a verdict, not a crash
        return Output(impl.name, None, None, contract, error=exception_line(exc)[:500]), None
    return Output(impl.name, out, counts, contract), (t0, t1)


_HASHERS: Optional[ThreadPoolExecutor] = None


def _hashers() -> ThreadPoolExecutor:
    global _HASHERS
    if _HASHERS is None:
        _HASHERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="remap-ab-hash")
    return _HASHERS


def run_batch(
    configs: list,
    a: str,
    b: str,
    device: str,
    times: Optional[BatchTimes] = None,
    *,
    memcheck: bool = False,
) -> list[CaseOutcome]:
    """Judge ``configs`` on ``device``; phase durations are added to ``times``. A case
    that does not pass comes back with its ``CaseResult`` (what a report needs).

    ``memcheck``: run each case on its own through ``runner.run_case(...,
    memcheck=True)``, every load and store checked (slow; no batching to gain)."""
    times = times if times is not None else BatchTimes()
    if memcheck:
        return _run_one_by_one(configs, a, b, device, times)
    dev = torch.device(device)
    impl_a, impl_b, impl_o = registry.get(a), registry.get(b), registry.get("oracle")
    clock = _Clock(dev)

    t0 = time.perf_counter()
    inputs = generate_inputs_batch(configs, device=dev)
    synchronize(dev)
    t1 = time.perf_counter()
    times.seconds["gen"] += t1 - t0

    outs = []
    with poisoned_empty():
        for c, x in zip(configs, inputs):
            oa, ta = _call(impl_a, c, x, clock)
            ob, tb = _call(impl_b, c, x, clock)
            outs.append((oa, ta, ob, tb))
    synchronize(dev)
    t2 = time.perf_counter()
    times.seconds["kernels"] += t2 - t1

    refs = reference_batch(configs, inputs)
    # The oracle's public API is checked against the reference on one case per wrapper
    # path of the batch, not on every case: its wrappers (delegation, argument passing,
    # return shapes) choose their path from the configuration alone, and everything
    # data-dependent is remap and compact_rows, which the reference runs too. Running
    # it on every case would double the oracle's cost for no more coverage of the
    # plumbing. (A one-case batch, the CPU default, still checks every case.)
    checked = set(_paths_sampled(configs))
    oracles, flags = [], []
    false = torch.zeros((), dtype=torch.bool, device=dev)
    true = torch.ones((), dtype=torch.bool, device=dev)
    for i, (c, x, (oa, _, ob, _), ref) in enumerate(zip(configs, inputs, outs, refs)):
        oo = _call(impl_o, c, x, clock)[0] if i in checked else None
        oracles.append(oo)
        # Exact equality first: most outputs are the reference's lane for lane, and the
        # tile-order witness (a loop of launches per case) is then only searched for
        # the few that are not (second round below).
        pa, pb = proof_of_pass(oa, ref, c, witness=False), proof_of_pass(ob, ref, c, witness=False)
        po: Optional[torch.Tensor]
        if oo is None:
            po = true
        else:
            po = (oo.out == ref.out).all() if _shape_ok(oo, ref, False) else None
        differs = torch.zeros((), dtype=torch.int64, device=dev)
        if c.compacts and pa is not None and pb is not None:
            differs = (oa.out != ob.out).any(dim=1).sum()
        most_valid = ref.counts.max() if ref.counts.numel() else torch.zeros((), dtype=torch.int32, device=dev)
        flags.append(
            torch.stack([
                (pa if pa is not None else false).to(torch.int64),
                (pb if pb is not None else false).to(torch.int64),
                (po if po is not None else false).to(torch.int64),
                differs.to(torch.int64),
                most_valid.to(torch.int64),
            ])
        )
    host_flags = torch.stack(flags).tolist() if flags else []  # the batch's first sync
    _witness_round(configs, outs, refs, host_flags)
    verdicts = []
    for c, (oa, _, ob, _), ref, oo, (fa, fb, fo, nd, _) in zip(configs, outs, refs, oracles, host_flags):
        if not fo:
            assert oo is not None  # po is true where the oracle was not called
            msg = oo.error or "the oracle's public API disagrees with its reference; please file a bug"
            verdicts.append(
                Verdict(c.case_id, Status.ERROR, [Mismatch(Check.ERROR, "oracle", -1, -1, {}, 0, 0, f"internal: {msg}")])
            )
        elif fa and fb:
            verdicts.append(_pass_verdict(c, oa, ob, int(nd)))
        else:
            verdicts.append(
                compare(c.case_id, oa, ob, ref, compacted=c.compacts, counts_returned=c.counts_returned)
            )
    t3 = time.perf_counter()
    times.seconds["compare"] += t3 - t2

    if dev.type == "cuda" and len(inputs) > 1:
        # Copies and hashlib both release the GIL: threads overlap each case's
        # device-to-host copy with the hashing of others (measured faster on the H200
        # than one batched copy followed by hashing).
        hashes = list(_hashers().map(hash_inputs, inputs))
    else:
        hashes = [hash_inputs(x) for x in inputs]
    results = []
    for c, x, (oa, ta, ob, tb), ref, oo, v, (_, combined), flags in zip(
        configs, inputs, outs, refs, oracles, verdicts, hashes, host_flags
    ):
        a_ms = clock.elapsed_ms(*ta) if ta else None
        b_ms = clock.elapsed_ms(*tb) if tb else None
        oa.seconds = (a_ms or 0.0) / 1e3
        ob.seconds = (b_ms or 0.0) / 1e3
        outcome = CaseOutcome(c, v, a_ms, b_ms, combined, max_row_valid=int(flags[4]))
        if not v.passed:
            if oo is None:  # reports show the oracle's API output too
                oo = _call(impl_o, c, x, clock)[0]
            outcome.result = CaseResult(c, x, oa, ob, ref, v, oracle=oo)
        results.append(outcome)
    times.seconds["write"] += time.perf_counter() - t3
    return results


def _run_one_by_one(configs: list, a: str, b: str, device: str, times: BatchTimes) -> list[CaseOutcome]:
    """Each case through ``run_case`` (memcheck on); its whole time counts as kernels."""
    outcomes = []
    for c in configs:
        t0 = time.perf_counter()
        result = run_case(c, a, b, device=device, memcheck=True)
        times.seconds["kernels"] += time.perf_counter() - t0
        v = result.verdict
        counts = result.reference.counts
        outcomes.append(CaseOutcome(
            c, v,
            None if result.a.seconds is None else result.a.seconds * 1e3,
            None if result.b.seconds is None else result.b.seconds * 1e3,
            hash_inputs(result.inputs)[1],
            max_row_valid=int(counts.max()) if counts.numel() else 0,
            result=None if v.passed else result,
        ))
    return outcomes


def _witness_round(configs: list, outs: list, refs: list, host_flags: list) -> None:
    """Set the pass flag of every output that differs from the reference but that a
    tile-order witness proves passing (one more sync, only when there are any)."""
    todo, proofs = [], []
    for i, (c, (oa, _, ob, _), ref, flags) in enumerate(zip(configs, outs, refs, host_flags)):
        for side, o in enumerate((oa, ob)):
            if not flags[side] and c.compacts and not o.contract.ordered and _shape_ok(o, ref, c.counts_returned):
                proof = proof_of_pass(o, ref, c)
                assert proof is not None  # None only where _shape_ok fails
                todo.append((i, side))
                proofs.append(proof)
    if todo:
        for (i, side), ok in zip(todo, torch.stack(proofs).tolist()):
            host_flags[i][side] = int(ok)


def _paths_sampled(configs: list) -> list[int]:
    """Indices of the first case of each wrapper path among ``configs``: the plain
    convert (with or without the prefill workspace), the DCP wrapper's delegation at
    dcp_size 1, and its filter with or without compaction; each with or without counts."""
    first: dict[tuple[str, bool, bool, bool, bool], int] = {}
    for i, c in enumerate(configs):
        first.setdefault((c.mode, c.is_dcp, c.compacts, c.has_prefill, c.counts_returned), i)
    return sorted(first.values())


def _pass_verdict(c: CaseConfig, oa: Output, ob: Output, differing_rows: int) -> Verdict:
    """The verdict ``compare`` gives a passing case (same info line)."""
    v = Verdict(case_id=c.case_id, status=Status.PASS)
    if c.compacts:
        note_order_differs(v, oa, ob, differing_rows, c.tokens)
    return v
