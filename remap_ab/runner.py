"""Run one case: inputs → every implementation → the oracle's reference → verdict.

Uninitialised memory is poisoned while an implementation runs (torch's
``fill_uninitialized_memory`` with deterministic algorithms on), so a lane or count the
kernel forgot to write reads as a loud sentinel instead of passing by luck.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Optional

import torch

from remap_ab import backend, oracle, registry
from remap_ab.compare import Output, Reference, Verdict, compare
from remap_ab.config import CaseConfig
from remap_ab.errors import RemapABError
from remap_ab.inputs import CaseInputs, check_inputs, generate_inputs


@contextlib.contextmanager
def poisoned_empty():
    """torch.empty and friends return sentinel-filled memory inside this block."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    _set_deterministic(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        _set_deterministic(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # torch.use_deterministic_algorithms also mirrors the flag into inductor's config,
    # importing torch._inductor to do so: ~5 s per process on the H200 image, for a
    # compiler remap-ab never uses. The C-level switch is all the poisoning reads.
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_implementation(impl: registry.Implementation, config: CaseConfig, inputs: CaseInputs, schedule=None) -> Output:
    """One implementation on one case; an exception becomes an ``error`` output.

    ``schedule`` is an optional context manager factory (see ``schedule.py``) that
    wraps the call, e.g. to permute the interpreter's programs."""
    contract = impl.order_contract(config)
    device = inputs.device
    try:
        with poisoned_empty(), (schedule() if schedule else contextlib.nullcontext()):
            _sync(device)
            start = time.perf_counter()
            out, counts = impl(config, inputs)
            _sync(device)
            seconds = time.perf_counter() - start
    except Exception as exc:  # a broken implementation is a verdict, not a crash
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        return Output(impl.name, None, None, contract, error=message[:500])
    return Output(impl.name, out, counts, contract, seconds=seconds)


def reference(config: CaseConfig, inputs: CaseInputs) -> Reference:
    size, rank, interleave = config.effective_dcp
    lanes, valid = oracle.remap(
        inputs.req_id,
        inputs.block_table,
        inputs.token_indices,
        block_size=config.block_size,
        dcp_size=size,
        dcp_rank=rank,
        interleave=interleave,
        prefill_request_ids=inputs.prefill_request_ids if config.has_prefill else None,
        prefill_starts=inputs.prefill_starts if config.has_prefill else None,
    )
    out = oracle.compact_rows(lanes, valid) if config.compacts else lanes
    return Reference(lanes=lanes, valid=valid, out=out, counts=valid.sum(dim=1, dtype=torch.int32))


@dataclass
class CaseResult:
    config: CaseConfig
    inputs: CaseInputs
    a: Output
    b: Output
    reference: Reference
    verdict: Verdict
    oracle: Optional[Output] = None

    @property
    def case_id(self) -> str:
        return self.config.case_id

    def outputs(self) -> dict[str, Output]:
        outs = {self.a.name: self.a, self.b.name: self.b}
        if self.oracle is not None:
            outs["oracle"] = self.oracle
        return outs


def run_case(
    config: CaseConfig,
    a: str = "old",
    b: str = "new",
    *,
    device: Optional[str] = None,
    inputs: Optional[CaseInputs] = None,
    schedule=None,
) -> CaseResult:
    """Run ``config`` through implementations ``a`` and ``b`` and judge them against
    the oracle (SPEC §7). ``inputs`` defaults to the case's generated inputs."""
    dev = backend.select(device)
    if inputs is None:
        inputs = generate_inputs(config, device=dev)
    else:
        check_inputs(config, inputs)
        inputs = inputs.to(dev)
    impl_a, impl_b = registry.get(a), registry.get(b)
    out_a = run_implementation(impl_a, config, inputs, schedule)
    out_b = run_implementation(impl_b, config, inputs, schedule)
    ref = reference(config, inputs)
    # The oracle also runs through its public API, so the wrappers' plumbing
    # (delegation, return shapes) is checked against the direct reference too.
    out_o = run_implementation(registry.get("oracle"), config, inputs)
    verdict = compare(
        config.case_id, out_a, out_b, ref, compacted=config.compacts, counts_returned=config.counts_returned
    )
    if out_o.error is None and (not torch.equal(out_o.out, ref.out)):
        raise RemapABError(f"internal: the oracle's API disagrees with its reference on case {config.case_id}; please file a bug")
    return CaseResult(config, inputs, out_a, out_b, ref, verdict, oracle=out_o)
