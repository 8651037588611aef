"""The batched interpreter gives byte-for-byte what the sequential one gives.

Every check runs the same launch both ways and compares bytes: outputs (including the
poison sentinel in lanes a kernel leaves unwritten), counts and error lines, for old,
new and every catalogued mutant, under every schedule policy. Hand-written kernels then
push on the edges: order-dependent atomics, a cross-program read-after-write, a branch
on a per-program value, an operation the batched mode does not model. Those must fall
back to the sequential interpreter, say so, and still agree.
"""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest
import torch
from conftest import importable_mutants

from remap_ab import runtime

if runtime.default_device() != "cpu":
    # On a GPU machine kernels are compiled, never interpreted, in this process; the
    # interpreter's batched mode has nothing to run against here.
    pytest.skip("CPU-only: the batched mode is the Triton interpreter's (a CUDA device is present)", allow_module_level=True)

runtime.select("cpu")  # before triton is imported: the imports below are E402 on purpose
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from remap_ab.interpreter import batched as ib  # noqa: E402
from remap_ab.interpreter.schedule import POLICIES, interpreter_schedule, program_order  # noqa: E402
from remap_ab.subjects.remap.case.config import CaseConfig  # noqa: E402
from remap_ab.subjects.remap.case.inputs import generate_inputs  # noqa: E402
from remap_ab.subjects.remap.judge import registry, runner  # noqa: E402
from remap_ab.subjects.remap.judge.call import PrivateInputs  # noqa: E402
from remap_ab.subjects.remap.parts import mutants  # noqa: E402


def _catalogue():
    # The remap's mutant catalogue (remap_ab/subjects/remap/parts/mutants/).
    return mutants.select()


def _run(impl, config, inputs, mode, policy, seed=7, private=None):
    # One private copy for both modes: a mutant that reads past a tensor must find the
    # same bytes there in each (a fresh copy per call would sit at another address).
    if private is not None:  # as given: a mutant that writes its inputs changed them last run
        for name, t in private.cases[0].tensors().items():
            t.copy_(getattr(inputs, name))
    with ib.using(mode):
        before = dict(ib.stats)
        out = runner.run_implementation(
            registry.get(impl), config, inputs, schedule=lambda: interpreter_schedule(policy, seed), private=private
        )
        ran = {k: ib.stats[k] - before[k] for k in ib.stats}
    return out, ran


def _same_bytes(a, b) -> bool:
    def raw(t):
        return None if t is None else (t.dtype, tuple(t.shape), t.contiguous().view(torch.uint8).numpy().tobytes())

    return a.error == b.error and raw(a.out) == raw(b.out) and raw(a.counts) == raw(b.counts)


def _assert_modes_agree(impl, config, policies=POLICIES, expect_batched=True):
    inputs = generate_inputs(config)
    private = PrivateInputs([inputs])
    for policy in policies:
        seq, seq_ran = _run(impl, config, inputs, "sequential", policy, private=private)
        bat, bat_ran = _run(impl, config, inputs, "batched", policy, private=private)
        assert seq_ran["batched"] == 0
        assert _same_bytes(seq, bat), f"{impl} {config.case_id} {policy}: batched differs from sequential"
        if expect_batched:
            assert bat_ran["batched"] >= 1 and bat_ran["fallback"] == 0, (impl, policy, ib.fallbacks[-3:])


# Every wrapper path and both tilings of the new kernel (K=384: tiled; 512: single tile
# when counting), DCP 2 and 4 with interleave, prefill rows, out-of-range lanes, and
# negative ids of every kind; 2-3 tokens keep the sequential side cheap.
_CASES = [
    dict(mode="convert", tokens=3, topk=512, counts=False),
    dict(mode="convert", tokens=2, topk=384, counts=True, prefill_fraction=0.5, negatives="any", out_of_range=0.1),
    dict(mode="convert", tokens=3, topk=512, counts=True, prefill_fraction=0.5, table="huge"),
    dict(mode="dcp", tokens=3, topk=384, dcp_size=4, dcp_rank=1, compact=True, counts=True, invalid_ratio=0.7),
    dict(mode="dcp", tokens=2, topk=512, dcp_size=2, dcp_rank=1, interleave=64, compact=True, counts=False),
    dict(mode="dcp", tokens=3, topk=384, dcp_size=4, dcp_rank=3, compact=False, counts=True, out_of_range=0.1),
    dict(mode="dcp", tokens=2, topk=512, dcp_size=1, dcp_rank=0, compact=True, counts=True, row_layout="mixed"),
]


@pytest.mark.parametrize("impl", ["old", "new"])
@pytest.mark.parametrize("fields", _CASES, ids=lambda f: f"{f['mode']}-k{f['topk']}-t{f['tokens']}")
def test_old_and_new_agree_under_every_schedule(impl, fields):
    _assert_modes_agree(impl, CaseConfig(**fields))


@pytest.fixture(scope="module")
def mutant_packages(tmp_path_factory):
    with importable_mutants(tmp_path_factory.mktemp("mutants"), _catalogue()) as packages:
        yield {m.id: (m, packages[m.id]) for m in _catalogue()}


# Observables of a mutant whose edit changes what the wrapper does around its launches, not
# what a program computes (with needs_gpu: "on the CPU every output is the same").
HOST_SIDE = ("call", "speed")


@pytest.mark.parametrize("mutant_id", [m.id for m in _catalogue()] if runtime.default_device() == "cpu" else [])
def test_every_mutant_agrees_on_its_witness(mutant_packages, mutant_id):
    mutant, package = mutant_packages[mutant_id]
    # The witness is where the mutant misbehaves (a wrong slot, an unwritten lane read
    # as poison, a count never stored): the modes must agree exactly there.
    policies: tuple = ("row_major", "tiles_reversed", "random")
    if mutant.needs_gpu and mutant.observable in HOST_SIDE:
        # The edit is the wrapper's (a read-back, a stream, a launch loop); the kernel is the
        # target's own, which test_old_and_new_agree_under_every_schedule runs under every policy.
        # One schedule judges the modes at the witness: the random one (neither grid order).
        policies = ("random",)
    _assert_modes_agree(package, mutant.witness_config(), policies=policies, expect_batched=False)


def test_runs_batched_and_is_faster():
    # Not a benchmark: 3 tokens x 16 tiles are 48 programs, ~80 ms sequentially; one
    # batched pass is several times quicker even on a loaded machine.
    import time

    config = CaseConfig(mode="dcp", tokens=3, topk=2048, dcp_size=4, compact=True, counts=True)
    inputs = generate_inputs(config)
    times = {}
    for mode in ("sequential", "batched", "sequential", "batched"):  # the best of two: the first of each warms up
        start = time.perf_counter()
        _, ran = _run("old", config, inputs, mode, "row_major")
        times[mode] = min(times.get(mode, 1e9), time.perf_counter() - start)
        assert ran[mode] == 1
    assert times["batched"] * 2 < times["sequential"], times


# ------------------------------------------------------------------ hand-written kernels


@triton.jit
def _ticket_kernel(counter_ptr, tickets_ptr, N: tl.constexpr):
    # Every program takes one ticket per lane from a shared counter; the tickets it got
    # depend on the order the programs ran in.
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    lanes = tl.arange(0, N)
    got = tl.atomic_add(counter_ptr + lanes % 2, lanes + 1)
    tl.store(tickets_ptr + pid * N + lanes, got)


def _tickets(mode, policy, grid=(3, 4)):
    counter = torch.zeros(2, dtype=torch.int32)
    tickets = torch.full((grid[0] * grid[1], 4), -7, dtype=torch.int32)
    with ib.using(mode), interpreter_schedule(policy, seed=11):
        _ticket_kernel[grid](counter, tickets, N=4)
    return counter, tickets


@pytest.mark.parametrize("policy", POLICIES)
def test_atomic_old_values_follow_the_schedule(policy):
    counter, tickets = _tickets("batched", policy)
    assert torch.equal(counter, torch.tensor([12 * 4, 12 * 6], dtype=torch.int32))
    # Exclusive prefix sums of each address's adds, in schedule order.
    expect = torch.empty_like(tickets)
    running = [0, 0]
    for x, y, _ in program_order(policy, (3, 4, 1), 11):
        for lane in range(4):
            expect[x * 4 + y, lane] = running[lane % 2]
            running[lane % 2] += lane + 1
    assert torch.equal(tickets, expect)
    seq_counter, seq_tickets = _tickets("sequential", policy)
    assert torch.equal(seq_tickets, tickets) and torch.equal(seq_counter, counter)


@triton.jit
def _chain_kernel(buf_ptr):
    # Program i reads what program i - 1 wrote: only one-at-a-time order gives a prefix.
    pid = tl.program_id(0)
    prev = tl.load(buf_ptr + pid)
    tl.store(buf_ptr + pid + 1, prev + 1)


@triton.jit
def _branch_kernel(x_ptr, out_ptr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    if v > 0:  # a Python branch on a loaded, per-program value
        tl.store(out_ptr + pid, v * 2)
    else:
        tl.store(out_ptr + pid, v - 100)


@triton.jit
def _dot_kernel(a_ptr, out_ptr):
    pid = tl.program_id(0)
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + pid * 256 + r[:, None] * 16 + r[None, :])
    tl.store(out_ptr + pid * 256 + r[:, None] * 16 + r[None, :], tl.dot(a, a))


def _launch_both(kernel, grid, make_args, policy="row_major"):
    results = {}
    for mode in ("sequential", "batched"):
        args = make_args()
        before = dict(ib.stats)
        with ib.using(mode), interpreter_schedule(policy), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kernel[grid](*args)
        ran = {k: ib.stats[k] - before[k] for k in ib.stats}
        fallback_warnings = [w for w in caught if issubclass(w.category, ib.BatchedFallbackWarning)]
        results[mode] = ([a.clone() for a in args if isinstance(a, torch.Tensor)], ran, fallback_warnings)
    return results


@pytest.mark.parametrize(
    "kernel, make_args, why",
    [
        (_chain_kernel, lambda: [torch.zeros(9, dtype=torch.int32)], "cross-program hazard"),
        (
            _branch_kernel,
            lambda: [torch.tensor([3, -1, 0, 5, -2, 7, 1, -9], dtype=torch.int32), torch.zeros(8, dtype=torch.int32)],
            "differs between programs",
        ),
        (_dot_kernel, lambda: [torch.arange(8 * 256, dtype=torch.float32).reshape(8, 256) % 7, torch.zeros(8, 256)], "create_dot"),
    ],
    ids=["raw-hazard", "per-program-branch", "unmodelled-op"],
)
def test_what_batched_cannot_do_falls_back_and_says_so(kernel, make_args, why):
    ib._warned.clear()
    # row_major: the chain's reads follow its writes (reversed, every program would
    # read before its predecessor wrote, which the batched mode reproduces exactly).
    results = _launch_both(kernel, (8,), make_args)
    (seq_args, _, _), (bat_args, ran, caught) = results["sequential"], results["batched"]
    assert all(torch.equal(a, b) for a, b in zip(seq_args, bat_args))
    assert ran["fallback"] == 1 and ran["batched"] == 0
    assert len(caught) == 1 and why in str(caught[0].message)


def test_chain_is_exact_where_no_order_conflicts():
    # Reversed, each program reads before its predecessor writes: all-at-once is exact
    # and the conflict check, being precise, lets the batched run stand.
    ib._warned.clear()
    results = _launch_both(_chain_kernel, (8,), lambda: [torch.zeros(9, dtype=torch.int32)], "reversed")
    (seq_args, _, _), (bat_args, ran, caught) = results["sequential"], results["batched"]
    assert seq_args[0].tolist() == [0] + [1] * 8 and torch.equal(seq_args[0], bat_args[0])
    assert ran["batched"] == 1 and not caught
    # Row-major, one at a time builds a prefix; all at once could not.
    (seq_args, _, _) = _launch_both(_chain_kernel, (8,), lambda: [torch.zeros(9, dtype=torch.int32)])["sequential"]
    assert seq_args[0].tolist() == list(range(9))


def test_fallback_warns_once_per_kernel():
    ib._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with ib.using("batched"):
                _chain_kernel[(4,)](torch.zeros(5, dtype=torch.int32))
    assert sum(issubclass(w.category, ib.BatchedFallbackWarning) for w in caught) == 1


def test_memcheck_sees_every_batched_access(monkeypatch):
    seen = []

    class Session:
        def access(self, kind, addresses, mask, programs, itemsize=1):
            assert itemsize == 4
            assert addresses.dtype == np.int64 and mask.dtype == bool and mask.shape == addresses.shape
            assert programs.shape == addresses.shape + (3,)
            seen.append((kind, addresses[mask], programs[mask]))

    fake = types.SimpleNamespace(active=lambda: Session())
    monkeypatch.setitem(sys.modules, "remap_ab.sanitizer.memcheck", fake)
    counter = torch.zeros(2, dtype=torch.int32)
    tickets = torch.zeros((12, 4), dtype=torch.int32)
    with ib.using("batched"):
        _ticket_kernel[(3, 4)](counter, tickets, N=4)
    kinds = [k for k, _, _ in seen]
    assert kinds == ["atomic", "store"]
    _, addresses, programs = seen[1]
    # Every lane of every program, at the address that program stored to.
    assert sorted(addresses.tolist()) == [tickets.data_ptr() + 4 * i for i in range(48)]
    for addr, (x, y, z) in zip(addresses.tolist(), programs.tolist()):
        assert (addr - tickets.data_ptr()) // 16 == x * 4 + y and z == 0


def test_mode_switch(monkeypatch):
    monkeypatch.setenv(ib.ENV, "sequential")
    assert ib.mode() == "sequential"
    with ib.using("batched"):
        assert ib.mode() == "batched"
    monkeypatch.setenv(ib.ENV, "fast")
    from remap_ab.errors import UsageError

    with pytest.raises(UsageError, match="REMAP_AB_INTERPRETER"):
        ib.mode()
    monkeypatch.delenv(ib.ENV)
    assert ib.mode() == "batched"


def test_unknown_set_grid_idx_patch_falls_back():
    # Someone else reordering programs: the batched mode cannot know their order.
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    order = list(reversed(program_order("row_major", (6, 1, 1))))
    calls = iter(range(10**6))

    def set_grid_idx(x, y, z):
        type(builder).set_grid_idx(builder, *order[next(calls) % 6])

    ib._warned.clear()
    results = {}
    for mode in ("sequential", "batched"):
        buf = torch.zeros(7, dtype=torch.int32)
        builder.set_grid_idx = set_grid_idx
        try:
            with ib.using(mode):
                _chain_kernel[(6,)](buf)
        finally:
            del builder.set_grid_idx
        results[mode] = buf
    assert torch.equal(results["sequential"], results["batched"])


@triton.jit
def _over_read_kernel(x_ptr, y_ptr, N: tl.constexpr):
    # The last program reads one element past x: memcheck's finding.
    pid = tl.program_id(0)
    r = tl.arange(0, N)
    tl.store(y_ptr + pid * N + r, tl.load(x_ptr + pid * N + r + 1))


def test_memcheck_findings_are_the_sequential_ones():
    memcheck = pytest.importorskip("remap_ab.sanitizer.memcheck", reason="remap_ab.sanitizer.memcheck is not in this checkout yet")
    reports = {}
    for mode in ("sequential", "batched"):
        x, y = torch.arange(32, dtype=torch.int32), torch.zeros(32, dtype=torch.int32)
        with ib.using(mode), memcheck.watching({"x": x, "y": y}, "k") as session, warnings.catch_warnings():
            warnings.simplefilter("ignore", ib.BatchedFallbackWarning)
            _over_read_kernel[(4,)](x, y, N=8)
        r = session.report
        findings = [f.describe().split(" at address")[0] for f in r.findings]
        reports[mode] = (r.launches, r.elements_checked, r.bad_elements, sorted(r.bad_rows), findings)
    assert reports["batched"] == reports["sequential"]
    assert reports["sequential"][2] == 1  # the check saw the over-read
    # A clean launch stays batched and checks as many lanes.
    config = CaseConfig(mode="dcp", tokens=2, topk=512, dcp_size=2, compact=True, counts=True)
    inputs = generate_inputs(config)
    checked = {}
    for mode in ("sequential", "batched"):
        before = dict(ib.stats)
        with ib.using(mode), memcheck.watching(inputs.tensors(), "old") as session:
            registry.get("old")(config, inputs)
        checked[mode] = (session.report.elements_checked, session.report.bad_elements, ib.stats["batched"] - before["batched"])
    assert checked["sequential"][:2] == checked["batched"][:2] and checked["batched"][2] == 1


@triton.jit
def _sum_then_branch_kernel(x_ptr, out_ptr, N: tl.constexpr):
    # tl.sum is itself a jitted helper: calling it re-patches triton.language in the
    # interpreter, which must not undo the batched mode's per-program branch guard.
    pid = tl.program_id(0)
    total = tl.sum(tl.load(x_ptr + pid * N + tl.arange(0, N)), axis=0)
    if total > 10:
        tl.store(out_ptr + pid, total)
    else:
        tl.store(out_ptr + pid, -total)


def test_branch_after_a_jitted_helper_still_falls_back():
    ib._warned.clear()

    def make_args():
        return [torch.arange(32, dtype=torch.int32) % 7, torch.zeros(8, dtype=torch.int32), 4]

    results = _launch_both(_sum_then_branch_kernel, (8,), make_args)
    (seq_args, _, _), (bat_args, ran, caught) = results["sequential"], results["batched"]
    assert torch.equal(seq_args[1], bat_args[1]) and (seq_args[1] > 0).any() and (seq_args[1] < 0).any()
    assert ran["fallback"] == 1 and "differs between programs" in str(caught[0].message)


@triton.jit
def _bitwise_reduce_kernel(x_ptr, or_ptr, xor_ptr):
    # One row of 16 int64 bit masks per program, folded by OR and XOR (a segment mask).
    pid = tl.program_id(0)
    r = tl.arange(0, 16)
    bits = tl.full((16,), 1, tl.int64) << tl.load(x_ptr + pid * 16 + r).to(tl.int64)
    tl.store(or_ptr + pid, tl.reduce_or(bits, 0))
    tl.store(xor_ptr + pid, tl.xor_sum(bits, 0))


def test_bitwise_reductions_run_batched_and_match_sequential():
    ib._warned.clear()
    shifts = torch.tensor([[(7 * p + 5 * i) % 64 for i in range(16)] for p in range(8)], dtype=torch.int32)
    results = _launch_both(_bitwise_reduce_kernel, (8,),
                           lambda: [shifts.clone(), torch.zeros(8, dtype=torch.int64), torch.zeros(8, dtype=torch.int64)])
    (seq_args, _, _), (bat_args, ran, caught) = results["sequential"], results["batched"]
    assert all(torch.equal(a, b) for a, b in zip(seq_args, bat_args))
    assert ran["batched"] == 1 and ran["fallback"] == 0 and not caught
    expect_or = [0] * 8
    for p in range(8):
        for s in shifts[p].tolist():
            expect_or[p] |= 1 << s
    assert [v & (2**64 - 1) for v in bat_args[1].tolist()] == expect_or
