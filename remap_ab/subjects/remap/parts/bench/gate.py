"""Nothing is timed that is wrong: the agreement gate every timed pair passes first.

Before a graph is captured, the implementations run eagerly on the very tensors the
graph will use and are judged against the oracle; after timing, the outputs the
graph's last call wrote are judged again. A disagreement refuses the timing.

Judging is ``compare`` (compare.py), the sweep's rule. For large cases its tiled-order
search walks rows in Python, so the device-side proof of passing (the sweep's, exact
in one direction: it only ever says "passes" when ``compare`` would) is tried first,
and ``compare`` on host copies decides whenever the proof does not hold.
"""

from __future__ import annotations

from typing import Optional

from remap_ab.errors import DisagreementError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.compare import Output, Reference, Verdict, compare, proof_of_pass
from remap_ab.subjects.remap.judge.runner import reference, run_implementation


def _on_cpu(o: Output) -> Output:
    move = lambda t: None if t is None else t.detach().to("cpu")  # noqa: E731
    return Output(o.name, move(o.out), move(o.counts), o.contract, error=o.error, seconds=o.seconds)


def judge_on_cpu(config: CaseConfig, inputs: CaseInputs, a: Output, b: Output) -> Verdict:
    """compare() on host copies (its tiled-order check walks rows in Python)."""
    ref = reference(config, inputs.to("cpu"))
    return compare(config.case_id, _on_cpu(a), _on_cpu(b), ref, compacted=config.compacts,
                   counts_returned=config.counts_returned)


def judge(config: CaseConfig, inputs: CaseInputs, a: Output, b: Output, ref: Optional[Reference] = None) -> Verdict:
    """The verdict for ``a`` and ``b`` on ``inputs``: the device proof when it holds for
    both, else ``compare`` on host copies."""
    if a.error is None and b.error is None:
        ref = ref if ref is not None else reference(config, inputs)
        try:
            flags = [proof_of_pass(o, ref, config) for o in (a, b)]
        except Exception:  # a proof that cannot run decides nothing
            flags = [None, None]
        if all(f is not None for f in flags) and all(bool(f) for f in flags):
            # Both proven on the device: compare checks the rest (the calls' findings).
            return compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned,
                           proven=(True, True), differing_rows=0)
    return judge_on_cpu(config, inputs, a, b)


def agreement_gate(config: CaseConfig, inputs: CaseInputs, a: registry.Implementation, b: registry.Implementation) -> Verdict:
    """Run ``a`` and ``b`` on exactly these inputs and judge both against the oracle;
    raise DisagreementError (refusing the timing) unless the verdict passes. An
    allowed difference — the compacted order of a tiled kernel — passes."""
    out_a = run_implementation(a, config, inputs)
    out_b = run_implementation(b, config, inputs)
    verdict = judge(config, inputs, out_a, out_b)
    if not verdict.passed:
        raise DisagreementError(refusal(a.name, b.name, config, verdict))
    return verdict


def refusal(a: str, b: str, config: CaseConfig, verdict: Verdict) -> str:
    return (f"refusing to time {a} vs {b} on case {config.case_id} ({config.cli_args()}): "
            f"{verdict.first.line() if verdict.first else verdict.status}")
