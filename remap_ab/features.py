"""The optional parameters of the wrappers, as data: what each is, how remap-ab
exercises it, what the oracle expects, and where it comes from (docs/spec.md §9, §10).

A later parameter is a new row of ``FEATURES`` (and, for its calls, a CaseConfig field
that turns it on). From A's and B's signatures, ``plan`` decides per feature:

- both accept it: the cases that use it run A against B against the oracle;
- one side accepts it: on those cases the other side is replaced by the oracle, so the
  side that has it is judged against the oracle, and the summary says how many;
- neither accepts it: those cases are not run, and the summary says how many;
- a case passing the value the parameter's absence means (BLOCK_STRIDE_ROWS equal to
  BLOCK_SIZE) is the same call without it: a side that lacks the parameter runs it so;
- a parameter of A's or B's wrappers that is neither SPEC §1's nor a row here is never
  exercised, and the header and the summary say "not exercised: NAME".

Reads signatures with ``inspect``; needs no torch.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Optional

CONVERT = "triton_convert_req_index_to_global_index"
DCP = "triton_filter_and_convert_dcp_index"

# SPEC §1's parameters at the #50365 merge: what every implementation is called with.
BASE_PARAMETERS = {
    CONVERT: ("req_id", "block_table", "token_indices", "BLOCK_SIZE", "NUM_TOPK_TOKENS", "BLOCK_N",
              "HAS_PREFILL_WORKSPACE", "prefill_workspace_request_ids", "prefill_workspace_starts",
              "return_valid_counts"),
    DCP: ("req_id", "block_table", "token_indices", "dcp_size", "dcp_rank", "cp_kv_cache_interleave_size",
          "BLOCK_SIZE", "NUM_TOPK_TOKENS", "BLOCK_N", "return_valid_counts", "compact_valid_to_front"),
}


@dataclass(frozen=True)
class Feature:
    """One optional wrapper parameter."""

    name: str  # the keyword the wrappers take
    functions: tuple  # the wrappers that take it
    field: str  # the CaseConfig field whose cases pass it
    exercise: str  # how remap-ab passes it
    expects: str  # what the oracle (and so every verdict) expects of it
    source: str  # where it comes from, with its date
    spec: str  # the SPEC section
    # The config field's value at which leaving the parameter out is the same call (the
    # wrapper's default means it): a side without the parameter runs such a case
    # without it. None: never.
    same_when_absent: Optional[str] = None

    def absent_is_same(self, config) -> bool:
        return self.same_when_absent is not None and getattr(config, self.field) == getattr(config,
                                                                                              self.same_when_absent)


FEATURES = (
    Feature(
        "BLOCK_STRIDE_ROWS", (CONVERT, DCP), "block_stride",
        "passed as the case's block_stride on either wrapper: the block size (a dense cache), packed strides "
        "(4096 @ block 64, 320 @ 256, 12 @ 4) and one where base * stride crosses INT32_MAX",
        "value = block_table[q, blk] * BLOCK_STRIDE_ROWS + offset_in_block in int32 (wrapping); None means "
        "BLOCK_SIZE",
        "vLLM #51718 (2026-08-21) and #54465 (2026-08-30; the stride into the DCP conversion too); "
        "vLLM main at 02a26fa06df2", "§9", same_when_absent="block_size"),
    Feature(
        "out", (CONVERT,), "out_buffers",
        "a caller-owned [T, K] int32 view handed in poisoned, inside a larger buffer whose other elements are "
        "checked afterwards",
        "every lane written with its SPEC §3 value; the tensor returned is the buffer given; nothing outside it "
        "written", "a fork of vLLM main (caller-owned outputs, kept at stable addresses for CUDA graphs)", "§10"),
    Feature(
        "valid_counts_out", (CONVERT,), "out_buffers",
        "with return_valid_counts, a caller-owned [T] int32 view holding garbage (as a reused buffer does), "
        "inside a larger checked buffer",
        "the counts of SPEC §4 (the wrapper zeroes the buffer where the tiled path accumulates into it); the "
        "tensor returned is the buffer given; nothing outside it written",
        "a fork of vLLM main, with out", "§10"),
)
BY_NAME = {f.name: f for f in FEATURES}


def uses(config) -> tuple[str, ...]:
    """The optional parameters a case passes (``call_arguments``' keys)."""
    names = []
    if config.block_stride:
        names.append("BLOCK_STRIDE_ROWS")
    if config.out_buffers and config.mode == "convert":
        names.append("out")
        if config.counts:
            names.append("valid_counts_out")
    return tuple(names)


def call_arguments(config, buffers=None, module=None) -> dict[str, Any]:
    """The keyword arguments of the optional parameters the case passes; ``buffers``
    (out_layout.py's ``CallerBuffers``) is where ``out`` / ``valid_counts_out`` come from.
    ``module``: the implementation called; a parameter it lacks is left out where that
    is the same call (``Feature.same_when_absent``)."""
    extra: dict[str, Any] = {}
    if config.block_stride:
        stride = BY_NAME["BLOCK_STRIDE_ROWS"]
        if module is None or not stride.absent_is_same(config) or _accepts(module, stride.name):
            extra["BLOCK_STRIDE_ROWS"] = config.block_stride
    if config.out_buffers and config.mode == "convert":
        if buffers is None:
            raise ValueError("a case with out_buffers is called with caller-owned buffers (call.py makes them)")
        extra["out"] = buffers.out
        if config.counts:
            extra["valid_counts_out"] = buffers.counts
    return extra


def _parameters(module, function: str) -> Optional[dict]:
    try:
        return dict(inspect.signature(getattr(module, function)).parameters)
    except (TypeError, ValueError, AttributeError):
        return None


def accepts(module, feature: Feature) -> bool:
    """Whether every wrapper of ``feature`` names its parameter (a ``**kwargs`` that
    might swallow it does not count: what it would do with it is unknown)."""
    return _accepts(module, feature.name)


@functools.cache
def _accepts(module, name: str) -> bool:  # asked on every call of a case that passes it
    for function in BY_NAME[name].functions:
        params = _parameters(module, function)
        if params is None or name not in params:
            return False
    return True


@dataclass(frozen=True)
class Plan:
    """What each side accepts, and the parameters no row of FEATURES knows."""

    a: str
    b: str
    a_accepts: tuple  # feature names
    b_accepts: tuple
    unknown: tuple  # ((side, function, parameter), ...)

    def runs(self, config) -> tuple[bool, bool]:
        """Whether A and B themselves run ``config`` (False: the oracle stands in)."""
        needed = [n for n in uses(config) if not BY_NAME[n].absent_is_same(config)]
        return all(n in self.a_accepts for n in needed), all(n in self.b_accepts for n in needed)

    def runnable(self, config) -> bool:
        return any(self.runs(config))

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "a_accepts": list(self.a_accepts), "b_accepts": list(self.b_accepts),
                "unknown": [list(u) for u in self.unknown]}


def plan_modules(a_module, b_module, a: str = "A", b: str = "B") -> Plan:
    known = {f.name for f in FEATURES}
    unknown = []
    for side, module in (("A", a_module), ("B", b_module)):
        for function, base in BASE_PARAMETERS.items():
            params = _parameters(module, function) or {}
            for name, p in params.items():
                if name in base or name in known or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                unknown.append((side, function, name))
    return Plan(a, b, tuple(f.name for f in FEATURES if accepts(a_module, f)),
                tuple(f.name for f in FEATURES if accepts(b_module, f)), tuple(unknown))


def _plural(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


# The line for features nobody uses: said in the summary, left out of a sweep's header.
QUIET_PREFIX = "features not exercised: "


def lines(p, configs: list) -> list[str]:
    """The header's and summary's lines: per feature how its calls ran, and every
    parameter that was not exercised. ``p`` is a Plan or its dict (run.json)."""
    d = p.to_dict() if isinstance(p, Plan) else p
    out, idle = [], []
    for f in FEATURES:
        using = [c for c in configs if f.name in uses(c)]
        same = sum(1 for c in using if f.absent_is_same(c))
        n = len(using) - same
        a_has, b_has = f.name in d["a_accepts"], f.name in d["b_accepts"]
        if a_has and b_has:
            how = f"A and B: {_plural(len(using))}, A vs B vs the oracle"
        elif b_has:
            how = f"B only: {_plural(n)} judged against the oracle (A, {d['a']}, lacks it)"
        elif a_has:
            how = f"A only: {_plural(n)} judged against the oracle (B, {d['b']}, lacks it)"
        elif n or same:
            how = f"neither A nor B accepts it: {_plural(n)} not run"
        else:  # no side takes it and no case asks for it: one line for all such
            idle.append(f.name)
            continue
        if same and not (a_has and b_has):
            how += (f"; {_plural(same)} passing it at the value its absence means ({f.field} = {f.same_when_absent}) "
                    f"{'run' if same != 1 else 'runs'} without it on the side that lacks it")
        out.append(f"feature {f.name}, {how}")
    if idle:
        out.append(f"{QUIET_PREFIX}{', '.join(idle)} (neither A nor B accepts them; no case passes them)")
    for side, function, name in d["unknown"]:
        out.append(f"not exercised: {name} ({side}'s {function} takes it; remap-ab has no row for it in "
                   f"remap_ab/features.py)")
    return out
