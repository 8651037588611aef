"""Timing inside CUDA graphs (and eager loops beside them, for a call no graph can hold),
the launch floor, and the time budget of a bench run.

Why a hand-written graph loop rather than ``triton.testing.do_bench_cudagraph``:
that helper times one callable at a time and hands back only a number. Here every
variant of a cell (old at several tile widths, new, and an empty kernel on each of
their grids) is captured first and their replays are *interleaved* repeat by repeat,
so clock and thermal drift hit every variant alike and the floor is measured under the
same conditions as the kernel it is subtracted from; and each graph keeps its last
call's result, so the outputs the timed graph actually wrote can be judged against
the oracle afterwards (no timing of a kernel that is wrong).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Optional, TypeVar

import torch


@dataclass
class Timing:
    samples: list = field(default_factory=list)  # µs per call, one per repeat

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def spread(self) -> float:
        """(max - min) / median across repeats, as a fraction."""
        return (max(self.samples) - min(self.samples)) / self.median if self.samples else float("nan")


class Budget:
    """A wall-clock allowance for a whole bench run. ``None`` seconds: unlimited.

    Sections and cells ask ``allows(estimate)`` before starting work they cannot
    interrupt; what was measured before the allowance ran out is kept."""

    def __init__(self, seconds: Optional[float], clock: Callable[[], float] = time.monotonic, reserve_s: float = 0.0):
        self.seconds = seconds
        self.clock = clock
        self.start = clock()
        # Kept back for what must follow the last measurement (writing the page).
        self.reserve_s = reserve_s

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        """Seconds left for measuring (the reserve excluded)."""
        return float("inf") if self.seconds is None else self.seconds - self.reserve_s - self.elapsed()

    def allows(self, estimate_s: float = 0.0) -> bool:
        return self.left() > estimate_s

    @property
    def exhausted(self) -> bool:
        return self.left() <= 0


def capture(fn: Callable[[], object], calls: int, warmup: int = 3):
    """A CUDA graph of ``calls`` calls of ``fn``; returns (graph, last call's result).
    Warm-up (compilation, allocator growth) runs on a side stream first, as capture
    requires."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = None
        for _ in range(calls):
            result = fn()  # earlier results are freed and their memory reused in the pool
    torch.cuda.synchronize()
    return graph, result


def replay_us(graph, calls: int) -> float:
    """µs per call of one timed replay."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


GraphKey = TypeVar("GraphKey", bound=Hashable)


def time_graphs(graphs: Mapping[GraphKey, tuple], repeats: int) -> dict[GraphKey, Timing]:
    """``graphs``: name -> (graph, calls). One untimed replay each (first-replay upload
    costs), then ``repeats`` rounds, each replaying every graph once, interleaved."""
    for graph, _ in graphs.values():
        graph.replay()
    torch.cuda.synchronize()
    times = {name: Timing() for name in graphs}
    for _ in range(repeats):
        for name, (graph, calls) in graphs.items():
            times[name].samples.append(replay_us(graph, calls))
    return times


class EagerLoop:
    """``calls`` eager calls of ``fn`` behind a graph's ``replay()``, so ``time_graphs``
    times a call no CUDA graph can hold (one that synchronises with the host) beside the
    graphs, interleaved the same way; ``last`` is the last call's result."""

    def __init__(self, fn: Callable[[], object], calls: int):
        self.fn, self.calls = fn, calls
        self.last: object = None

    def replay(self) -> None:
        for _ in range(self.calls):
            self.last = self.fn()


_empty_kernel = None


def empty_kernel():
    """A Triton kernel that does nothing: its graph replay is pure launch cost."""
    global _empty_kernel
    if _empty_kernel is None:
        import triton

        @triton.jit
        def _empty(ptr):
            # No loads, no stores: a launch of this grid and nothing else. The pointer
            # argument only mirrors a real kernel's argument passing.
            pass

        _empty_kernel = _empty
    return _empty_kernel


def floor_fn(grid: tuple, warps: int) -> Callable[[], None]:
    """A callable launching the empty kernel with ``grid`` and ``warps``."""
    kernel = empty_kernel()
    dummy = torch.empty(1, dtype=torch.int32, device="cuda")
    return lambda: kernel[grid](dummy, num_warps=warps)
