"""Run many cases at once with as few host synchronisations as possible.

``run_case`` (runner.py) judges one case and synchronises the device several times
doing so; on a GPU, 1728 of those are dominated by Python and sync overhead. This
module runs a *batch* of cases in four timed phases:

  gen       every case's inputs, generated on the device in one batched pass; their
            sha256s start here, in the background (copies on a side stream, hashing
            in threads), overlapping the next two phases;
  kernels   A and B on every case (poisoned ``empty``, CUDA events for per-case time);
  compare   the oracle's reference for every case (one batched pass), its public API
            on the first case of each wrapper path this process meets, and a
            device-side *proof of passing* for every output, computed for the whole
            batch in a fixed number of tensor ops and pulled to the host at once (once
            more for the outputs whose tile order needs a witness);
  write     what is left of the hashing, and the outcomes (the reports of cases that
            did not pass are the caller's: a non-passing outcome carries its full
            ``CaseResult``).

The proof of passing is exact in one direction only: a proof means ``compare``
(compare.py) would pass the implementation; no proof sends that case through
``compare`` itself, which gives the verdict. So verdicts are always ``compare``'s.
For a tiled compaction whose prefix order differs from the oracle's, the proof
exhibits a witness: an order of the tile segments, found greedily on the device, whose
concatenation is the prefix lane by lane (``compare.rows_witnessed``, run once per
(K, tile) group of the batch). When the greedy walk finds none, ``compare``'s
exhaustive search decides.
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab.host import tuning
from remap_ab.sanitizer import compute as sanitizer
from remap_ab.speed import size_bucket
from remap_ab.subject import BatchTimes
from remap_ab.subjects.remap.case.backend_views import backend_views
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import (
    HASHING_THREADS,
    CaseInputs,
    generate_inputs_batch,
    hash_inputs,
    hashing_started,
    host_values,
)
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import (
    MEMCHECK_CHILD,
    CallClock,
    PrivateInputs,
    call,
    fresh_configs,
    remember_fresh_inputs,
    synchronize,
)
from remap_ab.subjects.remap.judge.compare import Reference, Verdict, compare, rows_witnessed
from remap_ab.subjects.remap.judge.compare import shape_ok as _shape_ok
from remap_ab.subjects.remap.judge.runner import CaseResult, memcheck_run_line, oracle_problem, reference_batch, run_case, sides


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


def timed_call(impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, clock: CallClock,
               private: Optional[PrivateInputs] = None, index: int = 0, production: bool = False, context=None,
               sync: Optional[bool] = None):
    """One implementation on one case, as the sweep calls it (bench's host section times
    this too): ``(Output, (start, end))`` for ``clock.elapsed_ms``, or ``(Output, None)``
    when it raised. ``context``, ``sync``: as ``call``'s."""
    o = call(impl, config, inputs, private=private, index=index, clock=clock, production=production, context=context,
             sync=sync)
    return o, o.span


_HASHERS: Optional[ThreadPoolExecutor] = None


def _hashers() -> ThreadPoolExecutor:
    global _HASHERS
    if _HASHERS is None:
        _HASHERS = ThreadPoolExecutor(max_workers=HASHING_THREADS, thread_name_prefix="remap-ab-hash")
    return _HASHERS


# What one part of a batch may hold (``together``): a full batch of the PR's grid (64
# cases of at most 1024 x 2048 lanes) is one part; four 16384 x 2048 cases are.
MOST_LANES_TOGETHER = 1 << 27


def run_batch(
    configs: list,
    a: str,
    b: str,
    device: str,
    times: Optional[BatchTimes] = None,
    *,
    memcheck: bool = False,
    call_checks: str = "sample",
    context=None,
    keep=None,
) -> list[CaseOutcome]:
    """Judge ``configs`` on ``device``; phase durations are added to ``times``. A case
    that does not pass comes back with its ``CaseResult`` (what a report needs), when
    ``keep(config, verdict)`` says so (default: every one); the others carry their
    verdict alone, and cost no more than a passing case (no oracle API call for the
    report, no tensors held).

    ``memcheck``: every load and store of A and B checked as well. On the CPU each
    case runs on its own through ``runner.run_case(..., memcheck=True)`` (the
    interpreter's accesses; no batching to gain); on a GPU the batch is judged as
    usual and then replayed under compute-sanitizer, one child process per
    implementation for the whole batch (sanitizer.py), its findings folded into the
    verdicts; that time counts as the compare phase.

    ``call_checks`` (options.CALL_CHECKS): on a GPU, which cases get the graph and
    stream checks of their calls (``_production_sampled``); the sync check runs on every
    call unless it is "off". ``context``: entered around each call of A and B
    (``call``'s: the soak queues a contending side-stream load there)."""
    times = times if times is not None else BatchTimes()
    dev = torch.device(device)
    if memcheck and dev.type != "cuda":
        return _run_one_by_one(configs, a, b, device, times, keep)
    parts = together(configs)
    if len(parts) > 1:
        return [outcome for part in parts for outcome in run_batch(
            part, a, b, device, times, memcheck=memcheck, call_checks=call_checks, context=context, keep=keep)]
    impl_a, impl_b, impl_o = registry.get(a), registry.get(b), registry.get("oracle")
    clock = CallClock(dev)

    t0 = time.perf_counter()
    sampled: list = []
    if dev.type == "cuda" and call_checks != "off":
        sampled = list(range(len(configs))) if call_checks == "all" else _production_sampled(configs)
    # The sampled cases' graph checks replay on fresh inputs, generated with the batch's.
    graph_checked = [configs[i] for i in sampled]
    made = generate_inputs_batch(configs + fresh_configs(graph_checked), device=dev)
    inputs = made[: len(configs)]
    remember_fresh_inputs(graph_checked, made[len(configs):])
    synchronize(dev)
    # The inputs' host copies start now (a side stream) and the large ones are hashed in
    # threads beside the kernels and compare phases; the write phase takes the digests.
    hashes_of = hashing_started(inputs, _hashers() if len(inputs) > 1 and tuning.enabled("hash_threads") else None)
    t1 = time.perf_counter()
    times.seconds["gen"] += t1 - t0

    outs = []
    own_a, own_b = PrivateInputs.each(inputs, 2)
    chosen = set(sampled)
    sync = call_checks != "off"
    for i, (c, x) in enumerate(zip(configs, inputs)):
        # A case passing an optional parameter one side's wrapper lacks: the oracle stands in for it (features.py).
        ia, ib = sides(c, a, b)
        # The GPU call checks are the named implementations' (not the oracle standing in for one).
        oa, ta = timed_call(ia, c, x, clock, own_a, i, production=i in chosen and ia is impl_a, context=context,
                            sync=sync and ia is impl_a)
        ob, tb = timed_call(ib, c, x, clock, own_b, i, production=i in chosen and ib is impl_b, context=context,
                            sync=sync and ib is impl_b)
        outs.append((oa, ta, ob, tb))
    synchronize(dev)
    t2 = time.perf_counter()
    times.seconds["kernels"] += t2 - t1

    refs = reference_batch(configs, inputs)
    # The oracle's public API is checked against the reference on the first case of
    # each wrapper path this process meets, not on every case: its wrappers
    # (delegation, argument passing, return shapes) choose their path from the
    # configuration alone, and everything data-dependent is remap and compact_rows,
    # which the reference runs too. Running it on every case would double the
    # oracle's cost (on the CPU, where batches are one case, a third of the compare
    # phase) for no more coverage of the plumbing.
    checked = set(_paths_sampled(configs))
    oracles = [timed_call(impl_o, c, x, clock)[0] if i in checked else None for i, (c, x) in enumerate(zip(configs, inputs))]
    proofs = _proofs(configs, outs, refs, oracles, dev, (own_a, own_b))  # the batch's first sync
    _witness_round(configs, outs, refs, proofs)
    if memcheck:
        _sanitize(configs, inputs, outs, a, b)
    verdicts = []
    for c, (oa, _, ob, _), ref, oo, p in zip(configs, outs, refs, oracles, proofs):
        problem = None
        if not p.oracle_ok:
            problem = (oracle_problem(oo, ref) if oo is not None else None) or "the oracle's API disagrees with its reference"
        verdicts.append(compare(
            c.case_id, oa, ob, ref, compacted=c.compacts, counts_returned=c.counts_returned,
            proven=tuple(p.passes), inputs_unchanged=(p.inputs_unchanged,) * 2,
            differing_rows=p.rows_ordered_differently if p.passes[0] and p.passes[1] else None,
            oracle_problem=problem, memchecked=memcheck,
            replay=memcheck_run_line(c, a, b, device) if memcheck else "",
            # A case naming an attention backend: its view of both outputs, checked in compare.
            views=backend_views(c, oa, ob, ref), caller=c.caller,
        ))
    t3 = time.perf_counter()
    times.seconds["compare"] += t3 - t2

    hashes = hashes_of()
    results = []
    for c, x, (oa, ta, ob, tb), ref, oo, v, (per, combined), p in zip(
        configs, inputs, outs, refs, oracles, verdicts, hashes, proofs
    ):
        a_ms = clock.elapsed_ms(*ta) if ta else None
        b_ms = clock.elapsed_ms(*tb) if tb else None
        oa.seconds = (a_ms or 0.0) / 1e3
        ob.seconds = (b_ms or 0.0) / 1e3
        outcome = CaseOutcome(c, v, a_ms, b_ms, combined, max_row_valid=p.most_valid)
        if not v.passed and (keep is None or keep(c, v)):
            if oo is None:  # reports show the oracle's API output too
                oo = timed_call(impl_o, c, x, clock)[0]
            outcome.result = CaseResult(c, x, oa, ob, ref, v, oracle=oo, inputs_sha256=(per, combined))
        results.append(outcome)
    times.seconds["write"] += time.perf_counter() - t3
    return results


def together(configs: list) -> list[list]:
    """``configs`` cut, in order, into the parts judged together: each holds at most
    MOST_LANES_TOGETHER lanes (or one case). A part's inputs, private copies, outputs
    and references are all alive at once, so 64 prefill-sized cases in one batch
    would ask a GPU for far more memory than one of them does."""
    parts: list[list] = [[]]
    lanes = 0
    for c in configs:
        n = c.tokens * c.topk
        if parts[-1] and lanes + n > MOST_LANES_TOGETHER:
            parts.append([])
            lanes = 0
        parts[-1].append(c)
        lanes += n
    return parts if configs else []


def _sanitize(configs: list, inputs: list, outs: list, a: str, b: str) -> None:
    """Replay the batch's A and B under compute-sanitizer; each output gets its report
    (``compare`` makes a finding fail the case)."""

    for side, name in ((0, a), (2, b)):
        # An output that raised was not run to the end: it stays "not checked".
        # Nor is a case the oracle ran for this side (it lacks a parameter the case passes: features.py).
        ran = [i for i, case_outs in enumerate(outs)
               if case_outs[side].error is None and (case_outs[side].name != "oracle" or name == "oracle")]
        reports = sanitizer.check_cases(name, [configs[i] for i in ran], [inputs[i] for i in ran], child=MEMCHECK_CHILD)
        for i, report in zip(ran, reports):
            outs[i][side].memcheck = report


def _run_one_by_one(configs: list, a: str, b: str, device: str, times: BatchTimes, keep=None) -> list[CaseOutcome]:
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
            result=None if v.passed or (keep is not None and not keep(c, v)) else result,
        ))
    return outcomes


@dataclass
class _Proof:
    """What the device proved about one case (see the module docstring)."""

    passes: list  # [a, b]: True only if compare would pass that output
    equal: list  # [a, b]: the output equals the reference lane for lane (False: not comparable)
    counts_ok: list  # [a, b]: the counts equal the reference's, or none are returned
    oracle_ok: bool  # the oracle's public API equals its reference (True where not called)
    inputs_unchanged: bool  # no implementation changed a byte of its copy of the batch's inputs
    rows_ordered_differently: int  # compacted rows where a and b differ (both comparable)
    most_valid: int  # the reference's largest per-row valid count


def _segment_sums(flags: torch.Tensor, lengths: list, device: torch.device) -> torch.Tensor:
    """Sums of ``flags`` over consecutive segments of the given (positive) lengths."""
    ends = host_values(list(itertools.accumulate(lengths)), device)
    at_ends = torch.cumsum(flags, 0, dtype=torch.int64)[ends - 1]
    return torch.diff(at_ends, prepend=at_ends.new_zeros(1))


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _proofs(configs: list, outs: list, refs: list, oracles: list, dev: torch.device, private: tuple = ()) -> list[_Proof]:
    """Every case's ``_Proof`` from a fixed number of tensor ops over the whole batch
    (all cases' outputs back to back; per-case sums from one running sum), pulled to
    the host at once. On a GPU the cost of a batch is then a few dozen launches,
    not a few dozen per case."""
    n = len(configs)
    parts: list = []  # (name, the cases it covers, one int64 device value per case)

    def per_case(name: str, cases: list, values: torch.Tensor) -> None:
        parts.append((name, cases, values))

    comparable = []
    for side, name in ((0, "a"), (1, "b")):
        ok = [i for i in range(n) if _shape_ok(outs[i][2 * side], refs[i], configs[i].counts_returned)]
        comparable.append(set(ok))
        if ok:
            lanes = _flat(outs[i][2 * side].out for i in ok) != _flat(refs[i].out for i in ok)
            per_case(f"{name} lanes off", ok, _segment_sums(lanes, [refs[i].out.numel() for i in ok], dev))
        counted = [i for i in ok if configs[i].counts_returned]
        if counted:
            rows = _flat(outs[i][2 * side].counts for i in counted) != _flat(refs[i].counts for i in counted)
            per_case(f"{name} counts off", counted, _segment_sums(rows, [configs[i].tokens for i in counted], dev))
    # Rows that a and b order differently, for compacted cases comparable on both sides.
    both = [i for i in range(n) if configs[i].compacts and i in comparable[0] and i in comparable[1]]
    if both:
        differ = _flat(outs[i][0].out for i in both) != _flat(outs[i][2].out for i in both)
        rows = _segment_sums(differ, [k for i in both for k in [configs[i].topk] * configs[i].tokens], dev) > 0
        per_case("rows ordered differently", both, _segment_sums(rows, [configs[i].tokens for i in both], dev))
    for i in range(n):
        oo, ref = oracles[i], refs[i]
        if oo is not None:
            same = (oo.out == ref.out).all() if _shape_ok(oo, ref, False) else torch.zeros((), dtype=torch.bool, device=dev)
            per_case("oracle same", [i], same.to(torch.int64).view(1))
    counts = _flat(r.counts for r in refs).to(torch.int64)
    row_case = torch.repeat_interleave(
        torch.arange(n, device=dev), host_values([c.tokens for c in configs], dev), output_size=counts.numel()
    )
    per_case("most valid", list(range(n)),
             torch.zeros(n, dtype=torch.int64, device=dev).scatter_reduce_(0, row_case, counts, "amax", include_self=False))

    # One flag for the whole batch: a write anywhere sends every case to compare's
    # per-case search, which names the implementation, tensor and element.
    if private:
        per_case("inputs changed", [0], torch.stack([p.any_changed() for p in private]).any().to(torch.int64).view(1))
    host = torch.cat([values for _, _, values in parts]).tolist()  # the one sync
    got: dict = {}
    at = 0
    for name, cases, _ in parts:
        got.setdefault(name, {}).update(zip(cases, host[at : at + len(cases)]))
        at += len(cases)
    proofs = []
    for i in range(n):
        # An output that is not comparable is neither equal nor counts_ok.
        equal = [got.get(f"{s} lanes off", {}).get(i) == 0 for s in "ab"]
        counts_ok = [i in comparable[k] and got.get(f"{s} counts off", {}).get(i, 0) == 0 for k, s in enumerate("ab")]
        proofs.append(_Proof(
            passes=[e and c for e, c in zip(equal, counts_ok)],
            equal=equal,
            counts_ok=counts_ok,
            oracle_ok=bool(got.get("oracle same", {}).get(i, 1)) and not (oracles[i] is not None and oracles[i].findings),
            inputs_unchanged=bool(private) and got["inputs changed"][0] == 0,
            rows_ordered_differently=got.get("rows ordered differently", {}).get(i, 0),
            most_valid=got["most valid"][i],
        ))
    return proofs


def _witness_round(configs: list, outs: list, refs: list, proofs: list) -> None:
    """Pass every output that differs from the reference but that a tile-order witness
    proves passing: outputs with the same width and tile are stacked row on row, one
    ``rows_witnessed`` per group (one more sync, only when there are any)."""
    groups: dict = {}
    for i, (c, p) in enumerate(zip(configs, proofs)):
        for side in (0, 1):
            o = outs[i][2 * side]
            if p.counts_ok[side] and not p.equal[side] and c.compacts and not o.contract.ordered:
                groups.setdefault((c.topk, o.contract.segment), []).append((i, side))
    if not groups:
        return
    pieces, order = [], []
    for (_, segment), members in groups.items():
        stacked = Reference(
            lanes=torch.cat([refs[i].lanes for i, _ in members]),
            valid=torch.cat([refs[i].valid for i, _ in members]),
            out=torch.cat([refs[i].out for i, _ in members]),
            counts=torch.cat([refs[i].counts for i, _ in members]),
        )
        witnessed = rows_witnessed(torch.cat([outs[i][2 * side].out for i, side in members]), stacked, segment)
        dev = witnessed.device
        pieces.append(_segment_sums(~witnessed, [configs[i].tokens for i, _ in members], dev))
        order += members
    for (i, side), unwitnessed_rows in zip(order, torch.cat(pieces).tolist()):
        proofs[i].passes[side] = unwitnessed_rows == 0


_API_PATHS_CHECKED: set = set()  # wrapper paths whose oracle API this process has checked


def _path(c: CaseConfig) -> tuple:
    """The oracle wrapper path a case takes: the plain convert (with or without the
    prefill workspace), the DCP wrapper's delegation at dcp_size 1, and its filter with
    or without compaction; each with or without counts, with or without the stride and
    caller-owned buffers (their own wrapper code: features.py)."""
    return (c.mode, c.is_dcp, c.compacts, c.has_prefill, c.counts_returned, bool(c.block_stride), c.out_buffers)


def _paths_sampled(configs: list) -> list[int]:
    """Indices of the first case of each wrapper path among ``configs`` that this
    process has not checked the oracle's API on yet (and marks them checked)."""
    first: dict[tuple, int] = {}
    for i, c in enumerate(configs):
        if _path(c) not in _API_PATHS_CHECKED:
            first.setdefault(_path(c), i)
    _API_PATHS_CHECKED.update(first)
    return sorted(first.values())


def forget_checked_paths() -> None:
    """Check the oracle's API (and run the production checks) again on the next case of
    every path (tests)."""
    _API_PATHS_CHECKED.clear()
    _PRODUCTION_CHECKED.clear()
    _LARGEST_CHECKED.clear()


# Keys the graph and stream checks ran on: (wrapper path, launch shape) and (wrapper
# path, batch-size bucket)
_PRODUCTION_CHECKED: set = set()
# wrapper path -> the most token rows those checks ran on
_LARGEST_CHECKED: dict = {}


def _production_keys(c: CaseConfig) -> tuple:
    """What a case stands for in the sampling: its wrapper path's launch shape (one tile
    of K == BLOCK_N, a power-of-two K, tiled) and its batch-size bucket."""
    return ((_path(c), c.topk == c.block_n, c.topk_is_pow2), (_path(c), "tokens", size_bucket(c.tokens)))


def _production_sampled(configs: list) -> list[int]:
    """Indices of the cases the graph and stream checks run on (the sync check runs on
    every call): a case of each wrapper path's launch shapes and batch-size buckets
    this process has not checked yet (where one case stands for a new shape and a new
    bucket at once, that one), and the case with the most token rows of each path
    whenever it has more than every case of that path checked so far, so the largest
    batch of a run is always checked. Each costs a graph
    capture and a queued sleep per call; what they check (streams, what a capture bakes
    in) is the wrapper's host code and launch, which the path, the launch shape and the
    batch size select (a wrapper that behaves otherwise above some batch size, say a
    debug read-back, shows in the bucket past it)."""
    largest: dict[tuple, int] = {}
    for i, c in enumerate(configs):
        path, best = _path(c), largest.get(_path(c))
        if c.tokens > _LARGEST_CHECKED.get(path, 0) and (best is None or c.tokens > configs[best].tokens):
            largest[path] = i
    chosen = set(largest.values())
    covered = set(_PRODUCTION_CHECKED).union(*(_production_keys(configs[i]) for i in chosen))
    # Fewest cases: first those that stand for a new shape and a new bucket at once.
    for both in (True, False):
        for i, c in enumerate(configs):
            new = [k for k in _production_keys(c) if k not in covered]
            if len(new) == 2 or (new and not both):
                chosen.add(i)
                covered.update(new)
    _PRODUCTION_CHECKED.update(covered)
    for path, i in largest.items():
        _LARGEST_CHECKED[path] = configs[i].tokens
    return sorted(chosen)
