"""The optional parameters of the wrappers, as data: what each is, which wrapper takes
it under which keyword, how remap-ab exercises it, what the oracle expects, and where
it comes from (docs/spec.md §9, §10).

A later parameter is a new row of ``FEATURES`` (and, for its calls, a CaseConfig field
that turns it on); a wrapper may take one under another keyword (``Feature.keywords``:
the DCP wrapper's ``valid_counts`` is the convert wrapper's ``valid_counts_out``).
Whether a side takes a parameter is decided per wrapper, from A's and B's signatures,
and a case calls one wrapper (its mode: convert or dcp; the DCP wrapper at dcp_size 1
too, whatever it delegates to). Per parameter × wrapper, ``Plan`` decides:

- both sides' wrapper takes it: the calls that pass it run A against B against the oracle;
- one side's wrapper takes it: on those calls the other side is replaced by the oracle,
  so the side that has it is judged against the oracle, and the summary says how many;
- neither side's wrapper takes it: those calls are not run, and the summary says how many;
- a case passing the value the parameter's absence means (BLOCK_STRIDE_ROWS equal to
  BLOCK_SIZE) is the same call without it: a side that lacks the parameter runs it so;
- a parameter of A's or B's wrappers that is neither SPEC §1's nor a keyword of a row
  here for that wrapper is never exercised, and the header and the summary say
  "not exercised: NAME" with the wrapper.

Reads signatures with ``inspect``; needs no torch.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Optional

CONVERT = "triton_convert_req_index_to_global_index"
DCP = "triton_filter_and_convert_dcp_index"
# A wrapper in a line: the case mode that calls it.
WRAPPER = {CONVERT: "convert", DCP: "dcp"}

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

    name: str  # what remap-ab calls it (the convert wrapper's keyword)
    functions: tuple  # the wrappers that may take it
    field: str  # the CaseConfig field whose cases pass it
    exercise: str  # how remap-ab passes it
    expects: str  # what the oracle (and so every verdict) expects of it
    source: str  # where it comes from, with its date
    spec: str  # the SPEC section
    # The config field's value at which leaving the parameter out is the same call (the
    # wrapper's default means it): a side without the parameter runs such a case
    # without it. None: never.
    same_when_absent: Optional[str] = None
    # Other keywords a wrapper takes it under, ((function, (keyword, ...)), ...), tried
    # after ``name`` (SPEC: the same meaning under another name).
    aliases: tuple = ()

    def absent_is_same(self, config) -> bool:
        return self.same_when_absent is not None and getattr(config, self.field) == getattr(config,
                                                                                              self.same_when_absent)

    def keywords(self, function: str) -> tuple[str, ...]:
        """The keywords ``function`` may take this parameter under, in the order looked for."""
        if function not in self.functions:
            return ()
        return (self.name, *dict(self.aliases).get(function, ()))


FEATURES = (
    Feature(
        "BLOCK_STRIDE_ROWS", (CONVERT, DCP), "block_stride",
        "passed as the case's block_stride to the wrapper the case calls: the block size (a dense cache), packed "
        "strides (4096 @ block 64, 320 @ 256, 12 @ 4) and one where base * stride crosses INT32_MAX",
        "value = block_table[q, blk] * BLOCK_STRIDE_ROWS + offset_in_block in int32 (wrapping); None means "
        "BLOCK_SIZE",
        "vLLM #51718 (2026-08-21) and #54465 (2026-08-30; the stride into the DCP conversion too); "
        "vLLM main at 02a26fa06df2 (on convert only); forks with it on the DCP wrapper too", "§9",
        same_when_absent="block_size"),
    Feature(
        "out", (CONVERT, DCP), "out_buffers",
        "a caller-owned [T, K] int32 view handed in poisoned, inside a larger buffer whose other elements are "
        "checked afterwards",
        "every lane written with its SPEC §3 value (§5: in place, or compacted with a -1 tail); the tensor "
        "returned is the buffer given; nothing outside it written",
        "forks of vLLM main (caller-owned outputs, kept at stable addresses for CUDA graphs); one fork's backend "
        "names it output= on convert; another fork's DCP wrapper takes out=", "§10",
        aliases=((CONVERT, ("output",)),)),
    Feature(
        "valid_counts_out", (CONVERT, DCP), "out_buffers",
        "with return_valid_counts, a caller-owned [T] int32 view holding garbage (as a reused buffer does), "
        "inside a larger checked buffer",
        "the counts of SPEC §4 (the wrapper zeroes the buffer where the tiled path accumulates into it); the "
        "tensor returned is the buffer given; nothing outside it written",
        "forks of vLLM main, with out; a fork's DCP wrapper names it valid_counts=", "§10",
        aliases=((DCP, ("valid_counts",)),)),
)
BY_NAME = {f.name: f for f in FEATURES}


def wrapper(config) -> str:
    """The wrapper a case calls (the DCP wrapper at dcp_size 1 too: what it delegates
    to is its own business)."""
    return CONVERT if config.mode == "convert" else DCP


def uses(config) -> tuple[str, ...]:
    """The optional parameters a case passes (by ``Feature.name``; ``call_arguments``
    gives each the keyword the wrapper called takes)."""
    names = []
    if config.block_stride:
        names.append("BLOCK_STRIDE_ROWS")
    if config.out_buffers:
        names.append("out")
        if config.counts and getattr(config, "counts_out", True):
            names.append("valid_counts_out")
    return tuple(names)


def call_arguments(config, buffers=None, module=None) -> dict[str, Any]:
    """The keyword arguments of the optional parameters the case passes; ``buffers``
    (out_layout.py's ``CallerBuffers``) is where ``out`` / ``valid_counts_out`` come from.
    ``module``: the implementation called; each parameter goes under the keyword its
    wrapper takes (``Feature.keywords``), and one it lacks is left out where that is the
    same call (``Feature.same_when_absent``)."""
    function = wrapper(config)
    extra: dict[str, Any] = {}
    for name in uses(config):
        f = BY_NAME[name]
        keyword = f.name if module is None else keyword_of(module, name, function)
        if keyword is None:
            if f.absent_is_same(config):
                continue
            keyword = f.name  # the call says what is missing (a TypeError the verdict shows)
        if name == "BLOCK_STRIDE_ROWS":
            extra[keyword] = config.block_stride
        else:
            if buffers is None:
                raise ValueError("a case with out_buffers is called with caller-owned buffers (call.py makes them)")
            extra[keyword] = buffers.out if name == "out" else buffers.counts
    return extra


def _parameters(module, function: str) -> Optional[dict]:
    try:
        return dict(inspect.signature(getattr(module, function)).parameters)
    except (TypeError, ValueError, AttributeError):
        return None


@functools.cache  # asked on every call of a case that passes it
def keyword_of(module, name: str, function: str) -> Optional[str]:
    """The keyword under which ``module``'s ``function`` takes feature ``name`` (None:
    it does not; a ``**kwargs`` that might swallow it does not count: what it would do
    with it is unknown)."""
    params = _parameters(module, function)
    if params is None:
        return None
    return next((k for k in BY_NAME[name].keywords(function) if k in params), None)


def accepts(module, feature: Feature, function: Optional[str] = None) -> bool:
    """Whether ``module``'s ``function`` takes ``feature`` (``function`` None: every
    wrapper of the feature does)."""
    functions = feature.functions if function is None else (function,)
    return all(keyword_of(module, feature.name, fn) is not None for fn in functions)


@dataclass(frozen=True)
class Plan:
    """What each side's wrappers take, and the parameters no row of FEATURES knows."""

    a: str
    b: str
    a_accepts: tuple  # ((feature name, function), ...)
    b_accepts: tuple
    unknown: tuple  # ((side, function, parameter), ...)
    # ((side, feature name, function, keyword), ...) where a side takes one under an alias
    keywords: tuple = ()

    def runs(self, config) -> tuple[bool, bool]:
        """Whether A and B themselves run ``config`` (False: the oracle stands in)."""
        function = wrapper(config)
        needed = [(n, function) for n in uses(config) if not BY_NAME[n].absent_is_same(config)]
        return all(k in self.a_accepts for k in needed), all(k in self.b_accepts for k in needed)

    def runnable(self, config) -> bool:
        return any(self.runs(config))

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "a_accepts": [list(k) for k in self.a_accepts],
                "b_accepts": [list(k) for k in self.b_accepts], "unknown": [list(u) for u in self.unknown],
                "keywords": [list(k) for k in self.keywords]}


def plan_modules(a_module, b_module, a: str = "A", b: str = "B") -> Plan:
    unknown: list = []
    renamed: list = []
    taken: dict[str, list] = {"A": [], "B": []}
    for side, module in (("A", a_module), ("B", b_module)):
        for function, base in BASE_PARAMETERS.items():
            known = {k for f in FEATURES for k in f.keywords(function)}
            params = _parameters(module, function) or {}
            for name, p in params.items():
                if name in base or name in known or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                unknown.append((side, function, name))
            for f in FEATURES:
                keyword = keyword_of(module, f.name, function)
                if keyword is not None:
                    taken[side].append((f.name, function))
                    if keyword != f.name:
                        renamed.append((side, f.name, function, keyword))
    return Plan(a, b, tuple(taken["A"]), tuple(taken["B"]), tuple(unknown), tuple(renamed))


def _plural(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


# The line for parameters nobody takes: said in the summary, left out of a sweep's header.
QUIET_PREFIX = "features not exercised: "


def _plan_of(d: dict) -> Plan:
    """A Plan from its dict; run.json from before per-wrapper plans lists bare feature
    names (taken on every wrapper of the feature)."""

    def pairs(accepts: list) -> tuple:
        out: list = []
        for k in accepts:
            out += [(k, fn) for fn in BY_NAME[k].functions] if isinstance(k, str) and k in BY_NAME else [tuple(k)]
        return tuple(out)

    return Plan(d["a"], d["b"], pairs(d["a_accepts"]), pairs(d["b_accepts"]), tuple(map(tuple, d["unknown"])),
                tuple(map(tuple, d.get("keywords", []))))


def lines(p, configs: list) -> list[str]:
    """The header's and summary's lines: per parameter × wrapper how its calls ran, and
    every parameter that was not exercised. ``p`` is a Plan or its dict (run.json)."""
    plan = p if isinstance(p, Plan) else _plan_of(p)
    renamed = {(side, name, fn): kw for side, name, fn, kw in plan.keywords}
    out: list[str] = []
    idle: dict[str, list] = {}  # feature -> the wrappers where nobody takes it and no call passes it
    for f in FEATURES:
        for function in f.functions:
            w = WRAPPER[function]
            using = [c for c in configs if f.name in uses(c) and wrapper(c) == function]
            runnable = [c for c in using if plan.runnable(c)]
            blocked = len(using) - len(runnable)  # another parameter they pass stops them
            same = sum(1 for c in runnable if f.absent_is_same(c))
            n = len(runnable) - same
            a_has, b_has = (f.name, function) in plan.a_accepts, (f.name, function) in plan.b_accepts
            names = "".join(f" ({side}'s keyword: {renamed[(side, f.name, function)]})" for side in "AB"
                            if (side, f.name, function) in renamed)
            head = f"feature {f.name} on {w}{names}, "
            if not using and (a_has or b_has):
                who = "A and B take" if a_has and b_has else ("B takes" if b_has else "A takes")
                out.append(f"{head}{who} it: no call passes it, not exercised")
                continue
            if a_has and b_has:
                how = f"A and B: {_plural(len(runnable))}, A vs B vs the oracle"
            elif b_has:
                how = f"B only: {_plural(n)} judged against the oracle (A, {plan.a}, lacks it on {w})"
            elif a_has:
                how = f"A only: {_plural(n)} judged against the oracle (B, {plan.b}, lacks it on {w})"
            elif using:
                how = f"neither A's nor B's {w} wrapper takes it: {_plural(n + blocked)} not run"
                blocked = 0
            else:  # no side takes it there and no case asks for it: one line for all such
                idle.setdefault(f.name, []).append(w)
                continue
            if same and not (a_has and b_has):
                how += (f"; {_plural(same)} passing it at the value its absence means ({f.field} = "
                        f"{f.same_when_absent}) {'run' if same != 1 else 'runs'} without it on the side that lacks it")
            if blocked:
                how += f"; {_plural(blocked)} not run (another parameter they pass is taken by neither side there)"
            out.append(head + how)
    if idle:
        named = ", ".join(f"{name} ({', '.join(ws)})" for name, ws in idle.items())
        out.append(f"{QUIET_PREFIX}{named} (neither A nor B takes them on those wrappers; no case passes them)")
    for side, function, name in plan.unknown:
        out.append(f"not exercised: {name} on {WRAPPER.get(function, function)} ({side}'s {function} takes it; "
                   f"SPEC gives it no meaning there and remap_ab/subjects/remap/judge/features.py has no row for it)")
    return out


def failure_lines(failed: list, ran: Optional[list] = None) -> list[str]:
    """Per parameter × wrapper, how many of the ``failed`` configs passed it (at a value
    other than its absence's), out of how many of those that ``ran``: the summary's
    pointer from failures to a parameter (where every call passing it failed, that one
    is the suspect)."""

    def passing(configs: list, f: Feature, function: str) -> int:
        return sum(1 for c in configs if f.name in uses(c) and wrapper(c) == function and not f.absent_is_same(c))

    out = []
    for f in FEATURES:
        for function in f.functions:
            n = passing(failed, f, function)
            if n:
                of = f" of {passing(ran, f, function)}" if ran is not None else ""
                calls = "call" if n == 1 and not of else "calls"
                out.append(f"feature {f.name} on {WRAPPER[function]}: {n}{of} {calls} passing it failed")
    return out
