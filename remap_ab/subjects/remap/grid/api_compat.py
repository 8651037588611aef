"""API compatibility of B with A: SPEC §1's two functions, parameter by parameter.

vLLM calls these wrappers by position and by keyword, so B must accept every call A
accepts: each of A's parameters, under the same name and with the same default. A parameter B adds needs a default (A's
callers never pass it); such an addition is reported, not failed (upstream added
``BLOCK_STRIDE_ROWS=None`` after #50365). A missing parameter, a changed default, a
parameter that moved or became positional- or keyword-only, or an added one without a
default fails the run: a run-level check, never a case's verdict. Positions: a
parameter without a default that moved fails (callers pass those by position); one
with a default that moved is reported (callers pass those by keyword).

Reads signatures with ``inspect.signature``; a function whose signature cannot be read
(a C extension, say) is said to be unchecked, never compatible. Needs no torch.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any, Optional

from remap_ab.subjects.remap.judge import registry

API = ("triton_convert_req_index_to_global_index", "triton_filter_and_convert_dcp_index")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class ApiDifference:
    """One difference between A's and B's signature of ``function``."""

    function: str
    parameter: str
    what: str  # missing, default, position, kind, added, added_required, unreadable
    fails: bool
    line: str

    def to_dict(self) -> dict:
        return asdict(self)


def _default(p: inspect.Parameter) -> str:
    return "no default" if p.default is inspect.Parameter.empty else f"default {p.default!r}"


def _same_default(x: Any, y: Any) -> bool:
    try:
        return type(x) is type(y) and bool(x == y)
    except Exception:  # an object whose == raises or is no bool: compare identity
        return x is y


def compare_signatures(function: str, a: inspect.Signature, b: inspect.Signature, a_name: str = "A",
                       b_name: str = "B") -> list[ApiDifference]:
    """Every difference of ``b`` from ``a`` that matters to a caller of ``a``."""
    out: list[ApiDifference] = []

    def add(param: str, what: str, fails: bool, text: str) -> None:
        out.append(ApiDifference(function, param, what, fails, f"{function}: {text}"))

    bp = b.parameters
    a_positional = [p.name for p in a.parameters.values() if p.kind in _POSITIONAL]
    b_positional = [p.name for p in bp.values() if p.kind in _POSITIONAL]
    b_takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in bp.values())
    b_takes_args = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in bp.values())
    through_kwargs = []  # A's parameters that reach B only through its **kwargs: one line for all
    for p in a.parameters.values():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        q = bp.get(p.name)
        if q is None:
            if b_takes_kwargs and p.kind in _BY_NAME:
                through_kwargs.append(p.name)
            else:
                add(p.name, "missing", True, f"{b_name} lacks parameter {p.name!r} ({a_name}: {_default(p)}): "
                    f"a call that passes it fails on {b_name}")
            continue
        if p.kind in _BY_NAME and q.kind not in _BY_NAME:
            add(p.name, "kind", True, f"{b_name}'s {p.name!r} cannot be passed by name ({a_name}'s can)")
        if p.kind in _POSITIONAL and q.kind not in _POSITIONAL:
            add(p.name, "kind", True, f"{b_name}'s {p.name!r} cannot be passed by position ({a_name}'s can)")
        if p.default is inspect.Parameter.empty and q.default is inspect.Parameter.empty:
            continue
        if p.default is inspect.Parameter.empty:
            add(p.name, "default", False, f"{b_name} gives {p.name!r} a {_default(q)} ({a_name}: none): every call "
                f"{a_name} accepts still works")
        elif q.default is inspect.Parameter.empty or not _same_default(p.default, q.default):
            add(p.name, "default", True, f"{p.name!r} has {_default(q)} in {b_name}, {_default(p)} in {a_name}: a call "
                f"that leaves it out means something else")
    if through_kwargs:
        also = " (and by position through its *args)" if b_takes_args else ""
        add(", ".join(through_kwargs), "kwargs", False,
            f"{b_name} has no parameter named {', '.join(through_kwargs)}; its **kwargs accepts "
            f"{'them' if len(through_kwargs) > 1 else 'it'} by name{also} (what it does with them is not checked)")
    for q in bp.values():
        if q.name in a.parameters or q.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if q.default is inspect.Parameter.empty:
            add(q.name, "added_required", True, f"{b_name} adds {q.name!r} without a default: {a_name}'s callers "
                f"never pass it")
        else:
            add(q.name, "added", False, f"{b_name} adds {q.name}={q.default!r} (reported, not failed: "
                f"{a_name}'s callers keep working)")
    # Positions: the first place where a call passing A's parameters by position would
    # bind one of them to another of B's (one line: every later one moves with it). A
    # parameter without a default is passed by position (SPEC §1's callers do): moved,
    # it fails; one with a default is passed by keyword in practice: reported.
    for i, name in enumerate(a_positional):
        there = b_positional[i] if i < len(b_positional) else None
        if there != name and name in bp:
            required = a.parameters[name].default is inspect.Parameter.empty
            where = f"{b_name} has {there!r} there" if there else f"{b_name} takes no parameter there"
            add(name, "position", required, f"{a_name}'s positional parameter {i + 1} is {name!r}; {where} "
                + ("(a call passing it by position binds to another parameter)" if required else
                   "(only a call passing it by position, not by keyword, binds elsewhere: reported, not failed)"))
            break
    return out


def _signature(fn) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def check_modules(a_module, b_module, a_name: str = "A", b_name: str = "B") -> list[ApiDifference]:
    """The differences of ``b_module``'s SPEC §1 functions from ``a_module``'s."""
    out: list[ApiDifference] = []
    for function in API:
        sa, sb = _signature(getattr(a_module, function)), _signature(getattr(b_module, function))
        if sa is None or sb is None:
            who = " and ".join(n for n, s in ((a_name, sa), (b_name, sb)) if s is None)
            out.append(ApiDifference(function, "", "unreadable", False,
                                     f"{function}: {who}'s signature cannot be read: API compatibility not checked"))
            continue
        out += compare_signatures(function, sa, sb, a_name, b_name)
    return out


def check(a: str, b: str) -> list[ApiDifference]:
    """``check_modules`` of two implementations by registry name."""

    impl_a, impl_b = registry.get(a), registry.get(b)
    return check_modules(impl_a.module, impl_b.module, a, b)


def summary_lines(differences: list, a: str, b: str) -> list[str]:
    """The run header's / summary's lines: one saying the outcome, one per difference.
    Takes ``ApiDifference`` values or their dicts (as run.json keeps them)."""
    diffs = [d if isinstance(d, dict) else d.to_dict() for d in differences]
    failing = [d for d in diffs if d["fails"]]
    unread = [d for d in diffs if d["what"] == "unreadable"]
    if failing:
        head = (f"api: FAIL — {b} does not accept every call {a} accepts "
                f"({len(failing)} incompatible parameter{'s' if len(failing) != 1 else ''})")
    elif unread:
        head = f"api: not checked for {len(unread)} function(s) (signature unreadable)"
    elif diffs:
        head = f"api: compatible — {b} accepts every call {a} accepts; differences reported:"
    else:
        head = f"api: identical — {b}'s SPEC §1 signatures are {a}'s"
    return [head] + [("  FAIL " if d["fails"] else "  note ") + d["line"] for d in diffs]


def fails(differences: list) -> bool:
    return any((d["fails"] if isinstance(d, dict) else d.fails) for d in differences)
