"""The remap's bench sections, run by remap_ab/bench/suite.py's ``Suite``: the pull
request's table, contention, decode, the width scan, determinism, resources, host and
sweep (``SECTIONS``, in the order they run), each filling its ``page.Section``.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from remap_ab.bench import charts, figures
from remap_ab.bench import host as sweep_timing
from remap_ab.bench import suite as sections
from remap_ab.bench.page import Chart, Section, Table
from remap_ab.errors import exception_line
from remap_ab.speed import judge_speed
from remap_ab.status import CellStatus, SectionStatus
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.parts.bench import (
    attention,
    contention,
    contention_control,
    cross_compile,
    decode,
    host,
    pr_table,
    resources,
    width_scan,
)
from remap_ab.subjects.remap.parts.bench.decode import DecodeModel

# In the order they run: the timing sections first (their compiled variants feed
# "resources"), the host and sweep measurements last (the sweep needs the most time).
SECTIONS = ("pr", "contention", "decode", "width", "determinism", "resources", "host", "sweep")
GPU_ONLY = frozenset({"pr", "contention", "decode", "width", "resources"})
RECORDED = frozenset({"pr", "contention", "decode", "width", "determinism"})  # compiled variants recorded meanwhile
TITLES = {
    "pr": "Old vs new: the pull request's table (warm and cold L2)",
    "contention": "1. Contention signature",
    "decode": "3. Decode-step cost",
    "width": "2b. Single-tile width scan",
    "determinism": "5. End-to-end determinism",
    "resources": "2. Resources of every compiled variant",
    "host": "6a. Host overhead per call",
    "sweep": "6b. Sweep phase split",
}
QUESTIONS = {
    "pr": "µs per call inside CUDA graphs, old vs new, beside the PR's GB200 figures; with --cold-l2 also with rotating "
          "input copies so every call misses L2.",
    "contention": "Does the gap between 16 and 4 column tiles grow with batch (the PR's signature of atomic contention)? "
                  "Each cell is split into the empty-kernel floor of its own grid and the rest; beside each tile count, "
                  "its control (the same kernel with the per-row atomic replaced by a write to the tile's own slot): "
                  "atomic − control is the contention cost.",
    "decode": "µs per decode step for the model configuration, from the measured µs per call, old and new; the PR's "
              "GB200 figures beside.",
    "width": "Where do registers spill as one program takes a wider row, and where does one program per row stop beating "
             "the tiled path?",
    "determinism": "A sparse-attention consumer of the compacted indices, run repeatedly: distinct outputs (bitwise) and "
                   "the largest |Δ| between runs.",
    "resources": "Registers (NVIDIA) or VGPRs/SGPRs (AMD), spills, scratch, shared memory and occupancy of every variant "
                 "the wrappers of A and B launch, cross-compiled for each target (remap-ab resources); on a GPU also "
                 "every variant compiled during this run, as loaded (SM90 occupancy).",
    "host": "Host µs per call (T=1, K=512, counts path, no synchronisation between calls).",
    "sweep": "The full sweep in this process (-j 0): phase split and wall time; then end to end as a fresh process.",
}
SWEEP_MIN_S = 45.0  # a sweep section is not started with less time than this left (a cold Triton cache needs ~60 s)


def parse_sections(text: str) -> list:
    return sections.parse_sections(text, SECTIONS)


# The determinism section's defaults per device (--det-tokens, --det-runs; their help says them).
DET_TOKENS = {"cuda": (1, 8, 256), "cpu": (1, 2)}
DET_RUNS = {"cuda": 20, "cpu": 8}


@dataclass
class SuiteOptions:
    sections: list = field(default_factory=lambda: list(SECTIONS))
    device: str = "cuda"
    budget_s: Optional[float] = None
    a: str = "old"
    b: str = "new"
    calls: int = 200
    repeats: int = 10
    seed: int = 0
    pr_topk: tuple = (512, 2048)
    # The pr cells' rows: the call envelope's (envelope.toml: decode batches and prefill
    # steps to 16384), on every path (pr_table.PATHS): what the speed gate judges.
    pr_tokens: tuple = field(default_factory=lambda: envelope.load().rows)
    pr_paths: tuple = pr_table.PATHS
    cold_l2: bool = False
    contention_tokens: tuple = (1, 8, 64, 256, 1024, 4096)
    contention_widths: tuple = (128, 256, 512, 1024)
    model: DecodeModel = field(default_factory=DecodeModel)
    decode_batches: tuple = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    scan_k: tuple = (256, 512, 1024, 2048, 4096, 8192, 16384)
    scan_warps: tuple = (8, 16)
    scan_tokens: tuple = (1, 256, 1024)
    scan_paths: tuple = ("counts", "dcp-inplace", "dcp-compact")
    resource_targets: tuple = ("sm_80", "sm_90", "sm_100", "sm_120", "gfx90a", "gfx942", "gfx950")
    resource_topks: tuple = (128, 256, 384, 512, 1024, 2048, 2176, 4096, 8192, 16384)
    det_topk: tuple = (2048, 384)
    det_tokens: Optional[tuple] = None  # None: DET_TOKENS of the device
    det_runs: Optional[int] = None  # None: DET_RUNS of the device (schedules on the CPU)
    host_calls: int = 2000
    host_impls: tuple = ("old", "new")
    sweep_filters: tuple = ()
    sweep_fresh_process: bool = True
    # The speed gate on the pr cells (remap_ab/speed.py): the fraction by which B may be
    # slower than A beyond noise; None turns it off.
    fail_slower: Optional[float] = 0.05
    # Where the GPU sections put their inputs. Always "cuda" from the command line; the
    # tests set "cpu" with the graph timing replaced, to run everything else of those
    # sections (gates, tables, findings, charts) on the interpreter.
    timing_device: str = "cuda"


class Suite(sections.Suite):
    TITLES = TITLES
    QUESTIONS = QUESTIONS
    GPU_ONLY = GPU_ONLY

    def __init__(self, opts: SuiteOptions, folder: Path, meta: dict, say: Callable[[str], None] = print):
        super().__init__(opts.sections, opts.device, opts.budget_s, folder, meta, say)
        self.opts = opts
        self.contention_rows: list = []
        self.book: Optional[resources.VariantBook] = None  # made by prepare()
        self.kernels: dict = {}
        self.slower_cells: list = []  # pr cells the speed gate failed: "path K=.. T=..: <judgement>"

    def prepare(self) -> None:
        self.book = resources.VariantBook()
        self.kernels = resources.bench_kernels() if self.device == "cuda" else {}

    def around(self, key: str) -> contextlib.AbstractContextManager:
        """The timing sections record the variants they compile, on a GPU (resources)."""
        if key in RECORDED and self.device == "cuda":
            assert self.book is not None  # prepare() made it
            return resources.recording(self.book, self.kernels)
        return contextlib.nullcontext()

    # ---------------------------------------------------------------- sections
    def _section_pr(self, section: Section) -> None:
        o = self.opts
        configs = pr_table.bench_cases(o.pr_topk, o.pr_tokens, o.pr_paths, seed=o.seed)

        def progress(cell):
            r = cell.row()
            if cell.status != "timed":
                self.say(f"  pr {r['path']:>6} K={r['topk']:<5} T={r['tokens']:<5} {cell.status.upper()}: {cell.why[:200]}")
            else:
                cold = f"; cold {r['a_cold_us']:.2f} -> {r['b_cold_us']:.2f}" if o.cold_l2 else ""
                self.say(f"  pr {r['path']:>6} K={r['topk']:<5} T={r['tokens']:<5} {r['a_us']:.2f} -> {r['b_us']:.2f} µs "
                         f"({r['speedup']:.2f}x){cold}; floors {r['floor_a_us']:.2f} / {r['floor_b_us']:.2f}")

        cells = pr_table.run_bench(configs, o.a, o.b, calls=o.calls, repeats=max(o.repeats, 1), cold=o.cold_l2,
                                   progress=progress, budget=self.budget, device=o.timing_device)
        rows = [c.row() for c in cells]
        self._count_checks(rows)
        self._speed_gate(cells, rows, section)
        section.tables.append(Table("cells", "µs per call (medians over repeats)", rows, caption=(
            "a = " + o.a + ", b = " + o.b + "; floor = empty Triton kernel on the same grid and warps; "
            "GBps = minimum bytes moved / time; cold columns: rotating input copies (cold_sets, footprint / L2).")))
        try:
            self.say(pr_table.printable(cells).to_string(index=False))
        except Exception as exc:  # the rows are already in the section; only the printout is lost
            self.say(f"  (the table could not be printed: {exception_line(exc)[:200]})")
        groups = [f"{r['path']} K={r['topk']} T={r['tokens']}" for r in rows]
        series = {f"{o.a} warm": [r["a_us"] for r in rows], f"{o.b} warm": [r["b_us"] for r in rows]}
        if o.cold_l2:
            series.update({f"{o.a} cold": [r["a_cold_us"] for r in rows], f"{o.b} cold": [r["b_cold_us"] for r in rows]})
        section.charts.append(Chart("us", "µs per call, warm" + (" and cold L2" if o.cold_l2 else ""),
                                    figures.grouped_bars("µs per call", groups, series, "µs per call (log)", log=True)))
        for r in rows:
            if r["path"] == "counts" and r["topk"] == 2048 and r["tokens"] == 1024 and r["status"] == "timed":
                section.findings.append(f"counts path, K=2048, 1024 tokens: {r['a_us']:.2f} → {r['b_us']:.2f} µs = "
                                        f"{r['speedup']:.2f}x (PR on GB200: 12.22 → 3.84 µs = 3.18x)")
            if o.cold_l2 and r["status"] == "timed" and r["cold_footprint_over_l2"] == r["cold_footprint_over_l2"] \
                    and r["cold_footprint_over_l2"] < 1:
                section.findings.append(f"{r['path']} K={r['topk']} T={r['tokens']}: the cold figure is partly warm "
                                        f"(rotation covers {r['cold_footprint_over_l2']:.2f}x L2)")
        self._finish(section, len(configs) - len(cells), "cells")

    def _speed_gate(self, cells, rows, section: Section) -> None:
        """The speed gate (remap_ab/speed.py) on every timed pr cell: B's median over A's
        with its bootstrap interval in the row; a cell where B is slower beyond noise
        is named in the findings and fails the run."""

        o = self.opts
        if o.fail_slower is None:
            section.findings.append("speed gate off (--fail-slower off): B's speed against A's is not judged")
            return
        slower = []
        for cell, r in zip(cells, rows):
            name = f"{r['path']} K={r['topk']} T={r['tokens']}"
            if cell.status != CellStatus.TIMED or "a" not in cell.times:
                r["speed_gate"] = "not judged (not timed)"
                continue
            j = judge_speed(cell.times["a"].samples, cell.times["b"].samples, fail_slower=o.fail_slower)
            r["b_over_a"], r["b_over_a_ci_low"], r["b_over_a_ci_high"] = j.ratio, j.low, j.high
            r["speed_gate"] = "SLOWER" if j.slower else ("ok" if j.judged else "not judged")
            if j.slower:
                slower.append(f"{name}: {j.line(o.a, o.b)}")
            elif not j.judged:
                section.findings.append(f"{name}: {j.line(o.a, o.b)}")
        self.slower_cells += slower
        judged = sum(1 for r in rows if r.get("speed_gate") in ("ok", "SLOWER"))
        section.findings += [f"SLOWER {line}" for line in slower]
        section.findings.append(
            f"speed gate (B slower than A by more than {100 * o.fail_slower:.0f} % with 95 % confidence, bootstrap "
            f"interval of the ratio of medians over {o.repeats} repeats): {len(slower)} of {judged} judged cells fail")

    def _section_contention(self, section: Section) -> None:
        o = self.opts

        def on_cell(cell):
            if cell.status != "timed":
                self.say(f"  contention {cell.config.tokens} tokens: {cell.status}: {cell.why[:200]}")
                return
            parts = ", ".join(f"{n} {cell.us(n):.2f}" for n in cell.names)
            self.say(f"  contention {'dcp' if cell.config.compacts else 'counts'} T={cell.config.tokens}: {parts} µs")

        rows, left = contention.run(tokens=o.contention_tokens, widths=o.contention_widths, calls=o.calls,
                                    repeats=o.repeats, seed=o.seed, budget=self.budget, on_cell=on_cell,
                                    device=o.timing_device)
        self.contention_rows = rows
        self._count_checks(rows)
        section.tables.append(Table("cells", "µs per call: total, floor of the same grid, and the rest", rows))

        costs = contention_control.cost_rows(rows)
        if costs:
            section.tables.append(Table("control", "contention cost: the atomic kernel minus its control (the same kernel, "
                                        "grid and tiles with the atomic replaced by a write to the tile's own slot)", costs))
            section.findings += contention_control.conclusions(costs)
        names = [contention.variant_name(contention.TOPK // w) for w in o.contention_widths] + [contention.variant_name(1, "new")]
        many = contention.variant_name(contention.TOPK // min(o.contention_widths))
        few = "4 tiles" if 512 in o.contention_widths else contention.variant_name(contention.TOPK // max(o.contention_widths))
        for path in ("counts", "dcp"):
            mine = [r for r in rows if r["path"] == path and r["status"] == "timed"]
            if not mine:
                continue
            sig = contention.signature(rows, path, many=many, few=few, controlled=bool(costs))
            section.findings.append(sig.sentence)
            section.tables.append(Table(f"gap-{path}", f"{path}: {many} − {few} gap per token count",
                                        [{"tokens": t, "raw_gap_us": g, "gap_above_floor_us": a} for t, g, a in sig.gaps]))
            series = {n: [(r["tokens"], r["us"]) for r in mine if r["variant"] == n] for n in names}
            section.charts.append(Chart(f"lines-{path}", f"{path}: µs per call vs tokens (K=2048), per tile count",
                                        figures.lines(f"{path}, K=2048: µs per call", "tokens", "µs per call", series)))
            ordered = sorted(mine, key=lambda r: (r["tokens"], -r["tiles"]))
            groups = [f"T={r['tokens']} {r['variant']}" for r in ordered]
            section.charts.append(Chart(f"split-{path}", f"{path}: each cell split into launch floor and the rest",
                                        figures.stacked_bars(f"{path}, K=2048: floor + rest", groups, {
                                            "launch floor (empty kernel, same grid)": [r["floor_us"] for r in ordered],
                                            "the rest (work + contention)": [r["above_floor_us"] for r in ordered],
                                        }, "µs per call")))
        self._finish(section, left, "cells")

    def _known_call_us(self, dcp: int, batch: int, impl: str):
        """Per-call µs the contention section measured that decode can reuse."""

        path = {1: "counts", 4: "dcp"}.get(dcp)
        variant = {"old": contention.variant_name(self.opts.model.topk // 128), "new": contention.variant_name(1, "new")}[impl]
        if path is None or self.opts.model.topk != contention.TOPK or self.opts.model.tokens_per_request != 1:
            return None
        for r in self.contention_rows:
            if (r["path"], r["tokens"], r["variant"]) == (path, batch, variant) and r["status"] == "timed" \
                    and r["verified_in_graph"]:
                return r["us"]
        return None

    def _section_decode(self, section: Section) -> None:
        o = self.opts
        found, left = decode.measure(o.model, o.decode_batches, calls=o.calls, repeats=o.repeats,
                                     known=self._known_call_us, budget=self.budget, seed=o.seed, device=o.timing_device)
        refused = [(k, v) for k, v in found.items() if k[2] == "refused"]
        self.failed_checks += len(refused)
        rows = decode.rows(o.model, o.decode_batches, lambda d, b, i: found.get((d, b, i)))
        m = o.model
        section.note = (f"model: {m.layers} layers, index_topk {m.topk}, DCP {', '.join(map(str, m.dcp_sizes))}, "
                        f"{m.tokens_per_request} token(s) per request; per step = layers × µs per call (one remap per "
                        "layer; DCP ranks run theirs in parallel). Old = BLOCK_N 128 tiles.")
        for (dcp, b, _), why in refused:
            section.findings.append(f"DCP {dcp}, batch {b}: REFUSED — {why[:200]}")
        section.tables.append(Table("steps", "µs per decode step, old and new, and the saving", rows))
        series = {}
        for dcp in m.dcp_sizes:
            series[f"ours, DCP {dcp}"] = [(r["batch"], r["saved_step_us"]) for r in rows if r["dcp"] == dcp]
        series["PR, GB200 (its table × layers)"] = sorted(decode.pr_saved_per_step(m.layers, m.topk).items())
        section.charts.append(Chart("saved", "µs saved per decode step vs batch",
                                    figures.lines("µs saved per decode step", "batch (requests)", "µs per step", series)))
        pr = decode.pr_saved_per_step(m.layers, m.topk)
        for r in rows:
            if r["dcp"] == 1 and r["batch"] in (1, 256) and r["saved_step_us"] == r["saved_step_us"]:
                quoted = decode.PR_QUOTED_SAVED_US.get(r["tokens"])
                section.findings.append(
                    f"batch {r['batch']}, DCP 1: {r['saved_step_us']:.0f} µs saved per step "
                    f"({r['old_step_us']:.0f} → {r['new_step_us']:.0f}); PR on GB200: about {quoted:.0f} µs "
                    f"({pr.get(r['tokens'], float('nan')):.0f} from its table)")
        self._finish(section, left, "cells")

    def _section_width(self, section: Section) -> None:
        o = self.opts

        def on_cell(cell):
            parts = ", ".join(f"{n} {cell.us(n):.2f}" for n in cell.names) if cell.status == "timed" else cell.why[:200]
            self.say(f"  width K={cell.config.topk} T={cell.config.tokens}: {parts}")

        rows, left = width_scan.run(widths=o.scan_k, warps=o.scan_warps, tokens=o.scan_tokens, paths=o.scan_paths,
                                    calls=max(1, o.calls // 2), repeats=o.repeats, seed=o.seed, budget=self.budget,
                                    on_cell=on_cell, device=o.timing_device, impl=o.b)
        self._count_checks(rows)
        section.tables.append(Table("cells", "single tile at each width and warp count vs the tiled path, per path", rows))
        section.findings += width_scan.findings(rows, o.scan_warps)
        names = width_scan.variant_names(o.scan_warps)
        for path in o.scan_paths:
            for t in o.scan_tokens:
                mine = [r for r in rows if r["path"] == path and r["tokens"] == t and r["status"] == "timed"]
                if not mine:
                    continue
                series = {n: [(r["topk"], r["us"]) for r in mine if r["variant"] == n] for n in names}
                section.charts.append(Chart(f"us-{path}-T{t}", f"{path}: µs per call vs K at {t} tokens",
                                            figures.lines(f"{path}, {t} tokens: µs per call vs K", "K (columns per row)",
                                                          "µs per call", series)))
            regs = [r for r in rows if r["path"] == path and r["tokens"] == o.scan_tokens[0]]
            series = {n: [(r["topk"], r["regs_per_thread"]) for r in regs
                          if r["variant"] == n and r["regs_per_thread"] is not None] for n in names}
            section.charts.append(Chart(f"regs-{path}", f"{path}: registers per thread vs K",
                                        figures.lines(f"{path}: registers per thread", "K", "registers/thread", series,
                                                      logy=False)))
        self._finish(section, left, "cells")

    def _section_determinism(self, section: Section) -> None:
        o = self.opts
        on_gpu = o.device == "cuda"
        tokens = o.det_tokens or DET_TOKENS["cuda" if on_gpu else "cpu"]
        runs = o.det_runs or DET_RUNS["cuda" if on_gpu else "cpu"]

        pending: dict = {}

        def on_tally(t):
            # One line per (condition, case, implementation), once every dtype is in.
            r = t.row()
            key = (r["condition"], r["topk"], r["tokens"], r["impl"])
            pending.setdefault(key, []).append(r)
            if len(pending[key]) < len(attention.DTYPES):
                return
            parts = "; ".join(f"{x['dtype']} {x['distinct_attention_outputs']}/{x['runs']} (max |Δ| {x['max_abs_delta']:.3g})"
                              for x in pending.pop(key))
            self.say(f"  determinism {r['condition']} K={r['topk']} T={r['tokens']} {r['impl']}: "
                     f"{r['distinct_index_outputs']}/{r['runs']} index outputs; attention {parts}")

        rows, left = attention.run(device=o.device, topks=o.det_topk, tokens=tokens, runs=runs, budget=self.budget,
                                   on_tally=on_tally)
        where = "GPU: quiet, and with a matmul on a side stream" if on_gpu else \
            "CPU: the Triton interpreter under permuted program schedules (no GPU contention on a CPU)"
        section.note = f"{where}; DCP 4 compaction, rank 0, 30% invalid; {runs} runs per cell, each a fresh kernel call."
        section.findings += attention.summary(rows)
        section.tables.append(Table("runs", "distinct outputs over the runs", rows))
        groups, values = charts.pivot(rows, lambda r: f"{r['condition']} K={r['topk']} T={r['tokens']}",
                                      lambda r: f"{r['impl']} {r['dtype']}", lambda r: r["distinct_attention_outputs"])
        section.charts.append(Chart("distinct", "distinct attention outputs per cell",
                                    figures.grouped_bars("distinct attention outputs", groups, values, "distinct outputs")))
        self._finish(section, left, "groups")

    def _section_resources(self, section: Section) -> None:
        import os


        o = self.opts
        if o.device == "cuda":
            book = self.book
            assert book is not None  # run() made it before any section
            resources.jit_cache_variants(book, resources.bench_kernels())
            rows = book.rows()
            self.say(resources.format_rows(rows))
            section.tables.append(Table("variants", "compiled variants (loaded on this GPU)", rows))
            spilling = [r for r in rows if (r["spills"] or 0) > 0]
            section.findings.append(f"{len(rows)} compiled variants recorded; {len(spilling)} spill registers"
                                    + (": " + "; ".join(f"{r['kernel']} {r['variant']} ({r['num_warps']} warps): {r['spills']}"
                                                        for r in spilling[:6]) if spilling else ""))
        start = time.monotonic()
        jobs = os.cpu_count() or 1
        cross = cross_compile.run(o.a, o.b, o.resource_targets, cross_compile.DEFAULT_PATHS, o.resource_topks,
                                  cross_compile.DEFAULT_BLOCK_NS, jobs)
        wall = time.monotonic() - start
        self.say(cross_compile.format_tables(cross))
        for t in o.resource_targets:
            rows = cross_compile.table_rows(cross, t)
            if rows:
                section.tables.append(Table(f"cross-{t}", f"{t}: every variant of A ({o.a}) and B ({o.b}), cross-compiled "
                                            f"(Triton {rows[0]['triton']})", rows))
        compiled = sum(1 for r in cross if "unsupported" not in r)
        section.findings.append(f"cross-compiled {compiled} variants for {len(o.resource_targets)} target(s) in {wall:.1f} s "
                                f"on {jobs} process(es)")
        section.findings += cross_compile.unsupported_notes(cross)
        section.findings += [line for line in cross_compile.spill_onsets(cross) if "spills from" in line]
        bad = cross_compile.regressions(cross)
        section.findings += [f"REGRESSION {line}" for line in bad] or [f"B ({o.b}) compiles every variant and spills "
                                                                      f"nowhere A ({o.a}) does not"]
        section.status = SectionStatus.COMPLETE

    def _section_host(self, section: Section) -> None:
        o = self.opts
        rows = host.host_overheads(o.host_impls, o.device, calls=o.host_calls)
        if o.device != "cuda":
            section.note = "CPU: these are the Triton interpreter's costs, not a GPU launch's."
        section.tables.append(Table("calls", "host µs per call", rows))
        for impl in o.host_impls:
            mine = {r["call"]: r["host_us_per_call"] for r in rows if r["impl"] == impl}
            wrapper, raw = mine.get("public wrapper"), mine.get("raw kernel launch (arguments prepared)")
            sweep = mine.get("sweep per-case call (batch.py, poisoned memory on)")
            text = f"{impl}: wrapper {wrapper:.1f} µs"
            if raw is not None:
                text += f", raw launch {raw:.1f} µs (the wrapper's own Python: {wrapper - raw:.1f} µs)"
            if sweep is not None:
                text += f", sweep per-case call {sweep:.1f} µs"
            section.findings.append(text)
        self.say("\n".join(f"  host {r['impl']:>4} {r['call']:<40} {r['host_us_per_call']:.1f} µs" for r in rows))
        section.status = SectionStatus.COMPLETE

    def _section_sweep(self, section: Section) -> None:
        o = self.opts
        if o.device != "cuda" and not o.sweep_filters:
            section.note = ("on the CPU the full sweep takes minutes; give --sweep-filter (e.g. "
                            "path=convert-counts) to time a subset")
            return
        if self.budget.left() < SWEEP_MIN_S:
            section.note = f"{self.budget.left():.0f} s of the budget left, a sweep needs about {SWEEP_MIN_S:.0f} s"
            return

        kernels = resources.bench_kernels()
        scratch = Path(tempfile.mkdtemp(prefix="remap-ab-bench-sweep-"))
        rows = []
        try:
            before = resources.jit_variant_count(kernels)
            first = sweep_timing.sweep_in_process(scratch, "in-process-1", o.sweep_filters)
            rows.append(sweep_timing.phase_row("in-process, first", first))
            added = resources.jit_variant_count(kernels) - before
            rows[-1]["jit_variants_added"] = added
            self.say(f"  sweep in-process: {first['wall_s']:.2f} s, phases {first.get('phase_seconds')}")
            if self.budget.left() > 3 * first["wall_s"] + 5:
                breakdown = host.kernels_phase_breakdown(o.device, o.a, o.b, filters=o.sweep_filters, budget=self.budget)
                section.tables.append(Table("kernels-phase", "the kernels phase decomposed (the whole grid, A and B)", breakdown,
                                            caption="host_s: until the last call of each batch returned; total_s: until the "
                                                    "device finished too (one sync per batch, as the sweep does)."))
                by_way = {r["way"]: r for r in breakdown}
                section.findings.append("kernels phase per call (host µs): " + ", ".join(
                    f"{w} {r['host_us_per_call']:.1f}" for w, r in by_way.items()) + "; device wait after the last call: "
                    + ", ".join(f"{w} {r['device_wait_s']:.2f} s" for w, r in by_way.items()))
                self.say("  " + section.findings[-1])
            if self.budget.left() > 3 * first["wall_s"] + 5:
                second = sweep_timing.sweep_in_process(scratch, "in-process-2", o.sweep_filters)
                rows.append(sweep_timing.phase_row("in-process, second (warm)", second))
                self.say(f"  sweep in-process again: {second['wall_s']:.2f} s, phases {second.get('phase_seconds')}")
            if o.sweep_fresh_process and self.budget.left() > 2 * first["wall_s"] + 20:
                fresh = sweep_timing.sweep_subprocess(scratch, "fresh-process", o.sweep_filters,
                                              timeout_s=max(30.0, min(300.0, self.budget.left())))
                rows.append(sweep_timing.phase_row("fresh process (end to end)", fresh))
                self.say(f"  sweep fresh process: {fresh['wall_s']:.2f} s end to end (rc {fresh['rc']})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        section.tables.insert(0, Table("phases", "sweep phase split (seconds)", rows, caption=(
            "phases from the run's run.json (gen / kernels / compare / write); wall_s = the whole command; "
            "the first in-process run also pays Triton compilation when the cache is cold.")))
        warm = [r for r in rows if r["run"].startswith("in-process")]
        if warm:
            best = min(warm, key=lambda r: r["wall_s"])
            section.findings.append(
                f"in-process: {best['wall_s']:.2f} s for {best['cases']} cases (gen {best['gen_s'] or 0:.2f}, kernels "
                f"{best['kernels_s'] or 0:.2f}, compare {best['compare_s'] or 0:.2f}, write {best['write_s'] or 0:.2f} s); "
                f"goal ≤ 2 s: {'met' if best['wall_s'] <= 2 else 'not met'}")
        firsts = [r for r in rows if r["run"] == "in-process, first"]
        seconds = [r for r in rows if r["run"].startswith("in-process, second")]
        if firsts and seconds and firsts[0]["kernels_s"] is not None and seconds[0]["kernels_s"] is not None:
            f, s = firsts[0], seconds[0]
            section.findings.append(
                f"kernels phase {f['kernels_s']:.2f} s in the first run of this process, {s['kernels_s']:.2f} s in the "
                f"second: {f['kernels_s'] - s['kernels_s']:.2f} s is per-process JIT work (the first run brought "
                f"{f.get('jit_variants_added', '?')} kernel variants into memory, compiled or loaded from Triton's disk cache)")
        fresh_rows = [r for r in rows if r["run"].startswith("fresh")]
        if fresh_rows:
            f = fresh_rows[0]
            section.findings.append(f"end to end (fresh process): {f['wall_s']:.2f} s; goal ≤ 4 s: "
                                    f"{'met' if f['wall_s'] <= 4 else 'not met'}")
        if any(r["rc"] not in (0, None) for r in rows):
            section.findings.append("a sweep exited non-zero: see the rc column (1 = a case failed)")
        section.status = SectionStatus.COMPLETE if rows else SectionStatus.NOT_RUN
