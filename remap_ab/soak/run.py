"""Soak: fresh random configurations, beyond the grid, through A, B and the oracle
until a deadline.

The sweep runs a fixed grid; a soak draws configurations the grid never holds: K any
multiple of BLOCK_N up to 4096, T up to 4096, every wrapper path (plain convert with
and without counts and prefill rows, the DCP wrapper at size 1, DCP 2/4/8 compacting
or in place, with and without counts), any rank and interleave, every backend's block
size, every block-table kind, row layout, memory layout (layouts.py) and kind of
negative id, the models' index widths more often than others, and a fresh input seed
each time. Block sizes, strides (``BLOCK_STRIDE_ROWS``), caller-owned buffers, DCP
sizes and interleaves, the models' widths and the prefill steps come from the call
envelope (envelope.toml); each optional parameter is drawn on every wrapper that may
take it (features.py), left out where neither A's nor B's wrapper takes it
(``takeable``), and the summary counts per parameter x wrapper the calls that passed it.

Draws are seeded: a soak with seed ``s`` draws from the stream (``s``, 0), so the same
seed draws the same cases in the same order on every run, whatever the machine's speed
(how many of them fit before the deadline varies; with --max-cases exactly the first
ones are judged). Several workers (pool.py's processes, one per GPU) are fed from that
one stream by this process.

On a GPU every ``contend_every``-th case runs while a side stream keeps the device busy
with matrix products (``nondet.SideStreamLoad``): a busy device changes how the
programs of a row interleave, which is what the old kernel's race depends on. Every
case runs in batches through the batch engine (few host syncs; contended ones in
batches of their own, each call queued behind the load), recorded as the sweep
records a case (``recording.py``). One worker per GPU, pinned through
``CUDA_VISIBLE_DEVICES`` before CUDA starts (``gpus.py``). On the CPU (Triton interpreter, about 2 ms a program) the cases run
one at a time and T is capped small by default.

GPU work at GPU speed: a new variant (precompile.variant_key: the constexprs and the
layout) is a new Triton compile, some 0.2 s of a core each for A and B. So on a GPU
one draw in ``fresh_every`` brings a new variant and the others re-draw the data of
a recent one (``draws``); compile workers (precompile.py) compile the coming variants
on the host's other cores into Triton's on-disk cache while the device judges the
drawn cases whose variants are compiled (``run_ahead``), and the device process only
loads them. Where the time went is kept per worker (``WorkerTimes``).

A case that does not pass gets its replay command (with the ``PYTHONPATH`` a custom
module needs) and, for the first ``reports`` of each failure class (report_cap.py), a
normal case report (recording.py); a case whose run raises, or whose worker dies, is a
crash (with a crash report under the same cap).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from remap_ab import runtime
from remap_ab.errors import ConfigError, exception_line
from remap_ab.host.interrupts import Interrupts
from remap_ab.processes import precompile
from remap_ab.processes.pool import Job, Pool
from remap_ab.processes.precompile import Loads, _has_listener, variant_key
from remap_ab.report import replay_command, run_command
from remap_ab.status import Status
from remap_ab.subjects.remap import envelope, features, registry
from remap_ab.subjects.remap.config import NEGATIVE_KINDS, ROW_LAYOUTS, TABLE_KINDS, CaseConfig
from remap_ab.subjects.remap.layouts import LAYOUT_NAMES
from remap_ab.subjects.remap.nondet import SideStreamLoad
from remap_ab.subjects.remap.recording import Judge, judge_and_record, lost_case_row

# Every wrapper path of SPEC §6, with the CaseConfig fields that select it (the DCP
# filter proper takes the envelope's sizes above 1: ``_dcp_sizes``).
PATHS: dict[str, dict[str, Any]] = {
    "convert": dict(mode="convert", counts=False),
    "convert-counts": dict(mode="convert", counts=True),
    "convert-prefill": dict(mode="convert", counts=False, prefill=True),
    "convert-prefill-counts": dict(mode="convert", counts=True, prefill=True),
    "dcp1": dict(mode="dcp", dcp=1, counts=False),
    "dcp1-counts": dict(mode="dcp", dcp=1, counts=True),
    "dcp-compact": dict(mode="dcp", compact=True, counts=False),
    "dcp-compact-counts": dict(mode="dcp", compact=True, counts=True),
    "dcp-inplace": dict(mode="dcp", compact=False, counts=False),
    "dcp-inplace-counts": dict(mode="dcp", compact=False, counts=True),
}
# The optional parameters (features.py) are drawn from the call envelope (envelope.toml)
# on every wrapper that may take them: a stride in this share of draws, caller buffers
# in this share. A draw passing one that neither A's nor B's wrapper takes is judged
# without it (``takeable``), and the summary counts per parameter x wrapper the calls
# that passed one.
STRIDE_SHARE = 0.4
BUFFERS_SHARE = 0.4

MAX_TOPK = 4096
GPU_MAX_TOKENS = 4096
# On the CPU the batched interpreter runs a launch's programs together, so T is cheap:
# measured on 2 cores, 30 s soaks drew 37.5 cases/s capped at 4 tokens, 26.7 at 64 and
# 8.7 at 512. 512 reaches real decode batches at a quarter of the rate.
CPU_MAX_TOKENS = 512
# Prefill steps (issue 32; the envelope's prefill rows): backends route every token of a
# step through the call, up to max_num_batched_tokens rows. Drawn beside the cap, in this
# share of draws: rarely on the CPU, where one 16384-row case at K = 2048 takes tens of
# seconds.
GPU_PREFILL_SHARE = 0.02
CPU_PREFILL_SHARE = 0.002
BLOCK_NS = (32, 64, 128, 128, 128, 256)  # 128 (vLLM's) drawn most often
# Interleaves drawn besides the envelope's (and the block size itself).
INTERLEAVES = (1, 2, 4, 8, 16)
WIDTHS = (1, 8, 64, 64, 256)  # W = blocks_per_req, a constexpr: few values, few compiles
# The index widths of the models that run this kernel (the envelope's [[width]];
# docs/model-widths.md) are drawn for MODEL_WIDTH_SHARE of the fresh draws,
# each with a BLOCK_N the wrappers accept for it; the rest uniform. The pairs they
# reject are the sweep's expected rejections, not soak cases.
MODEL_WIDTH_SHARE = 0.3


def model_widths() -> tuple:
    """(K, accepted BLOCK_N values) of every model width (the envelope's)."""

    return tuple((w.k, tuple(w.block_n)) for w in envelope.load().widths)


def prefill_steps() -> tuple:
    """The prefill steps drawn (the envelope's prefill rows)."""
    return envelope.load().prefill_rows


def _dcp_sizes(spec: dict) -> tuple:
    sizes = envelope.load().dcp_sizes
    return (1,) if spec.get("dcp") == 1 else tuple(s for s in sizes if s > 1)
# A variant (the compile-relevant fields: precompile.variant_key) is reused by the
# draws after it: with ``fresh_every`` F, one draw in F brings a new variant and the
# others re-draw the data of one of the RECENT_VARIANTS latest (T, the table, the
# rows, the seed...). On a GPU a new variant is a new compile; on the CPU nothing is.
RECENT_VARIANTS = 64
GPU_FRESH_EVERY = 4


@dataclass(frozen=True)
class Draw:
    """One drawn case and the labels the soak's distribution counts it under."""

    config: CaseConfig
    path: str
    contended: bool = False

    @property
    def extra(self) -> bool:
        """What a pool worker's judge is told besides the config (pool.Job.judge)."""
        return self.contended

    def labels(self) -> dict:
        c = self.config
        return {
            "path": self.path,
            "K": k_bucket(c.topk),
            "K kind": k_kind(c),
            "tokens": tokens_bucket(c.tokens),
            "dcp size": str(c.effective_dcp[0]),
            "table": c.table,
            "row layout": c.row_layout,
            "layout": c.layout,
            "negatives": c.negatives,
            "BLOCK_N": str(c.block_n),
            "contended": "yes" if self.contended else "no",
        }


def _bucket(value: int, tops: tuple) -> str:
    """The range of ``tops`` (ascending upper bounds) that holds ``value``, e.g. "9-64"."""
    low = 1
    for top in tops:
        if value <= top:
            return str(top) if low == top else f"{low}-{top}"
        low = top + 1
    return f"> {tops[-1]}"


def k_bucket(k: int) -> str:
    return _bucket(k, (128, 512, 1024, 2048, MAX_TOPK))


def k_kind(c: CaseConfig) -> str:
    if c.topk == c.block_n:
        return "one tile (K == BLOCK_N)"
    return "power of two" if c.topk_is_pow2 else "not a power of two"


def tokens_bucket(t: int) -> str:
    return _bucket(t, (1, 8, 64, 512, GPU_MAX_TOKENS))


def _width(rng: random.Random, max_topk: int) -> tuple[int, int]:
    """(K, BLOCK_N): a model's width (MODEL_WIDTH_SHARE of the time, with a BLOCK_N
    dividing it) or any multiple of a drawn BLOCK_N."""
    models = [(k, ns) for k, ns in model_widths() if k <= max_topk]
    if models and rng.random() < MODEL_WIDTH_SHARE:
        topk, block_ns = rng.choice(models)
        return topk, rng.choice(block_ns)
    block_n = rng.choice([n for n in BLOCK_NS if n <= max_topk] or [min(BLOCK_NS)])
    tiles_max = max(1, max_topk // block_n)
    if rng.random() < 0.35:  # powers of two: the new kernel's single-tile path
        return block_n << rng.randrange(int(math.log2(tiles_max)) + 1), block_n
    return block_n * rng.randint(1, tiles_max), block_n


def draw(rng: random.Random, max_tokens: int, max_topk: int = MAX_TOPK, prefill_share: float = 0.0) -> Draw:
    """One fresh configuration (every field drawn from ``rng``)."""
    path = rng.choice(list(PATHS))
    spec = PATHS[path]
    env = envelope.load()
    topk, block_n = _width(rng, max_topk)
    block_size = rng.choice(env.block_sizes)
    wrapper = spec["mode"]
    block_stride = 0
    if env.strides and wrapper in envelope.taking("block_stride") and rng.random() < STRIDE_SHARE:
        stride = rng.choice(env.strides)
        block_size, block_stride = stride.block_size, stride.block_stride
    fields: dict[str, Any] = dict(  # CaseConfig's keyword arguments, of several types
        mode=spec["mode"],
        topk=topk,
        block_n=block_n,
        block_size=block_size,
        blocks_per_req=rng.choice(WIDTHS),
        counts=spec["counts"],
        layout=rng.choice(LAYOUT_NAMES),  # strides and offsets: part of the compiled variant
        block_stride=block_stride,
    )
    if (any(env.out_buffers) and wrapper in envelope.taking("out_buffers") and rng.random() < BUFFERS_SHARE):
        fields["out_buffers"] = True
    if spec["mode"] == "dcp":
        size = rng.choice(_dcp_sizes(spec))
        fields["dcp_size"] = size
        fields["dcp_rank"] = rng.randrange(size)
        interleaves = (1, *INTERLEAVES, *env.interleaves, block_size)
        fields["interleave"] = rng.choice([i for i in interleaves if block_size % i == 0])
        fields["compact"] = spec.get("compact", rng.random() < 0.5)  # size 1 ignores it
    fields.update(_data_fields(rng, max_tokens, bool(spec.get("prefill")), prefill_share))
    try:
        return Draw(CaseConfig(**fields), path)
    except ConfigError:  # a parameter this CaseConfig does not take on this wrapper
        return Draw(CaseConfig(**{**fields, "out_buffers": False}), path)


def _data_fields(rng: random.Random, max_tokens: int, prefill: bool, prefill_share: float = 0.0) -> dict[str, Any]:
    """The fields that change a case's data but not its compiled kernel."""
    # Log-uniform: small and large T alike; now and then a prefill step beyond the cap.
    tokens = min(max_tokens, max(1, int(math.exp(rng.uniform(0.0, math.log(max_tokens + 1))))))
    if prefill_share and rng.random() < prefill_share:
        tokens = rng.choice(prefill_steps())
    fields: dict[str, Any] = dict(
        tokens=tokens,
        num_reqs=rng.randint(1, 8),
        negatives=rng.choice(NEGATIVE_KINDS),
        table=rng.choice(TABLE_KINDS),
        row_layout=rng.choice(ROW_LAYOUTS),
        seed=rng.randrange(2**31),
    )
    invalid = rng.choice((0.0, 1.0, round(rng.uniform(0.0, 1.0), 2)))
    fields["invalid_ratio"] = invalid
    fields["out_of_range"] = 0.0 if rng.random() < 0.5 else round(rng.uniform(0.0, 1.0 - invalid), 2)
    if prefill:
        fields["prefill_fraction"] = round(rng.uniform(0.05, 1.0), 2)
    return fields


def redraw(rng: random.Random, base: Draw, max_tokens: int, prefill_share: float = 0.0) -> Draw:
    """``base``'s variant (path, widths, DCP, everything compiled) with fresh data."""
    fields = _data_fields(rng, max_tokens, base.config.has_prefill, prefill_share)
    for name in ("tokens", "num_reqs"):  # one row, one request: a variant of its own (precompile.variant_key)
        if (fields[name] == 1) != (getattr(base.config, name) == 1):
            fields[name] = 1 if getattr(base.config, name) == 1 else 2
    return Draw(base.config.replace(**fields), base.path)


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CaseConfig)}


def takeable(d: Draw, plan: features.Plan | None) -> Draw:
    """``d``, less the optional parameters it passes that neither side's wrapper takes
    (``plan``: features.py's, for A and B): such a call cannot run, the rest of it can."""
    if plan is None or plan.runnable(d.config):
        return d
    config = d.config
    for name in features.uses(d.config):
        config = config.replace(**{features.BY_NAME[name].field: _DEFAULTS[features.BY_NAME[name].field]})
        if plan.runnable(config):
            break
    return Draw(config, d.path, d.contended)


def draws(seed: int, worker: int, max_tokens: int, max_topk: int = MAX_TOPK, contend_every: int = 0,
          generation: int = 0, fresh_every: int = 1, prefill_share: float = 0.0, plan: features.Plan | None = None):
    """Worker ``worker``'s endless, reproducible stream of draws for soak seed ``seed``
    (a restarted worker's ``generation`` gives it a stream of its own). Every
    ``contend_every``-th draw (0: none) is marked to run under contention. One draw in
    ``fresh_every`` is a fresh variant; the others re-draw the data of one of the
    RECENT_VARIANTS latest (1: every draw fresh). ``prefill_share``: the share of draws
    that are a prefill step (the envelope's prefill rows, beyond ``max_tokens``).
    ``plan`` (features.py's, for A and B): each draw ``takeable`` by them."""
    key = f"remap-ab soak {seed} worker {worker}" + (f" restart {generation}" if generation else "")
    rng = random.Random(key)
    recent: list[Draw] = []
    n = 0
    while True:
        if n % fresh_every == 0 or not recent:
            d = draw(rng, max_tokens, max_topk, prefill_share)
            recent = (recent + [d])[-RECENT_VARIANTS:]
        else:
            d = redraw(rng, rng.choice(recent), max_tokens, prefill_share)
        n += 1
        if contend_every and n % contend_every == 0:
            d = Draw(d.config, d.path, contended=True)
        yield takeable(d, plan)


# --------------------------------------------------------------------------- one worker


@dataclass
class CaseRecord:
    """What the soak keeps of one case (plain data: it crosses process boundaries)."""

    worker: int
    case_id: str
    labels: dict
    status: str  # a Status word
    seconds: float
    line: str = ""  # the verdict's summary line, for cases that do not pass
    report: str = ""  # the report folder, for cases that do not pass
    replay: str = ""  # the command that replays it
    # The optional parameters it passed: [name, wrapper, who ran it ("A and B", "A", "B")].
    parameters: list = field(default_factory=list)


@dataclass
class WorkerPlan:
    worker: int
    device: str
    a: str
    b: str
    seed: int
    max_tokens: int
    max_topk: int
    folder: str  # where failing cases' reports go
    deadline: float  # time.time() after which no case starts
    max_cases: int | None = None  # per worker
    contend_every: int = 4  # GPU only
    batch: int = 16  # GPU only: quiet cases per run_batch call
    fresh_every: int = 1  # one draw in this many is a fresh variant (draws())
    compile_workers: int = 0  # GPU only: processes compiling the coming variants ahead (0: none)
    prefill_share: float = 0.0  # the share of draws that are prefill steps (draws())
    reports: Any = None  # report_cap.Cap: failing cases per failure class given a report folder (None: every one)


@dataclass
class WorkerTimes:
    """Where a worker's time went: judging cases (``run``, less the Triton compiles and
    cache loads made inside it), compiling and loading in this process, waiting for
    the compile-ahead workers; and what those workers did."""

    run_s: float = 0.0
    compile_s: float = 0.0
    compiled: int = 0
    load_s: float = 0.0
    loaded: int = 0
    wait_s: float = 0.0
    ahead: str = ""  # precompile.Ahead.summary(), when there was a compile-ahead
    counted: bool = False  # Triton's compiles and loads were counted (on a GPU, with a compilation listener)
    interpreter: bool = False  # the cases ran in the Triton interpreter (which compiles nothing)

    def add(self, other: WorkerTimes) -> None:
        for name in ("run_s", "compile_s", "compiled", "load_s", "loaded", "wait_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.ahead = "; ".join(x for x in (self.ahead, other.ahead) if x)
        self.counted = self.counted or other.counted
        self.interpreter = self.interpreter or other.interpreter

    def line(self) -> str:
        if self.interpreter:
            return f"judging {self.run_s:.1f} s (the Triton interpreter: nothing compiled)"
        if not self.counted:
            return (f"judging {self.run_s:.1f} s, Triton's compiles and loads included (not counted: this Triton "
                    "has no compilation listener)")
        text = (f"judging {self.run_s:.1f} s; Triton in the worker: {self.compiled} kernels compiled in "
                f"{self.compile_s:.1f} s, {self.loaded} loaded from its cache in {self.load_s:.1f} s")
        if self.ahead:
            text += f"; waiting for the compile-ahead {self.wait_s:.1f} s ({self.ahead})"
        return text


def run_worker(plan: WorkerPlan, emit: Callable[[CaseRecord], None], stopping: Callable[[], bool],
               times: WorkerTimes | None = None) -> int:
    """Draw and judge cases in this process until the deadline, ``max_cases`` or
    ``stopping()``; ``emit`` every case's record as it is judged. Where the time went
    is added to ``times``. Returns the number of cases.

    On a GPU with ``compile_workers``, draws are taken ahead of the device (a window
    of LOOKAHEAD), each new variant handed to the compile workers, and the device
    judges the drawn cases whose variants are compiled, same variants together; with
    ``max_cases`` exactly the first ``max_cases`` draws are judged, whatever the order."""

    times = times if times is not None else WorkerTimes()
    device = runtime.select(plan.device)
    on_gpu = device == "cuda"
    load = None
    if on_gpu and plan.contend_every:
        load = _side_load()
    stream = draws(plan.seed, plan.worker, plan.max_tokens, plan.max_topk, plan.contend_every if on_gpu else 0,
                   0, plan.fresh_every, plan.prefill_share, registry.feature_plan(plan.a, plan.b))
    judge = _Batches(plan, device, emit, load, times)
    if on_gpu and plan.compile_workers:
        ahead = precompile.Ahead(plan.a, plan.b, precompile.device_target(), plan.compile_workers)
        try:
            return run_ahead(plan, stream, judge, stopping, times, ahead)
        finally:
            times.ahead = ahead.summary()
            ahead.close()
    waiting: dict[bool, list] = {False: [], True: []}  # quiet and contended draws not yet judged
    while True:
        held = len(waiting[False]) + len(waiting[True])
        if stopping() or time.time() >= plan.deadline or (plan.max_cases is not None and judge.done + held >= plan.max_cases):
            break
        d = next(stream)
        waiting[d.contended].append(d)
        if len(waiting[d.contended]) >= (plan.batch if on_gpu else 1):
            judge.batch(waiting[d.contended], d.contended)
            waiting[d.contended] = []
    for contended, left in waiting.items():
        judge.batch(left, contended)
    return judge.done


LOOKAHEAD = 512  # draws taken ahead of the device while their variants compile


def run_ahead(plan: WorkerPlan, stream, judge, stopping: Callable[[], bool], times: WorkerTimes, ahead) -> int:
    """The compile-ahead schedule (``run_worker``): ``ahead`` takes each drawn case's
    variant (``submit``), says when it is compiled (``ready``) and waits (``wait_any``);
    ``judge`` judges draws in a ``batch`` (contended ones in batches of their own)."""

    window: list[Draw] = []
    drawn = 0
    while not (stopping() or time.time() >= plan.deadline):
        room = LOOKAHEAD - len(window)
        if plan.max_cases is not None:
            room = min(room, plan.max_cases - drawn)
        for _ in range(max(0, room)):
            d = next(stream)
            ahead.submit(d.config)
            window.append(d)
            drawn += 1
        if not window:
            break
        ready = [d for d in window if ahead.ready(d.config)]
        if not ready and not ahead.started():
            # The compile workers are still starting (seconds of imports): judge here
            # meanwhile the draws of one variant, compiling it unless Triton's cache holds
            # it, then look again. (A batch of first draws holds dozens of variants: their
            # compiles here outlast the workers' start-up many times.)
            ready = _one_variant(window, plan.batch)
        if not ready:
            t0 = time.perf_counter()
            ahead.wait_any(timeout=0.5)
            times.wait_s += time.perf_counter() - t0
            continue
        taken = {id(d) for d in ready}
        window = [d for d in window if id(d) not in taken]
        for contended, batch in _batches(ready, plan.batch):
            if stopping() or time.time() >= plan.deadline:
                break
            judge.batch(batch, contended)
    return judge.done


def _one_variant(window: list, size: int) -> list:
    """At most ``size`` draws of ``window``'s most drawn variant (the first drawn on a tie)."""
    from collections import Counter


    keys = [variant_key(d.config) for d in window]
    most = Counter(keys).most_common(1)[0][0] if keys else None
    return [d for d, k in zip(window, keys) if k == most][:size]


def _batches(ready: list, size: int) -> list[tuple[bool, list]]:
    """``ready`` draws cut into ``(contended, batch)``s of at most ``size``: contended
    ones first and in batches of their own, each kind sorted by variant (a batch's
    launches of one variant follow one another)."""

    out = []
    for contended in (True, False):
        same = sorted((d for d in ready if d.contended == contended), key=lambda d: variant_key(d.config))
        out += [(contended, same[i : i + size]) for i in range(0, len(same), size)]
    return out


# The soak's contending products: 4096-square ones still outlast the call queued behind
# each, and a contended batch waits for all of them at its sync; nondet's 8192-square
# default is eight times the work.
SOAK_LOAD_SIZE = 4096


def _side_load():
    return SideStreamLoad(size=SOAK_LOAD_SIZE, device="cuda")


class _Batches:
    """A worker's batches of draws: judged (``_run_batch``), their records emitted,
    the times kept."""

    def __init__(self, plan: WorkerPlan, device: str, emit, load, times: WorkerTimes):
        self.plan, self.device, self.emit, self.load, self.times = plan, device, emit, load, times
        self.done = 0

    def _timed(self, work):
        loads = _loads(self.device)
        start = time.perf_counter()
        with loads:
            records = work()
        self.times.run_s += time.perf_counter() - start - loads.compile_seconds - loads.load_seconds
        self.times.compile_s += loads.compile_seconds
        self.times.compiled += loads.compiled
        self.times.load_s += loads.load_seconds
        self.times.loaded += loads.cached
        self.times.counted = self.times.counted or loads.active
        self.times.interpreter = self.device != "cuda"
        for rec in records:
            self.emit(rec)
            self.done += 1

    def batch(self, draws: list, contended: bool = False) -> None:
        """Judge ``draws``; ``contended``: each call under the side-stream load."""
        if draws:
            load = self.load if contended else None
            self._timed(lambda: _run_batch(self.plan, self.device, draws, load))


def _loads(device: str):
    """Counts this process's Triton compiles and cache loads on a GPU (none on the CPU)."""

    return Loads() if device == "cuda" else Loads.none()


class ContextLost(Exception):
    """The CUDA context of this worker is unusable (a sticky error, e.g. an illegal
    address in a kernel): every later case would fail for that reason alone."""


def _context_lost(device: str) -> bool:
    if device != "cuda":
        return False
    import torch

    try:
        torch.cuda.synchronize()
    except Exception:
        return True
    return False


def _run_batch(plan: WorkerPlan, device: str, batch: list, load=None) -> list:
    """Cases through the batch engine, judged and recorded as the sweep does it
    (``recording.judge_and_record``: a row each, a report for each that did not pass);
    with ``load`` (a ``nondet.SideStreamLoad``), every call of A and B launches right
    after matrix products are queued on its side stream, so the kernels run on a busy
    device (the load queues up faster than it drains: no launch finds it idle). A
    batch that raises is judged case by case; a case that raises alone is a crash
    (``recording.Judge``)."""

    def stop_if_context_lost(exc, configs) -> None:
        if _context_lost(device):
            raise ContextLost(f"the batch engine raised {exception_line(exc)[:300]} on a batch of {len(configs)} "
                              "cases") from None

    def crash(config, exc) -> dict:
        return lost_case_row(config, plan.a, plan.b, exception_line(exc)[:400], Path(plan.folder), device, Status.CRASH,
                             plan.reports)

    judge = Judge(plan.a, plan.b, device, Path(plan.folder), before_split=stop_if_context_lost, on_crash=crash,
                  reports=plan.reports)
    judged = judge.judge([d.config for d in batch], context=load.enqueue if load is not None else None)
    return [_from_row(plan, d, row, seconds) for d, (row, seconds) in zip(batch, judged)]


def _from_row(plan: WorkerPlan, d: Draw, row: dict, seconds: float) -> CaseRecord:
    """The soak's record of a case from its results row (recording.py's)."""
    status = str(row["status"])
    rec = CaseRecord(plan.worker, d.config.case_id, d.labels(), status, seconds,
                     parameters=passed_parameters(d.config, registry.feature_plan(plan.a, plan.b)))
    if status == "pass":
        return rec

    impls = _implementations(plan)
    rec.line = f"{d.config.case_id}: {status.upper()} — {row['first_mismatch']}"
    if row.get("report"):
        folder = Path(plan.folder) / row["report"]
        rec.report, rec.replay = str(folder), replay_command(folder, *impls)
    else:
        rec.replay = run_command(d.config, *impls)
    return rec


def passed_parameters(config: CaseConfig, plan: features.Plan) -> list:
    """[name, wrapper, who ran it] of every optional parameter ``config`` passes."""
    runs_a, runs_b = plan.runs(config)
    who = "A and B" if runs_a and runs_b else "A" if runs_a else "B" if runs_b else "neither"
    return [[name, config.mode, who] for name in features.uses(config)]


def _implementations(plan: WorkerPlan) -> tuple:
    """A and B as loaded: the registry knows where each came from, so a module from a
    custom path gets its PYTHONPATH in the replay commands."""

    return registry.get(plan.a), registry.get(plan.b)


# --------------------------------------------------------------------------- the tally


@dataclass
class Tally:
    """Every record of a soak, and what the summary says about them."""

    records: list = field(default_factory=list)
    not_passing: list = field(default_factory=list)  # the records that did not pass, kept as they come
    started: dict = field(default_factory=dict)  # worker -> time.time() it was ready
    gpus: dict = field(default_factory=dict)  # worker -> its GPU ("" on the CPU)
    times: dict = field(default_factory=dict)  # worker -> WorkerTimes, once it is done

    def add(self, rec: CaseRecord) -> None:
        self.records.append(rec)
        if rec.status != "pass":
            self.not_passing.append(rec)

    @property
    def failures(self) -> list:
        return self.not_passing

    @property
    def report_folders(self) -> int:
        return sum(1 for r in self.not_passing if r.report)

    def per_worker(self, now: float) -> dict:
        """worker -> (cases, cases per second since it was ready)."""
        out = {}
        for w, t0 in sorted(self.started.items()):
            n = sum(1 for r in self.records if r.worker == w)
            out[w] = (n, n / max(now - t0, 1e-9))
        return out

    def rate_line(self, now: float) -> str:
        parts = []
        for w, (n, rate) in self.per_worker(now).items():
            where = f"GPU {self.gpus[w]}" if self.gpus.get(w) else f"worker {w} (CPU)"
            parts.append(f"{where}: {n} cases, {rate:.2f} cases/s")
        return "; ".join(parts)

    def distribution(self) -> dict:
        """label name -> Counter of label values, over every case judged."""
        dist: dict = {}
        for r in self.records:
            for k, v in r.labels.items():
                dist.setdefault(k, Counter())[v] += 1
        return dist

    def parameter_counts(self) -> dict:
        """(parameter, wrapper) -> Counter of who ran the calls that passed it."""
        out: dict = {}
        for r in self.records:
            for name, wrapper, who in r.parameters:
                out.setdefault((name, wrapper), Counter())[who] += 1
        return out

    def to_dict(self, now: float) -> dict:
        return {
            "cases": len(self.records),
            "parameters": {f"{n} on {w}": dict(c) for (n, w), c in sorted(self.parameter_counts().items())},
            "statuses": dict(Counter(r.status for r in self.records)),
            "workers": {str(w): {"gpu": self.gpus.get(w, ""), "cases": n, "cases_per_s": round(rate, 3)}
                        for w, (n, rate) in self.per_worker(now).items()},
            "distribution": {k: dict(sorted(c.items())) for k, c in self.distribution().items()},
            "failures_by_dimension": self.failures_by_dimension(),
            "report_folders": self.report_folders,
            "times": {str(w): asdict(t) for w, t in sorted(self.times.items())},
            "failures": [asdict(r) for r in self.failures],
        }

    def failures_by_dimension(self) -> dict:
        """label name -> {value: [cases not passing, cases]}, as the sweep's summary has
        it for its grid's dimensions (here the labels the soak draws under)."""
        out: dict = {}
        for r in self.records:
            for k, v in r.labels.items():
                cell = out.setdefault(k, {}).setdefault(v, [0, 0])
                cell[0] += r.status != "pass"
                cell[1] += 1
        return {k: dict(sorted(v.items())) for k, v in out.items()}

    def total_times(self) -> WorkerTimes:
        total = WorkerTimes()
        for t in self.times.values():
            total.add(t)
        return total


def failure_lines(by_dimension: dict) -> list[str]:
    """The dimensions' values where cases did not pass: "failed/judged" each, as the
    sweep's summary shows (values without a failure are left out)."""
    lines = []
    for name, cells in by_dimension.items():
        bad = [f"{v} {f}/{n}" for v, (f, n) in sorted(cells.items(), key=lambda kv: (-kv[1][0], kv[0])) if f]
        if bad:
            lines.append(f"  {name:>11}: {', '.join(bad)}")
    return lines


def parameter_lines(counts: dict, a_module=None, b_module=None) -> list[str]:
    """Per optional parameter x wrapper that may take it (features.py), how many calls
    passed it and who ran them; one that no call passed says why, from A's and B's
    signatures when given."""
    lines = []
    for f in features.FEATURES:
        for function in f.functions:
            wrapper = envelope.WRAPPERS.get(function, function)
            c = counts.get((f.name, wrapper), Counter())
            n = sum(c.values())
            if n:
                who = ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                lines.append(f"  {f.name} on {wrapper}: {n} calls ({who})")
                continue
            takes = [side for side, m in (("A", a_module), ("B", b_module))
                     if m is not None and features.accepts(m, f, function)]
            why = (f"{' and '.join(takes)} take{'s' if len(takes) == 1 else ''} it: not drawn" if takes
                   else "neither A's nor B's wrapper takes it")
            lines.append(f"  {f.name} on {wrapper}: 0 calls ({why})")
    return lines


def distribution_lines(dist: dict) -> list[str]:
    lines = []
    for name, counter in dist.items():
        items = ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"  {name:>11}: {items}")
    return lines


# --------------------------------------------------------------------------- the session

PROGRESS_EVERY_S = 10.0


def run_inline(plan: WorkerPlan, tally: Tally, interrupted: Interrupts, progress: Callable[[], None]) -> None:
    """One worker in this process (the CPU default, or a single GPU)."""
    import os

    tally.started[plan.worker] = time.time()
    tally.gpus[plan.worker] = os.environ.get("CUDA_VISIBLE_DEVICES", "0") if plan.device == "cuda" else ""

    def emit(rec: CaseRecord) -> None:
        tally.add(rec)
        progress()

    times = tally.times.setdefault(plan.worker, WorkerTimes())
    try:
        run_worker(plan, emit, lambda: interrupted.asked, times=times)
    except KeyboardInterrupt:
        pass  # the second Ctrl-C: the case in flight is abandoned, the summary follows
    except ContextLost as exc:
        # One process, one CUDA context: nothing more can run in it.
        tally.add(CaseRecord(plan.worker, "-", {}, "crash", 0.0, line=f"the CUDA context is lost, soak stopped: {exc}"))
        progress()


# --------------------------------------------------------------------------- several workers

_LOAD = None  # a worker process's side-stream load, made at its first contended case


def judge_batch(configs: list, job, times, extras: list) -> list[dict]:
    """A pool worker's judge (pool.Job.judge): contended cases (``extras`` True) through
    the batch engine under the side-stream load (``_run_batch``), the others without it;
    every case recorded as the sweep records it. Triton's compiles and loads in this
    process are added to ``times.seconds`` under TRITON_KEYS."""
    global _LOAD

    rows: dict = {}
    with _loads(job.device) as loads:
        for contended in (False, True):
            cases = [c for c, extra in zip(configs, extras) if bool(extra) == contended]
            if not cases:
                continue
            context = None
            if contended:
                if _LOAD is None:
                    _LOAD = _side_load()
                context = _LOAD.enqueue
            rows.update((r["case_id"], r) for r in judge_and_record(cases, job.a, job.b, job.device, job.folder, times,
                                                                     context=context, reports=job.reports))
    for key, value in zip(TRITON_KEYS, (loads.compile_seconds, loads.compiled, loads.load_seconds, loads.cached)):
        times.seconds[key] = times.seconds.get(key, 0.0) + value
    return [rows[c.case_id] for c in configs]


TRITON_KEYS = ("triton compile s", "triton compiled", "triton load s", "triton loaded")


def run_pool(plan: WorkerPlan, envs: list, tally: Tally, interrupted: Interrupts, progress: Callable[[], None],
             case_timeout: float) -> None:
    """Several workers on pool.py: this process draws (``plan``'s stream) and hands the
    cases out in batches (contended ones in batches of their own), compiling ahead here when
    ``plan.compile_workers``; each worker judges and records its batch; a worker that
    dies is replaced and the cases it held become crash records (pool.py)."""
    from collections import deque


    start = time.time()
    for w in range(len(envs)):
        tally.started[w] = start
    stream = draws(plan.seed, plan.worker, plan.max_tokens, plan.max_topk,
                   plan.contend_every if plan.device == "cuda" else 0, 0, plan.fresh_every, plan.prefill_share,
                   registry.feature_plan(plan.a, plan.b))
    ahead = None
    if plan.device == "cuda" and plan.compile_workers:
        ahead = precompile.Ahead(plan.a, plan.b, precompile.device_target(), plan.compile_workers)

    total = WorkerTimes(counted=plan.device == "cuda" and _has_listener(), interpreter=plan.device != "cuda")
    held: dict = {}  # case id -> Draw, handed out and not yet recorded
    window: list[Draw] = []
    drawn = [0]

    def refill():
        if interrupted.asked or time.time() >= plan.deadline:
            return None
        room = LOOKAHEAD - len(window)
        if plan.max_cases is not None:
            room = min(room, plan.max_cases - drawn[0])
        for _ in range(max(0, room)):
            d = next(stream)
            if ahead is not None:
                ahead.submit(d.config)
            window.append(d)
            drawn[0] += 1
        if not window:
            return None
        ready = [d for d in window if ahead is None or ahead.ready(d.config)]
        if not ready:
            t0 = time.perf_counter()
            assert ahead is not None
            ahead.wait_any(timeout=0.25)
            total.wait_s += time.perf_counter() - t0
            return []
        taken = {id(d) for d in ready}
        window[:] = [d for d in window if id(d) not in taken]
        for d in ready:
            held[d.config.case_id] = d
        return [batch for _, batch in _batches(ready, plan.batch)]

    def on_rows(rows, wid, gpu, secs):
        tally.gpus[wid] = gpu
        total.run_s += sum(v for k, v in secs.items() if k not in TRITON_KEYS) - secs.get(TRITON_KEYS[0], 0.0) \
            - secs.get(TRITON_KEYS[2], 0.0)
        total.compile_s += secs.get(TRITON_KEYS[0], 0.0)
        total.compiled += int(secs.get(TRITON_KEYS[1], 0))
        total.load_s += secs.get(TRITON_KEYS[2], 0.0)
        total.loaded += int(secs.get(TRITON_KEYS[3], 0))
        for row in rows:
            d = held.pop(row["case_id"])
            tally.add(_from_row(dataclasses.replace(plan, worker=wid), d, row, 0.0))
        progress()

    def on_lost(d, message, status, wid, gpu):
        held.pop(d.config.case_id, None)
        row = lost_case_row(d.config, plan.a, plan.b, message, Path(plan.folder), plan.device, status, plan.reports)
        tally.add(_from_row(dataclasses.replace(plan, worker=wid), d, row, 0.0))
        progress()

    pool = Pool(Job(plan.a, plan.b, plan.device, plan.folder, judge="remap_ab.soak.run:judge_batch", reports=plan.reports),
                envs, case_timeout, on_rows=on_rows, on_lost=on_lost)
    try:
        pool.run(deque(), refill)
    except KeyboardInterrupt:
        pass  # the second Ctrl-C: the cases in flight are abandoned, the summary follows
    finally:
        if ahead is not None:
            total.ahead = ahead.summary()
            ahead.close()
        tally.times[0] = total
