"""One case end to end: inputs -> the oracle, A and B -> comparisons and properties.

Two kinds of outcome, kept apart:

- a *mismatch* blames a side: A or B differs from the oracle (bit-exact, calls.EQUALITY);
- a *finding* is on a property (properties.py), which every side shares: the witness
  properties are checked on A's witnesses (which must equal the oracle's), the merge
  properties on A's and B's merged rows, and ``fused_equals_pair`` on A against B.

The oracle is plain Python, about a microsecond per entry: on a case of more than
``ORACLE_ROW_LIMIT`` rows it runs on the first and last ``ORACLE_ROW_LIMIT // 2`` rows
only (``CaseResult.oracle_rows`` says which), while A, B and the properties see every
row.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Optional

import torch

from remap_ab.subjects.topology import calls, properties
from remap_ab.subjects.topology.calls import Mismatch
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.inputs import TopologyInputs, generate
from remap_ab.subjects.topology.properties import Finding

ORACLE_ROW_LIMIT = 1024


@dataclass
class CaseResult:
    case: TopologyCase
    mismatches: list[tuple[str, Mismatch]] = field(default_factory=list)  # (side, first difference from the oracle)
    findings: list[tuple[str, Finding]] = field(default_factory=list)  # (side checked, finding)
    oracle_rows: str = "all"  # the rows compared with the oracle
    # What a report shows beside the mismatches: the inputs and both merged outputs (CPU).
    inputs: Optional[TopologyInputs] = None
    a_merged: Optional[torch.Tensor] = None
    b_merged: Optional[torch.Tensor] = None
    a_ms: float = 0.0  # A's merge call, wall milliseconds (its witnesses call not counted)
    b_ms: float = 0.0
    seconds: dict = field(default_factory=dict)  # phase -> seconds: gen, kernels, compare

    @property
    def equal(self) -> bool:
        return not self.mismatches

    def lines(self, a: str = "a", b: str = "b") -> list[str]:
        """The verdict as printed: the case, each mismatch and finding, and the replay line
        (naming ``a`` and ``b``, the implementations that ran)."""
        out = [f"case {self.case.key()}" + ("" if self.oracle_rows == "all" else f" (oracle on rows {self.oracle_rows})")]
        out += [f"  MISMATCH {side}: {m.describe(side, 'oracle')}" for side, m in self.mismatches]
        out += [f"  PROPERTY {f.describe()} (checked on {side})" for side, f in self.findings]
        if not self.mismatches and not self.findings:
            out.append("  A, B and the oracle agree bit for bit; every property holds")
        out.append(f"  replay: {self.case.replay_command(a, b)}")
        return out


class SideRaised(Exception):
    """Side ``side`` ("a" or "b") raised on a case: a verdict (ERROR) on that side."""

    def __init__(self, side: str, exc: BaseException):
        self.side, self.exc = side, exc
        super().__init__(f"{side.upper()} raised {type(exc).__name__}: {' '.join(str(exc).split())}")


def _side(side: str, fn):
    try:
        return fn()
    except Exception as exc:  # the implementation's failure, recorded as its verdict
        raise SideRaised(side, exc) from exc


def _timed(fn, device: str) -> tuple[torch.Tensor, float]:
    """``fn()`` and its wall milliseconds (the device's queue drained at both ends)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return out, (time.perf_counter() - start) * 1e3


def check_case(case: TopologyCase, device: str = "cpu", b_module: Optional[ModuleType] = None,
             a_module: Optional[ModuleType] = None) -> CaseResult:
    """Run the case on ``device``; ``b_module`` replaces B (a mutant, a user's kernel),
    ``a_module`` replaces A (a module with the pair's ``topology_witnesses`` and the
    entry point)."""
    result = CaseResult(case)
    clock = time.perf_counter()
    inputs = generate(case, device)
    result.seconds["gen"] = time.perf_counter() - clock
    clock = time.perf_counter()
    a_mod = a_module if a_module is not None else calls.module("a")
    b_mod = b_module if b_module is not None else calls.module("b")
    a_w = _side("a", lambda: calls.witnesses_of(a_mod, inputs, case))
    a_m, result.a_ms = _side("a", lambda: _timed(lambda: calls.call_module(a_mod, inputs, case), device))
    b_m, result.b_ms = _side("b", lambda: _timed(lambda: calls.call_module(b_mod, inputs, case), device))
    result.seconds["kernels"] = time.perf_counter() - clock
    clock = time.perf_counter()
    rows = torch.arange(case.rows)
    if case.rows > ORACLE_ROW_LIMIT:
        half = ORACLE_ROW_LIMIT // 2
        rows = torch.cat([rows[:half], rows[-half:]])
        result.oracle_rows = f"0..{half - 1} and {case.rows - half}..{case.rows - 1}"
    sample = dataclasses.replace(case, rows=len(rows), explicit_learned=None, explicit_lens=None)
    picked = TopologyInputs(learned=inputs.learned[rows.to(inputs.learned.device)].cpu(),
                            context_lens=inputs.context_lens[rows.to(inputs.learned.device)].cpu())
    oracle_w = calls.witnesses("oracle", picked, sample)
    oracle_m = calls.call("oracle", picked, sample)
    for side, output, got, want in (("a", "witnesses", a_w, oracle_w), ("a", "merged", a_m, oracle_m), ("b", "merged", b_m, oracle_m)):
        mismatch = calls.first_mismatch(output, got.cpu()[rows], want)
        if mismatch is not None:
            result.mismatches.append((side, dataclasses.replace(mismatch, row=int(rows[mismatch.row]) if mismatch.row >= 0 else -1)))
    result.findings += [("a", f) for f in properties.check_witnesses(case, inputs, a_w)]
    result.findings += [("a", f) for f in properties.check_merge(case, inputs, a_m)]
    result.findings += [("b", f) for f in properties.check_merge(case, inputs, b_m)]
    result.findings += [("a, b", f) for f in properties.check_fused_equals_pair(a_m, b_m)]
    result.inputs = TopologyInputs(learned=inputs.learned.cpu(), context_lens=inputs.context_lens.cpu())
    result.a_merged, result.b_merged = a_m.cpu(), b_m.cpu()
    result.seconds["compare"] = time.perf_counter() - clock
    return result
