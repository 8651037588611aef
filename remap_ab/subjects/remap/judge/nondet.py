"""Nondeterminism characterisation: run each case many times per implementation and
count the distinct outputs it produced.

What a "run" is depends on where the kernels execute:
- on a GPU, a plain call, either on a quiet device or while a side stream keeps the
  device busy with a large matrix product (a busy device can hide the old kernel's
  race, so both conditions are measured);
- on the CPU (Triton interpreter), a call whose programs run in a permuted order
  (``schedule.py``): row-major, reversed, tiles reversed, tiles rotated and seeded
  random shuffles. The interpreter itself never races, so the permutation is what
  plays the part of the GPU's scheduler.

Per run two things are hashed: the valid counts, and the whole output tensor as
ordered bytes (the compacted prefix in the order written, then the -1 tail). The
failure rule (``judge``):
- valid counts that vary between runs are always a failure (sums are order-free);
- an implementation whose order contract promises column order (a single tile, e.g.
  the new kernel at power-of-two K) must produce exactly one distinct output;
- a tiled implementation's multiplicity (old everywhere, new at K=384) is reported,
  not failed: the SPEC allows it;
- an error, or an output outside the SPEC's contract (wrong count, wrong set, tail not
  -1), is a failure too, checked against the oracle for every distinct output.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from remap_ab.bench.charts import bar_chart, pivot
from remap_ab.errors import InternalError, UsageError
from remap_ab.interpreter.schedule import interpreter_schedule
from remap_ab.status import Repeatability
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, check_fits, generate_inputs, tensor_sha256
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import call
from remap_ab.subjects.remap.judge.compare import Output, compare
from remap_ab.subjects.remap.judge.runner import reference

CPU_CONDITIONS = ("schedules",)
GPU_CONDITIONS = ("quiet", "contended")

# The adversarial schedules every CPU characterisation starts with; random shuffles
# (one per seed) fill the remaining runs.
FIXED_SCHEDULES = (("row_major", 0), ("reversed", 0), ("tiles_reversed", 0), ("tiles_rotated", 1))


@dataclass(frozen=True)
class Run:
    """One call of an implementation: a label and the context it runs in."""

    label: str
    context: Callable[[], contextlib.AbstractContextManager]


def cpu_schedule_runs(runs: int) -> list[Run]:
    """``runs`` interpreter schedules: the fixed adversaries first, then random seeds."""

    pairs = list(FIXED_SCHEDULES[:runs])
    pairs += [("random", seed) for seed in range(runs - len(pairs))]
    return [
        Run(f"{policy}:{seed}" if policy in ("random", "tiles_rotated") else policy,
            functools.partial(interpreter_schedule, policy, seed))
        for policy, seed in pairs
    ]


class SideStreamLoad:
    """Keeps the GPU busy while a kernel under test runs: each ``enqueue()`` queues
    bf16 matrix products on a separate stream, so the next launch on the current
    stream competes with them for the multiprocessors."""

    def __init__(self, size: int = 8192, products: int = 2, device: str = "cuda"):
        self.stream = torch.cuda.Stream(device=device)
        with torch.cuda.stream(self.stream):
            self.a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
            self.b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
            self.c = torch.empty(size, size, device=device, dtype=torch.bfloat16)
        self.products = products

    @contextlib.contextmanager
    def enqueue(self):
        with torch.cuda.stream(self.stream):
            for _ in range(self.products):
                torch.mm(self.a, self.b, out=self.c)
        yield


def gpu_runs(condition: str, runs: int, load: Optional[SideStreamLoad] = None) -> list[Run]:
    if condition == "quiet":
        return [Run(f"quiet:{i}", contextlib.nullcontext) for i in range(runs)]
    if condition == "contended":
        if load is None:
            raise InternalError("the contended condition needs a SideStreamLoad")
        return [Run(f"contended:{i}", load.enqueue) for i in range(runs)]
    raise UsageError(f"condition {condition!r} is not one of {', '.join(GPU_CONDITIONS)}")


def digest(t: Optional[torch.Tensor]) -> str:
    """A short hash of a tensor (``inputs.tensor_sha256``: dtype, shape and bytes in
    memory order); None hashes as "none"."""
    return "none" if t is None else tensor_sha256(t)[:16]


@dataclass
class Multiplicity:
    """What one implementation produced over all runs of one case under one condition."""

    condition: str
    impl: str
    config: CaseConfig
    ordered: bool  # the implementation promises column order (single tile)
    path: str  # the order contract's phrase, e.g. "single tile (K=2048)"
    runs: int = 0
    outputs: Counter = field(default_factory=Counter)  # output hash -> runs that produced it
    counts: Counter = field(default_factory=Counter)  # counts hash -> runs
    labels: dict = field(default_factory=dict)  # output hash -> first run label that produced it
    errors: list = field(default_factory=list)  # "label: message"
    contract_failures: list = field(default_factory=list)  # one line per distinct output outside the SPEC

    @property
    def distinct_outputs(self) -> int:
        return len(self.outputs)

    @property
    def distinct_counts(self) -> int:
        return len(self.counts)

    @property
    def topk_class(self) -> str:
        return equivalence_class(self.config)

    def judge(self) -> tuple[Repeatability, str]:
        """("ok" | "reported" | "FAIL", why) — the failure rule of the module doc.
        Every broken rule is named, the headline ones first."""
        broken = []
        if self.ordered and self.distinct_outputs > 1:
            broken.append(
                f"promises column order ({self.path}) but produced {self.distinct_outputs} distinct outputs "
                f"in {self.runs} runs"
            )
        if self.distinct_counts > 1:
            broken.append(f"valid counts varied: {self.distinct_counts} distinct in {self.runs} runs")
        if self.errors:
            broken.append(f"raised in {len(self.errors)} of {self.runs} runs: {self.errors[0]}")
        if self.contract_failures:
            broken.append(f"{len(self.contract_failures)} distinct output(s) break the SPEC: {self.contract_failures[0]}")
        if broken:
            return Repeatability.FAIL, "; ".join(broken)
        if not self.ordered:
            return Repeatability.REPORTED, f"tiled ({self.path}): {self.distinct_outputs} distinct outputs in {self.runs} runs"
        return Repeatability.OK, f"{self.path}: one output in {self.runs} runs"

    def row(self) -> dict:
        status, why = self.judge()
        c = self.config
        return {
            "condition": self.condition,
            "class": self.topk_class,
            "topk": c.topk,
            "tokens": c.tokens,
            "impl": self.impl,
            "path": self.path,
            "runs": self.runs,
            "distinct_outputs": self.distinct_outputs,
            "distinct_counts": self.distinct_counts,
            "status": status,
            "why": why,
            "case_id": c.case_id,
        }

    def to_dict(self) -> dict:
        return {
            **self.row(),
            "config": self.config.to_dict(),
            "output_hashes": dict(self.outputs),
            "first_run_of_output": dict(self.labels),
            "count_hashes": dict(self.counts),
            "errors": list(self.errors),
            "contract_failures": list(self.contract_failures),
        }


def equivalence_class(config: CaseConfig) -> str:
    kind = "pow2" if config.topk_is_pow2 else "non-pow2"
    return f"K={config.topk} {kind}"


def nondet_cases(
    topks: Sequence[int], tokens: Sequence[int], *, dcp_size: int = 4, invalid_ratio: float = 0.3, seed: int = 0
) -> list[CaseConfig]:
    """The DCP compaction cases whose order the pull request made deterministic."""
    return [
        CaseConfig(
            mode="dcp", topk=k, tokens=t, dcp_size=dcp_size, dcp_rank=0, compact=True, counts=True,
            invalid_ratio=invalid_ratio, seed=seed,
        )
        for k in topks
        for t in tokens
    ]


def characterise(
    impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, runs: Sequence[Run], condition: str
) -> Multiplicity:
    """Call ``impl`` once per run and tally the distinct outputs and counts."""
    contract = impl.order_contract(config)
    m = Multiplicity(condition, impl.name, config, ordered=contract.ordered, path=contract.why)
    representatives: dict[str, Output] = {}
    for run in runs:
        m.runs += 1
        # The run's context (a schedule, a side-stream load) is entered first, so the
        # load is queued before torch's deterministic mode is switched on, and nothing
        # synchronises before the launch (that would drain the load).
        o = call(impl, config, inputs, context=run.context, settle=False)
        if o.error is not None:  # a broken implementation is a finding, not a crash
            m.errors.append(f"{run.label}: {' '.join(o.error.split())[:300]}")
            continue
        written = [f.message for f in o.guard[0].writes(0, impl.name)] if o.guard else []
        if written or o.findings:
            m.errors.append(f"{run.label}: {'; '.join(written + [f.message for f in o.findings])[:300]}")
            continue
        # Host copies: hashing needs them, and the oracle check walks rows in Python.
        assert o.out is not None  # a call without an error returned a tensor
        out = o.out.detach().to("cpu")
        counts = None if o.counts is None else o.counts.detach().to("cpu")
        out_hash = digest(out)
        m.outputs[out_hash] += 1
        m.counts[digest(counts)] += 1
        if out_hash not in representatives:
            m.labels[out_hash] = run.label
            representatives[out_hash] = Output(impl.name, out, counts, contract)
    _check_against_oracle(m, config, inputs.to("cpu"), representatives)
    return m


def _check_against_oracle(m: Multiplicity, config: CaseConfig, inputs: CaseInputs, reps: dict) -> None:
    """Every distinct output must still satisfy the SPEC (count, set, -1 tail, and the
    order the implementation's contract promises)."""
    if not reps:
        return
    ref = reference(config, inputs)
    for out_hash, output in reps.items():
        verdict = compare(config.case_id, output, output, ref, compacted=config.compacts,
                          counts_returned=config.counts_returned)
        if not verdict.passed:
            why = verdict.first.line() if verdict.first else verdict.status
            m.contract_failures.append(f"output {out_hash} (first from {m.labels[out_hash]}): {why}")


def run_nondet(
    configs: Sequence[CaseConfig],
    impl_names: Sequence[str],
    device: str,
    runs: int,
    conditions: Sequence[str],
    progress: Optional[Callable[[Multiplicity], None]] = None,
) -> list[Multiplicity]:
    """Characterise every (condition, case, implementation)."""
    if runs < 1:
        raise UsageError(f"runs={runs}: at least one run per case is needed")
    impls = [registry.get(name) for name in impl_names]
    allowed = CPU_CONDITIONS if device == "cpu" else GPU_CONDITIONS
    bad = [c for c in conditions if c not in allowed]
    if bad:
        raise UsageError(f"condition(s) {', '.join(bad)} do not exist on {device}; choose from {', '.join(allowed)}")
    load = SideStreamLoad() if "contended" in conditions else None
    for config in configs:
        check_fits(config, device)
    case_inputs = [generate_inputs(config, device=device) for config in configs]  # the same under every condition
    results = []
    for condition in conditions:
        plan = cpu_schedule_runs(runs) if device == "cpu" else gpu_runs(condition, runs, load)
        for config, inputs in zip(configs, case_inputs):
            for impl in impls:
                m = characterise(impl, config, inputs, plan, condition)
                results.append(m)
                if progress:
                    progress(m)
    return results


def failures(results: Sequence[Multiplicity]) -> list[Multiplicity]:
    return [m for m in results if m.judge()[0] == "FAIL"]


def table(results: Sequence[Multiplicity]):
    """One row per (condition, case, implementation), as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame([m.row() for m in results])


def summary_table(results: Sequence[Multiplicity]):
    """distinct/runs per token count, one row per (condition, class, implementation):
    the layout of the field notes ("K=2048 old 11/18/20/20")."""
    frame = table(results)
    frame["distinct"] = frame["distinct_outputs"].astype(str) + "/" + frame["runs"].astype(str)
    wide = frame.pivot(index=["condition", "class", "impl", "path"], columns="tokens", values="distinct")
    wide.columns = [f"T={t}" for t in wide.columns]
    return wide.reset_index()


# ----------------------------------------------------------------- remap-ab nondet

# ``remap-ab nondet --help``'s description (nondet_command.py's DESCRIPTION).
COMMAND_DOC = """Count the distinct outputs each implementation produces when a DCP compaction case
is run many times: on a GPU quiet and with a contending side stream, on the CPU under
permuted interpreter schedules (each schedule is one run).

Writes nondet.json, nondet.csv and a chart (nondet.png with matplotlib, else
nondet.svg) into <root>/nondet/<time>-<device>/ (or --out), beside the sweep's runs.
Exit status: 0 when the failure rule holds (an implementation that promises column
order — the new kernel as a single tile — gives exactly one output; counts never vary;
every output meets the SPEC), 1 when it is broken, 2 on bad input. Tiled implementations' multiplicity is reported, never failed.
"""

CPU_DEFAULT_TOKENS = "1,2,8"  # 256 tokens of the old kernel at K=2048 is ~20 s a run in the interpreter
GPU_DEFAULT_TOKENS = "1,2,8,256"

# The command's options that say which cases it studies, as data (nondet_command.py
# declares them): ``type`` "ints" is a comma-separated list of integers, "positive_int"
# a count of 1 or more, "float" a number.
OPTIONS: tuple[dict[str, Any], ...] = (
    dict(flag="--topk", dest="topk", default="2048,384", type="ints",
         help="K values: one class each (default 2048,384: single tile vs tiled)"),
    dict(flag="--tokens", dest="tokens", default=None, type="ints",
         help=f"token counts (default {GPU_DEFAULT_TOKENS} on GPU, {CPU_DEFAULT_TOKENS} on CPU)"),
)
AFTER_CONDITIONS: tuple[dict[str, Any], ...] = (  # declared after --runs and --conditions, as --help lists them
    dict(flag="--dcp-size", dest="dcp_size", default=4, type="positive_int",
         help="DCP world size, 2 or more: size 1 has no compaction to study (default 4; rank 0 is run)"),
    dict(flag="--invalid-ratio", dest="invalid_ratio", default=0.3, type="float", help="fraction of -1 lanes (default 0.3)"),
)


def check_options(values: dict) -> None:
    """UsageError for a study the options cannot make (before anything else is checked)."""
    if values["dcp_size"] < 2:
        raise UsageError(f"--dcp-size {values['dcp_size']}: nondet studies DCP compaction, which needs 2 or more ranks "
                         f"(size 1 delegates to the plain convert and compacts nothing)")


def default_ints(dest: str, on_gpu: bool) -> str:
    """The device's default of an "ints" option declared without one ("": none)."""
    return (GPU_DEFAULT_TOKENS if on_gpu else CPU_DEFAULT_TOKENS) if dest == "tokens" else ""


def study_cases(values: dict, seed: int) -> list[CaseConfig]:
    """The cases the options name (``values`` by dest, lists parsed)."""
    return nondet_cases(values["topk"], values["tokens"], dcp_size=values["dcp_size"],
                        invalid_ratio=values["invalid_ratio"], seed=seed)


def progress_line(m: Multiplicity) -> str:
    return (f"  {m.condition:>10} {m.topk_class:>15} T={m.config.tokens:<5} {m.impl:>6}: "
            f"{m.distinct_outputs}/{m.runs} distinct outputs, {m.distinct_counts} distinct counts")


def print_summary(results: Sequence[Multiplicity]) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 48):
        print()
        print("distinct outputs / runs (DCP compaction, the whole output hashed as ordered bytes):")
        print(summary_table(results).to_string(index=False))


def failure_line(m: Multiplicity) -> str:
    return f"FAIL {m.condition} {m.topk_class} T={m.config.tokens} {m.impl} (case {m.config.case_id}): {m.judge()[1]}"


def chart(out_dir, results: Sequence[Multiplicity], where: str):
    """nondet.png (or .svg): distinct outputs per case and implementation."""
    groups, values = pivot(results, lambda m: f"{m.condition} K={m.config.topk} T={m.config.tokens}",
                           lambda m: m.impl, lambda m: m.distinct_outputs)
    title = f"distinct outputs per case over {results[0].runs if results else 0} runs — {where}"
    return bar_chart(out_dir / "nondet", title, groups, values, "distinct outputs")
