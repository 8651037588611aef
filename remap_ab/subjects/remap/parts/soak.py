"""The remap's soak (``Subject.soak``): what ``remap-ab soak`` draws beyond the grid and
how a batch of draws is judged; the driver (``remap_ab/soak/``) runs it.

The sweep runs a fixed grid; a soak draws configurations the grid never holds: K any
multiple of BLOCK_N up to 4096, T up to 16384 (the envelope's row classes, each scale
and parity alike), every wrapper path (plain convert with
and without counts and prefill rows, the DCP wrapper at size 1, DCP 2/4/8 compacting
or in place, with and without counts), any rank and interleave, every backend's block
size, every block-table kind, row layout, memory layout (layouts.py) and kind of
negative id, the models' index widths more often than others, and a fresh input seed
each time. Block sizes, strides (``BLOCK_STRIDE_ROWS``), caller-owned buffers, DCP
sizes and interleaves, the models' widths and the prefill steps come from the call
envelope (envelope.toml); each optional parameter is drawn on every wrapper that may
take it (features.py), left out where neither A's nor B's wrapper takes it
(``takeable``), and the summary counts per parameter x wrapper the calls that passed it.

On a GPU every ``contend_every``-th case runs while a side stream keeps the device busy
with matrix products (``nondet.SideStreamLoad``): a busy device changes how the
programs of a row interleave, which is what the old kernel's race depends on. Every
case runs in batches through the batch engine (few host syncs; contended ones in
batches of their own, each call queued behind the load), recorded as the sweep
records a case (``recording.py``). On the CPU (the batched Triton interpreter) the
cases run one at a time and K is scaled to T (a case's lanes within a budget).

A stream opens with a pairwise cover of the call envelope's dimensions (envelope.py:
every declared pair and combination in some 45 draws, their other fields drawn as
usual), and then half the fresh draws aim at a declared pair it has not drawn; the
summary says how many of the declared pairs the draws exercised and which they never
did.

A new variant (config.variant_key: the constexprs and the layout) is a new Triton
compile on a GPU, so there one draw in ``fresh_every`` brings a new variant and the
others re-draw the data of a recent one (``draws_from``); the driver compiles the
coming variants ahead (``SoakPlan.compile_ahead``).

A case that does not pass gets its replay command (``remap-ab replay`` of its report
folder, else ``remap-ab run`` of its options; with the ``PYTHONPATH`` a custom module
needs); a case whose run raises is a crash (with a crash report under the same cap).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remap_ab.errors import ConfigError, UsageError, exception_line
from remap_ab.status import Status
from remap_ab.subject import JudgeSettings, ProcessUnusable, SoakPlan, SoakSettings, bucket, soak_random
from remap_ab.subjects.remap.case.config import NEGATIVE_KINDS, ROW_LAYOUTS, TABLE_KINDS, CaseConfig
from remap_ab.subjects.remap.case.layouts import LAYOUT_NAMES
from remap_ab.subjects.remap.grid import envelope
from remap_ab.subjects.remap.judge import features, registry
from remap_ab.subjects.remap.judge.nondet import SideStreamLoad
from remap_ab.subjects.remap.report.recording import Judge, lost_case_row

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
STRIDE_SHARE = 0.5  # of which DENSE_SHARE pass the block size itself (a dense cache), the rest a packed stride
DENSE_SHARE = 0.4
BUFFERS_SHARE = 0.5
# Of the draws with caller buffers and counts, this share hands out= alone (the wrapper
# returning counts of its own).
OUT_ALONE_SHARE = 0.5
# A stream opens with a pairwise cover of the call envelope (envelope.toml's
# [[dimension]]s; envelope.greedy_cover), then a share of the fresh draws aims at a
# declared pair the stream has not drawn yet: its values are drawn, the rest as usual.
# So a short soak reaches every pair the implementations take.
TARGET_SHARE = 0.5
TARGET_TRIES = 3  # a pair missed this often is aimed at no more
COVER_TRIES = 10  # candidates per case of the cover a stream opens with (envelope.greedy_cover)

MAX_TOPK = 4096
# T is drawn by the envelope's row classes (each scale and parity alike, envelope.toml's
# [[row_class]]), up to the largest row count of the envelope, on every device.
GPU_MAX_TOKENS = 16384
CPU_MAX_TOKENS = 16384
# On the CPU a case costs about its lanes (T x K; ~1 s per million lanes on 2 cores), so
# a draw's K is scaled to its T: at most CPU_MAX_LANES lanes (K down to the smallest tile,
# 32, at 16384 rows: half a million lanes), and a row class above DECODE_ROWS is drawn
# PREFILL_CLASS_WEIGHT as often as one below. A prefill step (the envelope's prefill rows)
# is the rare large draw, in CPU_PREFILL_SHARE of draws, its K scaled to CPU_LARGE_LANES.
CPU_MAX_LANES = 1 << 17
DECODE_ROWS = 1024
PREFILL_CLASS_WEIGHT = 0.5
CPU_LARGE_LANES = 1 << 23
# Prefill steps (issue 32; the envelope's prefill rows): backends route every token of a
# step through the call, up to max_num_batched_tokens rows. Drawn in this share of draws.
GPU_PREFILL_SHARE = 0.02
CPU_PREFILL_SHARE = 0.005
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
# A variant (the compile-relevant fields: config.variant_key) is reused by the
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
    def case_id(self) -> str:
        return self.config.case_id

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


def k_bucket(k: int) -> str:
    return bucket(k, (128, 512, 1024, 2048, MAX_TOPK))


def k_kind(c: CaseConfig) -> str:
    if c.topk == c.block_n:
        return "one tile (K == BLOCK_N)"
    return "power of two" if c.topk_is_pow2 else "not a power of two"


def tokens_bucket(t: int) -> str:
    return bucket(t, (1, 8, 64, 512, 4096))


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


def _paths(want: dict) -> list[tuple[str, Any]]:
    """(path, DCP size or None) of every wrapper path whose wrapper, DCP size, compaction
    and counts are ``want``'s (the envelope's dimension values; a dimension not in
    ``want`` is free)."""
    out = []
    for name, spec in PATHS.items():
        for size in (_dcp_sizes(spec) if spec["mode"] == "dcp" else (None,)):
            values = {"wrapper": spec["mode"], "dcp_size": "-" if size is None else str(size),
                      "compaction": "on" if size and size > 1 and spec.get("compact") else "off",
                      "counts": "on" if spec["counts"] else "off"}
            if all(want.get(k, v) == v for k, v in values.items()):
                out.append((name, size))
    return out


def _rows(rng: random.Random, max_tokens: int, label: Any = None) -> int:
    """T from a row class of the envelope (``label``'s, else any alike), at most ``max_tokens``."""
    classes = [r for r in envelope.load().row_classes if r.low <= max_tokens]
    if not classes:  # an envelope without row classes: log-uniform up to the cap
        return min(max_tokens, max(1, int(math.exp(rng.uniform(0.0, math.log(max_tokens + 1))))))
    chosen = [r for r in classes if r.label == label] or classes
    # Scaled by cost: a class above the decode batches (1024 rows) half as often as one of them.
    r = rng.choices(chosen, weights=[1.0 if c.low <= DECODE_ROWS else PREFILL_CLASS_WEIGHT for c in chosen])[0]
    high = min(r.high, max_tokens)
    held = [t for t in (rng.randint(r.low, high), rng.randint(r.low, high) | 1, rng.randint(r.low, high) & ~1)
            if r.holds(t) and t <= high]
    return held[0] if held else high


def draw(rng: random.Random, max_tokens: int, max_topk: int = MAX_TOPK, prefill_share: float = 0.0,
         max_lanes: int = 0, want: Any = None) -> Draw:
    """One fresh configuration (every field drawn from ``rng``). ``max_lanes`` (0: none):
    K scaled down so that T x K stays within it (a prefill step's within CPU_LARGE_LANES).
    ``want``: values of the envelope's dimensions to draw (a pair aimed at)."""
    want = dict(want or {})
    if want.get("valid_counts_out") == "passed":
        want.update(out="passed", counts="on")
    options = _paths(want) or _paths({})
    path = rng.choice(sorted({name for name, _ in options}, key=list(PATHS).index))  # each path alike
    size = rng.choice([z for name, z in options if name == path])
    spec = PATHS[path]
    env = envelope.load()
    tokens, step = _tokens(rng, max_tokens, prefill_share, want.get("rows"))
    data = _data_fields(rng, tokens, bool(spec.get("prefill")), want.get("zero_rows"))
    if max_lanes:
        budget = CPU_LARGE_LANES if step else max_lanes
        max_topk = max(min(BLOCK_NS), min(max_topk, budget // tokens))
    topk, block_n = _width(rng, max_topk)
    block_size = rng.choice(env.block_sizes)
    wrapper = spec["mode"]
    block_stride = 0
    stride_class = want.get("BLOCK_STRIDE_ROWS")
    if stride_class is None and rng.random() < STRIDE_SHARE:
        stride_class = "dense" if rng.random() < DENSE_SHARE else "non-dense"
    packed = [x for x in env.strides if x.block_stride != x.block_size]
    if wrapper in envelope.taking("block_stride"):
        if stride_class == "dense":
            block_stride = block_size
        elif stride_class == "non-dense" and packed:
            stride = rng.choice(packed)
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
    out = want.get("out")
    if out is None:
        out = "passed" if rng.random() < BUFFERS_SHARE else "absent"
    if any(env.out_buffers) and wrapper in envelope.taking("out_buffers") and out == "passed":
        fields["out_buffers"] = True
        alone = {"passed": False, "absent": True}.get(want.get("valid_counts_out", ""))
        fields["counts_out"] = not (rng.random() < OUT_ALONE_SHARE if alone is None else alone)
    if spec["mode"] == "dcp":
        fields["dcp_size"] = size
        fields["dcp_rank"] = rng.randrange(size)
        interleaves = (1, *INTERLEAVES, *env.interleaves, block_size)
        fields["interleave"] = rng.choice([i for i in interleaves if block_size % i == 0])
        fields["compact"] = spec.get("compact", rng.random() < 0.5)  # size 1 ignores it
    fields.update(data)
    try:
        return Draw(CaseConfig(**fields), path)
    except ConfigError:  # a parameter this CaseConfig does not take on this wrapper
        return Draw(CaseConfig(**{**fields, "out_buffers": False}), path)


def _tokens(rng: random.Random, max_tokens: int, prefill_share: float = 0.0, rows: Any = None) -> tuple[int, bool]:
    """(T, whether it is a prefill step): T from the envelope's row classes (``rows``:
    that class), in ``prefill_share`` of draws a prefill step (beyond the cap too)."""
    tokens = _rows(rng, max_tokens, rows)
    if prefill_share and rng.random() < prefill_share:
        return rng.choice(prefill_steps()), True
    return tokens, False


def _data_fields(rng: random.Random, tokens: int, prefill: bool, zero_rows: Any = None) -> dict[str, Any]:
    """The fields that change a case's data but not its compiled kernel, for T = ``tokens``;
    ``zero_rows``: the envelope's value to draw ("forced": a row whose count is 0)."""
    fields: dict[str, Any] = dict(
        tokens=tokens,
        num_reqs=rng.randint(1, 8),
        negatives=rng.choice(NEGATIVE_KINDS),
        table=rng.choice(TABLE_KINDS),
        row_layout=rng.choice(ROW_LAYOUTS),
        seed=rng.randrange(2**31),
    )
    invalid = rng.choice((0.0, 1.0, round(rng.uniform(0.0, 1.0), 2)))
    if zero_rows == "forced" and invalid < 1.0 and not (fields["row_layout"] == "mixed" and tokens >= 3):
        if tokens >= 3 and rng.random() < 0.5:
            fields["row_layout"] = "mixed"
        else:
            invalid = 1.0
    elif zero_rows == "not forced":
        invalid = min(invalid, 0.99)
        if fields["row_layout"] == "mixed":
            fields["row_layout"] = "uniform"
    fields["invalid_ratio"] = invalid
    fields["out_of_range"] = 0.0 if rng.random() < 0.5 else round(rng.uniform(0.0, 1.0 - invalid), 2)
    if prefill:
        fields["prefill_fraction"] = round(rng.uniform(0.05, 1.0), 2)
    return fields


def redraw(rng: random.Random, base: Draw, max_tokens: int, prefill_share: float = 0.0, max_lanes: int = 0) -> Draw:
    """``base``'s variant (path, widths, DCP, everything compiled) with fresh data."""
    tokens, step = _tokens(rng, max_tokens, prefill_share)
    if max_lanes and tokens * base.config.topk > (CPU_LARGE_LANES if step else max_lanes):
        tokens = max(1, (CPU_LARGE_LANES if step else max_lanes) // base.config.topk)
    fields = _data_fields(rng, tokens, base.config.has_prefill)
    for name in ("tokens", "num_reqs"):  # one row, one request: a variant of its own (config.variant_key)
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
    function = features.wrapper(config)
    taken = set(plan.a_accepts) | set(plan.b_accepts)
    # Those nobody takes first (a stride is kept where only the buffers cannot be passed).
    names = sorted(features.uses(d.config), key=lambda name: (name, function) in taken)
    for name in names:
        config = config.replace(**{features.BY_NAME[name].field: _DEFAULTS[features.BY_NAME[name].field]})
        if plan.runnable(config):
            break
    return Draw(config, d.path, d.contended)


def draws(seed: int, worker: int, max_tokens: int, max_topk: int = MAX_TOPK, contend_every: int = 0,
          generation: int = 0, fresh_every: int = 1, prefill_share: float = 0.0, plan: features.Plan | None = None,
          max_lanes: int = 0):
    """Worker ``worker``'s endless, reproducible stream of draws for soak seed ``seed``
    (``subject.soak_random``; a restarted worker's ``generation`` gives it a stream of
    its own): ``draws_from`` that stream."""
    return draws_from(soak_random(seed, worker, generation), max_tokens, max_topk, contend_every, fresh_every,
                      prefill_share, plan, max_lanes)


def draws_from(rng: random.Random, max_tokens: int, max_topk: int = MAX_TOPK, contend_every: int = 0,
               fresh_every: int = 1, prefill_share: float = 0.0, plan: features.Plan | None = None,
               max_lanes: int = 0):
    """The endless stream of draws from ``rng``. Every ``contend_every``-th draw (0:
    none) is marked to run under contention. One draw in ``fresh_every`` is a fresh
    variant: first the cases of a pairwise cover of the envelope's dimensions (their
    values; the rest drawn), then TARGET_SHARE of them aimed at a declared pair or
    combination the stream has not drawn; the others re-draw the data of one of the RECENT_VARIANTS latest (1:
    every draw fresh). ``prefill_share``: the share of draws that are a prefill step (the
    envelope's prefill rows, beyond ``max_tokens``). ``plan`` (features.py's, for A and
    B): each draw ``takeable`` by them. ``max_lanes``: ``draw``'s."""
    env = envelope.load()
    # The stream opens with a pairwise cover of the envelope (a fresh one per stream: its
    # values, every other field drawn), so a short soak holds every pair A and B take.
    cover = envelope.greedy_cover([], env, seed=rng.randrange(2**31), tries=COVER_TRIES) if env.dimensions else []
    held: set = set()
    missed: Counter = Counter()  # a pair aimed at and not drawn (A and B may take no call holding it)
    recent: list[Draw] = []
    n = 0
    while True:
        target: Any = None
        if n % fresh_every == 0 or not recent:
            want = None
            if cover:
                want = cover.pop(0)
            else:
                # The combinations first (each of three values or more: rarer by chance than a pair).
                aims = [c for c in env.combinations if c.name not in held and missed[c] < TARGET_TRIES]
                if not aims and env.dimensions:
                    aims = [p for p in env.pairs if p not in held and missed[p] < TARGET_TRIES]
                target = rng.choice(aims) if aims and rng.random() < TARGET_SHARE else None
            if isinstance(target, envelope.Combination):
                want = {dim: rng.choice(allowed) for dim, allowed in target.values}
            elif target is not None:
                want = dict(target)
            d = draw(rng, max_tokens, max_topk, prefill_share, max_lanes, want)
            recent = (recent + [d])[-RECENT_VARIANTS:]
        else:
            d = redraw(rng, rng.choice(recent), max_tokens, prefill_share, max_lanes)
        n += 1
        if contend_every and n % contend_every == 0:
            d = Draw(d.config, d.path, contended=True)
        d = takeable(d, plan)
        if env.dimensions:
            classes = env.classify(d.config, plan)
            held |= envelope.held_pairs(classes) | {c.name for c in env.combinations if c.holds(classes)}
            if target is not None and (target.name if isinstance(target, envelope.Combination) else target) not in held:
                missed[target] += 1
        yield d


# --------------------------------------------------------------------------- judging

# The soak's contending products: 4096-square ones still outlast the call queued behind
# each, and a contended batch waits for all of them at its sync; nondet's 8192-square
# default is eight times the work.
SOAK_LOAD_SIZE = 4096

_LOAD = None  # this process's side-stream load, made at its first contended case


def _side_load():
    return SideStreamLoad(size=SOAK_LOAD_SIZE, device="cuda")


def _context_lost(device: str) -> bool:
    if device != "cuda":
        return False
    import torch

    try:
        torch.cuda.synchronize()
    except Exception:
        return True
    return False


def judge(configs: list, settings: JudgeSettings, times: Any, extras: list) -> list[dict]:
    """A batch of draws judged and recorded as the sweep does it (``recording.Judge``:
    a row each, a report for the first failing cases of each class): the contended
    ones (``extras`` True) with every call of A and B launched right after matrix
    products are queued on the side stream (the load queues up faster than it drains:
    no launch finds the device idle), the others without it. A batch that raises is
    judged case by case; a case that raises alone is a crash; a lost CUDA context
    raises ProcessUnusable (every later case would fail for that reason alone)."""
    global _LOAD

    folder = Path(str(settings.folder))

    def stop_if_context_lost(exc, cases) -> None:
        if _context_lost(settings.device):
            raise ProcessUnusable(f"the CUDA context is lost: the batch engine raised {exception_line(exc)[:300]} "
                                  f"on a batch of {len(cases)} cases") from None

    def crash(config, exc) -> dict:
        return lost_case_row(config, settings.a, settings.b, exception_line(exc)[:400], folder, settings.device,
                             Status.CRASH, settings.reports)

    engine = Judge(settings, before_split=stop_if_context_lost, on_crash=crash)
    rows: dict = {}
    for contended in (False, True):
        cases = [c for c, extra in zip(configs, extras) if bool(extra) == contended]
        if not cases:
            continue
        context = None
        if contended:
            if _LOAD is None:
                _LOAD = _side_load()
            context = _LOAD.enqueue
        rows.update((row["case_id"], row) for row, _ in engine.judge(cases, context=context))
    return [rows[c.case_id] for c in configs]


# --------------------------------------------------------------------------- what the summary says


def passed_parameters(config: CaseConfig, plan: features.Plan) -> list:
    """[name, wrapper, who ran it] of every optional parameter ``config`` passes."""
    runs_a, runs_b = plan.runs(config)
    who = "A and B" if runs_a and runs_b else "A" if runs_a else "B" if runs_b else "neither"
    return [[name, config.mode, who] for name in features.uses(config)]


def parameter_counts(facts: list) -> dict:
    """(parameter, wrapper) -> Counter of who ran the calls that passed it."""
    out: dict = {}
    for f in facts:
        for name, wrapper, who in f.get("parameters", ()):
            out.setdefault((name, wrapper), Counter())[who] += 1
    return out


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


# --------------------------------------------------------------------------- the plan


def plan(settings: SoakSettings) -> SoakPlan:
    """The remap's soak for ``settings`` (UsageError for a --max-topk below one tile;
    ImplementationError for an A or B that does not load)."""
    o = settings.options
    on_gpu = settings.device == "cuda"
    max_topk = o.get("max_topk") or MAX_TOPK
    if max_topk < min(BLOCK_NS):
        raise UsageError(f"--max-topk {max_topk}: K must allow at least one tile of {min(BLOCK_NS)}; give 32 or more")
    impl_a, impl_b = registry.get(settings.a), registry.get(settings.b)  # a bad name: one line, before any worker
    max_tokens = o.get("max_tokens") or (GPU_MAX_TOKENS if on_gpu else CPU_MAX_TOKENS)
    fresh_every = o.get("fresh_every") or (GPU_FRESH_EVERY if on_gpu else 1)
    contend_every = (o.get("contend_every") or 0) if on_gpu else 0
    compile_workers = o.get("compile_workers") or 0
    # Prefill steps beyond the default cap; an explicit --max-tokens is a hard cap.
    prefill_share = 0.0 if o.get("max_tokens") else (GPU_PREFILL_SHARE if on_gpu else CPU_PREFILL_SHARE)
    # The CPU's cost budget per case (K scaled to T); an explicit --max-tokens leaves K free.
    max_lanes = 0 if on_gpu or o.get("max_tokens") else CPU_MAX_LANES
    features_plan = registry.feature_plan(settings.a, settings.b)
    where = (f"{settings.workers} worker(s) on GPU(s) {','.join(settings.gpus)}" if on_gpu
             else f"CPU (the Triton interpreter, batched): {settings.workers} worker(s), "
                  f"T capped at {max_tokens}" + ("" if o.get("max_tokens") else
                                                 f", K scaled to T (at most {max_lanes:,} lanes a case; a prefill "
                                                 f"step's {CPU_LARGE_LANES:,}; --max-tokens to change)"))
    describe = (f"{where}; K up to {max_topk}, T up to {max_tokens}"
                + (f", every {contend_every}th case under a contending side stream" if contend_every else "")
                + (f", one draw in {fresh_every} a fresh variant" if fresh_every > 1 else "")
                + (f", {compile_workers} compile-ahead process(es)" if on_gpu and compile_workers else ""))
    repeat = [("--max-tokens", str(o["max_tokens"]))] if o.get("max_tokens") else []
    repeat += [("--fresh-every", str(fresh_every))] if o.get("fresh_every") else []

    def summary(facts: list) -> tuple[list, dict]:
        counts = parameter_counts(facts)
        covered = envelope.pair_coverage(f["envelope"] for f in facts if f.get("envelope"))
        lines = ["optional parameters passed, per wrapper (calls; who ran them, the oracle standing in for a side "
                 "that lacks one):", *parameter_lines(counts, impl_a.module, impl_b.module), covered.line()]
        return lines, {"parameters": {f"{n} on {w}": dict(c) for (n, w), c in sorted(counts.items())},
                       "coverage": covered.to_dict()}

    return SoakPlan(
        draws=lambda rng: draws_from(rng, max_tokens, max_topk, contend_every, fresh_every, prefill_share,
                                     features_plan, max_lanes),
        describe=describe, repeat=repeat, batch=(o.get("batch") or 16) if on_gpu else 1,
        judge="remap_ab.subjects.remap.parts.soak:judge", compile_ahead=compile_workers if on_gpu else 0,
        facts=lambda d: {"parameters": passed_parameters(d.config, features_plan),
                         "envelope": envelope.load().classify(d.config, features_plan)}, summary=summary)
