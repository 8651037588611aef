"""§6 Sweep speed: where the full sweep's time goes, and the host cost of one call.

Two measurements:

- the sweep's phase split and wall time, in this process and as a fresh process
  (remap_ab/bench/host.py), and ``kernels_phase_breakdown``: the kernels phase
  decomposed case by case.
- ``host_overheads``: host µs per call, T = 1, K = 512, counts path, ``calls`` calls
  back to back with no synchronisation between them (the GPU keeps up with the host
  at this size, so this is the Python + launch cost the sweep's kernels phase pays
  per call): each implementation's public wrapper, the sweep's own per-case call
  (batch.py: the wrapper plus its timing events and order contract, poisoned memory
  on), a raw launch of the kernel with prepared arguments, and an empty kernel launch.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from remap_ab.bench.host import host_us_per_call, sync
from remap_ab.bench.timing import empty_kernel
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs, generate_inputs_batch
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.grid.selection import select
from remap_ab.subjects.remap.judge import batch, registry
from remap_ab.subjects.remap.judge import batch as batch_runner
from remap_ab.subjects.remap.judge.runner import poisoned_empty
from remap_ab.subjects.remap.parts.bench.width_scan import _kernel_arguments

HOST_TOKENS = 1
HOST_TOPK = 512


def host_callables(impl_names: Sequence[str], device: str) -> list[tuple]:
    """(implementation, what, callable, context) for every row of the host-overhead
    table; ``context`` is entered once around the whole measurement of that row (the
    sweep holds its poisoned-memory switch around the whole kernels phase, so it is
    not paid per call there either)."""
    from contextlib import nullcontext


    config = CaseConfig(mode="convert", topk=HOST_TOPK, tokens=HOST_TOKENS, counts=True)
    inputs = generate_inputs(config, device=device)
    # Callable[...]: each is called with no arguments, its parameters only bind loop variables.
    rows: list[tuple[str, str, Callable[..., object], Callable[[], contextlib.AbstractContextManager[Any]]]] = []
    for name in impl_names:
        impl = registry.get(name)
        m = impl.module
        rows.append((name, "public wrapper", lambda m=m: m.triton_convert_req_index_to_global_index(
            inputs.req_id, inputs.block_table, inputs.token_indices, BLOCK_SIZE=config.block_size,
            NUM_TOPK_TOKENS=config.topk, BLOCK_N=config.block_n, return_valid_counts=True), nullcontext))
        rows.append((name, "sweep per-case call (batch.py, poisoned memory on)", _sweep_call(impl, config, inputs),
                     poisoned_empty))
        kernel = getattr(m, "_convert_req_index_to_global_index_kernel", None)
        if kernel is not None and hasattr(kernel, "arg_names"):
            single, block_n, tiles, warps = impl.tiling(config)
            out = torch.empty_like(inputs.token_indices)
            counts = torch.zeros(config.tokens, dtype=torch.int32, device=device)
            args = _kernel_arguments(config, inputs, out, counts, block_n=block_n, single=single)
            names = list(kernel.arg_names)
            if all(n in args for n in names):
                bound = {n: args[n] for n in names}
                grid = (config.tokens, tiles)
                rows.append((name, "raw kernel launch (arguments prepared)",
                             lambda kernel=kernel, bound=bound, grid=grid, warps=warps: kernel[grid](**bound, num_warps=warps),
                             nullcontext))

    empty = empty_kernel()
    dummy = torch.empty(1, dtype=torch.int32, device=device)
    rows.append(("-", "empty kernel launch", lambda: empty[(1, 1)](dummy, num_warps=4), nullcontext))
    return rows


def _sweep_call(impl, config, inputs) -> Callable[[], object]:
    """The sweep's per-case call as batch.py makes it (timing events, order contract)."""

    clock = batch.CallClock(inputs.device)
    return lambda: batch.timed_call(impl, config, inputs, clock)


def host_overheads(impl_names: Sequence[str], device: str, calls: int = 2000, repeats: int = 3) -> list[dict]:
    rows = []
    for impl, what, fn, context in host_callables(impl_names, device):
        with context():
            samples = host_us_per_call(fn, calls, device, repeats=repeats)
        rows.append({
            "impl": impl, "call": what, "tokens": HOST_TOKENS, "topk": HOST_TOPK, "calls": calls,
            "host_us_per_call": statistics.median(samples), "min_us": min(samples), "max_us": max(samples),
        })
    return rows


def kernels_phase_breakdown(device: str, a: str = "old", b: str = "new", batch: int = 64,
                            filters: Sequence[str] = (), budget=None) -> list[dict]:
    """Where the sweep's kernels phase spends its time, case by case as batch.py runs
    it: every grid case's inputs are generated per batch (untimed), then A and B run
    on each case three ways, each timed over the whole grid with one sync per batch:

      plain         the public wrappers, nothing else;
      poisoned      the same inside poisoned_empty (every torch.empty is filled);
      sweep call    batch.py's per-case call (timing events, order contract), poisoned,
                    i.e. the kernels phase itself.

    For each: host seconds (until the last call of a batch returns) and total seconds
    (until the device has finished too). Compilation is paid in an untimed pass first."""

    g = gridmod.load(None)
    points = g.points()
    if filters:
        points = select(g, list(filters), None)
    configs = [p.config for p in points]
    impls = [registry.get(a), registry.get(b)]
    clock = batch_runner.CallClock(torch.device(device))
    ways = {
        "plain": (lambda impl, c, x: impl(c, x), None),
        "poisoned": (lambda impl, c, x: impl(c, x), poisoned_empty),
        "sweep call": (lambda impl, c, x: batch_runner.timed_call(impl, c, x, clock), poisoned_empty),
    }
    totals = {w: {"host_s": 0.0, "total_s": 0.0, "calls": 0} for w in ways}
    done = 0
    for start in range(0, len(configs), batch):
        if budget is not None and budget.exhausted:
            break
        chunk = configs[start : start + batch]
        inputs = generate_inputs_batch(chunk, device=device)
        with poisoned_empty():  # untimed: compiles what this batch needs
            for c, x in zip(chunk, inputs):
                for impl in impls:
                    impl(c, x)
        sync(device)
        for way, (fn, context) in ways.items():
            t0 = time.perf_counter()
            with (context() if context else contextlib.nullcontext()):
                for c, x in zip(chunk, inputs):
                    for impl in impls:
                        fn(impl, c, x)
                t1 = time.perf_counter()
                sync(device)
            t2 = time.perf_counter()
            totals[way]["host_s"] += t1 - t0
            totals[way]["total_s"] += t2 - t0
            totals[way]["calls"] += 2 * len(chunk)
        done += len(chunk)
    return [{"way": w, "cases": done, "calls": v["calls"], "host_s": v["host_s"], "total_s": v["total_s"],
             "host_us_per_call": v["host_s"] / v["calls"] * 1e6 if v["calls"] else float("nan"),
             "device_wait_s": v["total_s"] - v["host_s"]} for w, v in totals.items()]
