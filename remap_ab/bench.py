"""The A/B benchmark: old vs new, each timed inside a CUDA graph.

A graph holds ``calls`` back-to-back calls of an implementation's public wrapper
(its allocations, memsets and the Triton launch: what vLLM's decode graph replays);
one replay is timed with CUDA events and divided by ``calls``; ``repeats`` replays give
the median and the spread. Beside each implementation the *floor* is timed the same
way: an empty Triton kernel launched with that implementation's grid and warps, so
launch cost can be told apart from work and atomic contention.

Nothing is timed that is wrong: before timing, both implementations run eagerly on
the very input tensors the graphs will use and are judged against the oracle
(``agreement_gate``); a disagreeing pair is refused. After timing, the outputs the
graphs' last calls wrote are judged again.

Bandwidth counts the bytes a call must move at least, the same for old and new:
token_indices, req_id and the block table read once, out and the counts written once
(the old kernel's counts memset and compaction's -1 prefill are extra work, not
counted). The inputs stay in L2 across a graph's calls (as in the pull request's
benchmark, presumably), so an "achieved bandwidth" near or above the HBM peak means L2
hits, not a faster HBM.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from remap_ab import registry
from remap_ab.compare import Output, Verdict, compare
from remap_ab.config import CaseConfig
from remap_ab.errors import DisagreementError, NeedsGPUError
from remap_ab.inputs import CaseInputs
from remap_ab.runner import reference, run_implementation

# vLLM #50365's published GB200 figures, counts path, µs per call: (K, tokens) -> (old, new).
PR_GB200_US = {
    (512, 1): (2.50, 1.67),
    (512, 256): (4.06, 1.84),
    (512, 1024): (5.50, 2.54),
    (2048, 1): (3.02, 1.83),
    (2048, 256): (5.65, 2.20),
    (2048, 1024): (12.22, 3.84),
}
H200_HBM_PEAK_BYTES_PER_S = 4.8e12  # datasheet figure
PATHS = ("counts", "dcp")


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise NeedsGPUError("bench times kernels inside CUDA graphs and needs a CUDA device; torch sees none (run it on the GPU machine)")


def bench_cases(topks: Sequence[int], tokens: Sequence[int], paths: Sequence[str] = PATHS, seed: int = 0) -> list[CaseConfig]:
    """The pull request's grid: the counts path (plain convert, return_valid_counts)
    and the DCP 4 compaction path, for every K x tokens."""
    cases = []
    for path in paths:
        for k in topks:
            for t in tokens:
                if path == "counts":
                    cases.append(CaseConfig(mode="convert", topk=k, tokens=t, counts=True, seed=seed))
                elif path == "dcp":
                    cases.append(CaseConfig(mode="dcp", topk=k, tokens=t, dcp_size=4, dcp_rank=0, compact=True,
                                            counts=True, seed=seed))
                else:
                    from remap_ab.errors import ConfigError

                    raise ConfigError(f"path {path!r} is not one of {', '.join(PATHS)}")
    return cases


def path_of(config: CaseConfig) -> str:
    return "dcp" if config.compacts else "counts"


def agreement_gate(config: CaseConfig, inputs: CaseInputs, a: registry.Implementation, b: registry.Implementation) -> Verdict:
    """Run ``a`` and ``b`` on exactly these inputs and judge both against the oracle;
    raise DisagreementError (refusing the timing) unless the verdict passes. An
    allowed difference — the compacted order of a tiled kernel — passes."""
    out_a = run_implementation(a, config, inputs)
    out_b = run_implementation(b, config, inputs)
    verdict = judge_on_cpu(config, inputs, out_a, out_b)
    if not verdict.passed:
        raise DisagreementError(
            f"refusing to time {a.name} vs {b.name} on case {config.case_id} ({config.cli_args()}): "
            f"{verdict.first.line() if verdict.first else verdict.status}"
        )
    return verdict


def _on_cpu(o: Output) -> Output:
    move = lambda t: None if t is None else t.detach().to("cpu")  # noqa: E731
    return Output(o.name, move(o.out), move(o.counts), o.contract, error=o.error, seconds=o.seconds)


def judge_on_cpu(config: CaseConfig, inputs: CaseInputs, a: Output, b: Output) -> Verdict:
    """compare() on host copies: its tiled-order check walks rows in Python, which
    would otherwise cost a device round trip per row."""
    ref = reference(config, inputs.to("cpu"))
    return compare(config.case_id, _on_cpu(a), _on_cpu(b), ref, compacted=config.compacts,
                   counts_returned=config.counts_returned)


def launch_shape(impl: registry.Implementation, config: CaseConfig) -> tuple[tuple[int, int], int]:
    """(grid, num_warps) the implementation launches for ``config`` (SPEC §6)."""
    _, _, tiles, warps = impl.tiling(config)
    return (config.tokens, tiles), warps


def bytes_moved(config: CaseConfig) -> int:
    """The minimum bytes one call must read and write (module doc), old and new alike:
    every input once (the block table is tiny and cached, so it counts once, not per
    lane) and every output once."""
    lanes = config.tokens * config.topk
    read = 4 * (lanes + config.tokens + config.num_reqs * config.blocks_per_req)
    written = 4 * (lanes + (config.tokens if config.counts_computed else 0))
    return read + written


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


@dataclass
class Timing:
    samples: list = field(default_factory=list)  # µs per call, one per repeat

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """(max - min) / median across repeats, as a fraction."""
        return (max(self.samples) - min(self.samples)) / self.median if self.samples else float("nan")


@dataclass
class Cell:
    config: CaseConfig
    a: str
    b: str
    status: str = "timed"  # "timed" | "refused"
    why: str = ""
    times: dict = field(default_factory=dict)  # "a", "b", "floor_a", "floor_b" -> Timing
    grids: dict = field(default_factory=dict)  # "a", "b" -> (grid, warps)
    bytes: int = 0
    verified_in_graph: Optional[bool] = None

    def row(self) -> dict:
        c = self.config
        row = {"path": path_of(c), "topk": c.topk, "tokens": c.tokens, "a": self.a, "b": self.b, "status": self.status}
        for key in ("a", "b", "floor_a", "floor_b"):
            t = self.times.get(key)
            row[f"{key}_us"] = t.median if t else float("nan")
            row[f"{key}_min_us"] = min(t.samples) if t else float("nan")
            row[f"{key}_max_us"] = max(t.samples) if t else float("nan")
            row[f"{key}_spread"] = t.spread if t else float("nan")
        row["speedup"] = row["a_us"] / row["b_us"] if self.times else float("nan")
        # What is left once the launch of the same grid is paid: work plus contention.
        row["a_above_floor_us"] = row["a_us"] - row["floor_a_us"]
        row["b_above_floor_us"] = row["b_us"] - row["floor_b_us"]
        for key in ("a", "b"):
            grid, warps = self.grids.get(key, ((0, 0), 0))
            row[f"{key}_grid"] = f"{grid[0]}x{grid[1]}"
            row[f"{key}_warps"] = warps
        row["bytes"] = self.bytes
        for key in ("a", "b"):
            us = row[f"{key}_us"]
            row[f"{key}_GBps"] = self.bytes / (us * 1e-6) / 1e9 if self.times else float("nan")
            row[f"{key}_peak_frac"] = row[f"{key}_GBps"] * 1e9 / H200_HBM_PEAK_BYTES_PER_S
        pr = PR_GB200_US.get((c.topk, c.tokens)) if path_of(c) == "counts" else None
        row["pr_gb200_old_us"], row["pr_gb200_new_us"] = pr if pr else (float("nan"), float("nan"))
        row["verified_in_graph"] = self.verified_in_graph
        row["why"] = self.why
        row["case_id"] = c.case_id
        return row


def bench_cell(
    config: CaseConfig,
    a: registry.Implementation,
    b: registry.Implementation,
    *,
    calls: int,
    repeats: int,
) -> Cell:
    """Gate, capture, time (repeats interleaved so drift hits every variant alike),
    then check the graphs' own outputs."""
    from remap_ab.inputs import generate_inputs

    cell = Cell(config, a.name, b.name)
    inputs = generate_inputs(config, device="cuda")
    try:
        agreement_gate(config, inputs, a, b)
    except DisagreementError as exc:
        cell.status, cell.why = "refused", str(exc)
        return cell

    cell.bytes = bytes_moved(config)
    kernel = empty_kernel()
    dummy = torch.empty(1, dtype=torch.int32, device="cuda")
    graphs, results = {}, {}
    for key, impl in (("a", a), ("b", b)):
        grid, warps = launch_shape(impl, config)
        cell.grids[key] = (grid, warps)
        graphs[key], results[key] = capture(lambda impl=impl: impl(config, inputs), calls)
        graphs[f"floor_{key}"], _ = capture(
            lambda grid=grid, warps=warps: kernel[grid](dummy, num_warps=warps), calls
        )
    for key in graphs:
        graphs[key].replay()  # one untimed replay each: first-replay upload costs
    torch.cuda.synchronize()
    cell.times = {key: Timing() for key in graphs}
    for _ in range(repeats):
        for key, graph in graphs.items():
            cell.times[key].samples.append(replay_us(graph, calls))

    outs = {}
    for key, impl in (("a", a), ("b", b)):
        out, counts = results[key]
        outs[key] = Output(impl.name, out, counts, impl.order_contract(config))
    verdict = judge_on_cpu(config, inputs, outs["a"], outs["b"])
    cell.verified_in_graph = verdict.passed
    if not verdict.passed:
        cell.why = f"graph outputs fail the oracle after timing: {verdict.first.line()}"
    return cell


def run_bench(
    configs: Sequence[CaseConfig],
    a: str = "old",
    b: str = "new",
    *,
    calls: int = 200,
    repeats: int = 20,
    progress: Optional[Callable[[Cell], None]] = None,
) -> list[Cell]:
    require_cuda()
    impl_a, impl_b = registry.get(a), registry.get(b)
    cells = []
    for config in configs:
        cell = bench_cell(config, impl_a, impl_b, calls=calls, repeats=repeats)
        cells.append(cell)
        if progress:
            progress(cell)
    return cells


def table(cells: Sequence[Cell]):
    import pandas as pd

    return pd.DataFrame([c.row() for c in cells])


def printable(cells: Sequence[Cell]):
    """The human table: measured old/new beside the PR's GB200 figures and the floors."""
    import pandas as pd

    def us(row, key):
        v = row[f"{key}_us"]
        return "—" if v != v else f"{v:.2f} ±{100 * row[f'{key}_spread'] / 2:.0f}%"

    rows = []
    for c in cells:
        r = c.row()
        pr = "—" if r["pr_gb200_old_us"] != r["pr_gb200_old_us"] else f"{r['pr_gb200_old_us']:.2f}→{r['pr_gb200_new_us']:.2f} ({r['pr_gb200_old_us'] / r['pr_gb200_new_us']:.2f}x)"
        rows.append({
            "path": r["path"], "K": r["topk"], "T": r["tokens"],
            f"{c.a} µs": us(r, "a"), f"{c.b} µs": us(r, "b"),
            "speedup": "—" if r["speedup"] != r["speedup"] else f"{r['speedup']:.2f}x",
            "PR GB200": pr,
            f"floor {c.a}": "—" if not c.times else f"{r['floor_a_us']:.2f} ({r['a_grid']})",
            f"floor {c.b}": "—" if not c.times else f"{r['floor_b_us']:.2f} ({r['b_grid']})",
            "above floor": "—" if not c.times else f"{r['a_above_floor_us']:.2f} / {r['b_above_floor_us']:.2f}",
            f"{c.a} GB/s": "—" if not c.times else f"{r['a_GBps']:.0f} ({100 * r['a_peak_frac']:.0f}%)",
            f"{c.b} GB/s": "—" if not c.times else f"{r['b_GBps']:.0f} ({100 * r['b_peak_frac']:.0f}%)",
            "check": "REFUSED" if c.status == "refused" else ("ok" if c.verified_in_graph else "FAIL"),
        })
    return pd.DataFrame(rows)
