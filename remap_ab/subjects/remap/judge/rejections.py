"""Calls a wrapper must reject: SPEC §6's preconditions as data (``rejections.toml``).

A rejection case is a valid case (``base``, a ``CaseConfig``) called through its wrapper
with call-level changes the configuration itself refuses: a scalar argument replaced
(``BLOCK_N=256`` for K=384), a tensor changed (``req_id`` one row longer, int64, a
missing prefill tensor). A and B each get the call; ``compare.judge_rejection`` turns
what they did into the verdict: where A rejects, B must reject with the same exception
type (or a subclass of it); a B that accepts fails the ``rejects`` check (with
``memcheck`` on the CPU, the out-of-bounds accesses its call made are findings too);
where A accepts, the verdict says so and judges nothing.

A grid may emit rejection cases: ``rejection_from_fields`` maps configuration fields
that ``CaseConfig`` refuses because a wrapper would (``topk`` not a multiple of
``block_n``, ``dcp_rank`` not below ``dcp_size``, ``dcp_size`` < 1, ``interleave`` not
dividing ``block_size``) to a valid base plus the changed call.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from remap_ab import command_line, runtime
from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import PrivateInputs, calling, synchronize
from remap_ab.subjects.remap.judge.compare import judge_rejection

REJECTIONS_FILE = "rejections.toml"
CONVERT = "triton_convert_req_index_to_global_index"
DCP = "triton_filter_and_convert_dcp_index"
TENSOR_ARGS = ("req_id", "block_table", "token_indices", "prefill_workspace_request_ids", "prefill_workspace_starts")
SCALAR_ARGS = {
    CONVERT: ("BLOCK_SIZE", "NUM_TOPK_TOKENS", "BLOCK_N", "HAS_PREFILL_WORKSPACE", "return_valid_counts"),
    DCP: ("dcp_size", "dcp_rank", "cp_kv_cache_interleave_size", "BLOCK_SIZE", "NUM_TOPK_TOKENS", "BLOCK_N",
          "return_valid_counts", "compact_valid_to_front"),
}
TENSOR_CHANGES = {"rows": int, "columns": int, "dtype": str, "missing": bool, "strided": bool}


@dataclass(frozen=True)
class RejectionCase:
    """One call that breaks ``precondition``: ``base`` through its wrapper, with the
    scalar arguments ``args`` replaced and the tensors changed as ``tensors`` says
    (``((argument, ((change, value), ...)), ...)``). ``spec_rejects``: whether SPEC §6
    has the wrapper assert it (None: not stated)."""

    id: str
    precondition: str
    base: CaseConfig
    args: tuple = ()
    tensors: tuple = ()
    what: str = ""
    spec_rejects: Optional[bool] = True

    def __post_init__(self):
        wrapper = self.wrapper
        for name, _ in self.args:
            if name not in SCALAR_ARGS[wrapper]:
                raise ConfigError(f"rejection {self.id!r}: {name!r} is not a scalar argument of {wrapper} "
                                  f"({', '.join(SCALAR_ARGS[wrapper])})")
        for name, changes in self.tensors:
            if name not in TENSOR_ARGS or (wrapper == DCP and name.startswith("prefill")):
                raise ConfigError(f"rejection {self.id!r}: {name!r} is not a tensor argument of {wrapper}")
            for change, value in changes:
                kind = TENSOR_CHANGES.get(change)
                if kind is None:
                    raise ConfigError(f"rejection {self.id!r}: tensor {name}: unknown change {change!r} "
                                      f"(one of {', '.join(TENSOR_CHANGES)})")
                if type(value) is not kind:
                    raise ConfigError(f"rejection {self.id!r}: tensor {name}: {change} = {value!r} is not a {kind.__name__}")
        if not self.args and not self.tensors:
            raise ConfigError(f"rejection {self.id!r} changes nothing: give `args` or `tensors`")

    @property
    def wrapper(self) -> str:
        return CONVERT if self.base.mode == "convert" else DCP

    @property
    def case_id(self) -> str:
        """12 hex digits from everything that makes the call (never a grid case's ID)."""
        payload = json.dumps({"rejection": self.to_dict() | {"base": self.base.rejection_id_dict()}}, sort_keys=True,
                             separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def describe(self) -> str:
        return f"{self.what or self.id} (SPEC §6: {self.precondition})"

    def to_dict(self) -> dict:
        return {
            "id": self.id, "precondition": self.precondition, "what": self.what, "spec_rejects": self.spec_rejects,
            "base": self.base.to_dict(), "args": dict(self.args),
            "tensors": {name: dict(changes) for name, changes in self.tensors},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> RejectionCase:
        return make(d["id"], d["precondition"], CaseConfig.from_dict(d["base"]), d.get("args") or {},
                    d.get("tensors") or {}, what=d.get("what", ""), spec_rejects=d.get("spec_rejects", True))

    def cli_args(self) -> str:
        """Options for ``remap-ab run`` that make this call again."""
        return f"--rejection {self.id}"


def make(id: str, precondition: str, base: CaseConfig, args: Mapping | None = None, tensors: Mapping | None = None,
         what: str = "", spec_rejects: Optional[bool] = True) -> RejectionCase:
    """A ``RejectionCase`` from plain mappings (``args={"BLOCK_N": 256}``,
    ``tensors={"req_id": {"rows": 1}}``)."""
    return RejectionCase(
        id=id, precondition=precondition, base=base,
        args=tuple(sorted((args or {}).items())),
        tensors=tuple(sorted((name, tuple(sorted(dict(ch).items()))) for name, ch in (tensors or {}).items())),
        what=what, spec_rejects=spec_rejects,
    )


# --------------------------------------------------------------------------- the data


@lru_cache(maxsize=4)
def load(path: Optional[str] = None) -> tuple[RejectionCase, ...]:
    """Every call of ``path`` (default: the packaged ``rejections.toml``)."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    file: schema.Readable
    if path is None:
        file, source = resources.files("remap_ab.subjects.remap.judge").joinpath(REJECTIONS_FILE), REJECTIONS_FILE
    else:
        file, source = Path(path), str(path)
    return parse(schema.read_toml(file, what=f"rejections file {source}", error=ConfigError), source)


def parse(data: dict, source: str = REJECTIONS_FILE) -> tuple[RejectionCase, ...]:
    """The calls of a parsed rejections file (schema.RejectionsData, then each call's
    schema.RejectionCallData); ConfigError naming the file, the call and the field."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    top = schema.load(schema.RejectionsData, data, where=f"rejections file {source}", error=ConfigError)
    out, seen = [], set()
    for i, entry in enumerate(top.call):
        name = entry.get("id")
        where = f"rejections file {source}: " + (f"call {name!r}" if isinstance(name, str) and name else f"[[call]] #{i + 1}")
        call = schema.load(schema.RejectionCallData, entry, where=where, error=ConfigError)
        if call.id in seen:
            raise ConfigError(f"{where}: the id repeats")
        seen.add(call.id)
        tensors = {arg: change.model_dump(exclude_unset=True) for arg, change in call.tensors.items()}
        try:
            config = CaseConfig.from_dict({**top.base, **call.base})
            out.append(make(call.id, call.precondition, config, call.args, tensors, what=call.what,
                            spec_rejects=call.spec_rejects))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {' '.join(str(exc).split())}") from None
    return tuple(out)


def by_id(name: str, path: Optional[str] = None) -> RejectionCase:
    cases = {c.id: c for c in load(path)}
    if name not in cases:
        raise ConfigError(f"no rejection call {name!r} in {path or REJECTIONS_FILE}; the calls are: {', '.join(cases)}")
    return cases[name]


# --------------------------------------------------------------------------- from a grid point


def rejection_from_fields(fields: Mapping[str, Any], id: Optional[str] = None) -> RejectionCase:
    """The call a wrapper must reject, from configuration fields ``CaseConfig`` refuses
    because a SPEC §6 assertion would: ``topk % block_n != 0`` (e.g. K=2176 with
    block_n=256, K=2051 with 128), ``dcp_size < 1``, ``dcp_rank`` outside
    ``[0, dcp_size)``, ``block_size % interleave != 0``. The base is the same case made
    valid (block_n: the largest power of two dividing both; DCP fields: size 1 / rank
    0 / interleave 1), the offending value goes to the call. ConfigError when the
    fields break none of these, or break something else too."""
    f = dict(fields)
    args: dict = {}
    broken: list[str] = []
    topk, block_n = f.get("topk", CaseConfig.topk), f.get("block_n", CaseConfig.block_n)
    if isinstance(topk, int) and isinstance(block_n, int) and topk >= 1 and block_n >= 1 and topk % block_n:
        common = math.gcd(topk, block_n)
        f["block_n"] = common & -common  # the largest power of two dividing both
        args["BLOCK_N"] = block_n
        broken.append("NUM_TOPK_TOKENS % BLOCK_N == 0")
    if f.get("mode", CaseConfig.mode) == "dcp":
        size = f.get("dcp_size", CaseConfig.dcp_size)
        rank = f.get("dcp_rank", CaseConfig.dcp_rank)
        if isinstance(size, int) and size < 1:
            args["dcp_size"], f["dcp_size"] = size, 1
            broken.append("dcp_size >= 1")
        if isinstance(rank, int) and isinstance(size, int) and not 0 <= rank < max(size, 1):
            args["dcp_rank"], f["dcp_rank"] = rank, 0
            broken.append("0 <= dcp_rank < dcp_size")
        interleave, block_size = f.get("interleave", CaseConfig.interleave), f.get("block_size", CaseConfig.block_size)
        if isinstance(interleave, int) and isinstance(block_size, int) and interleave >= 1 and block_size % interleave:
            args["cp_kv_cache_interleave_size"], f["interleave"] = interleave, 1
            broken.append("BLOCK_SIZE % cp_kv_cache_interleave_size == 0")
    if not broken:
        raise ConfigError(f"no SPEC §6 precondition is broken by {fields}; it is a case, not a rejection")
    try:
        base = CaseConfig.from_dict(f)
    except ConfigError as exc:
        raise ConfigError(f"{fields} breaks {' and '.join(broken)} but is no valid case otherwise: {exc}") from None
    what = ", ".join(f"{k}={v}" for k, v in sorted(args.items()))
    return make(id or "grid-" + "-".join(f"{k}{v}" for k, v in sorted(args.items())), "; ".join(broken), base,
                args, what=what)


# --------------------------------------------------------------------------- the call


def call_arguments(case: RejectionCase, inputs) -> tuple[tuple, dict]:
    """``(positional, keyword)`` arguments of the violating call on ``inputs`` (the
    base case's inputs): the tensors and scalars registry.Implementation passes, in
    the same places, then the changes."""
    import torch

    c = case.base
    tensors: dict = {
        "req_id": inputs.req_id, "block_table": inputs.block_table, "token_indices": inputs.token_indices,
        "prefill_workspace_request_ids": inputs.prefill_request_ids, "prefill_workspace_starts": inputs.prefill_starts,
    }
    for name, changes in case.tensors:
        tensors[name] = _changed(tensors[name], dict(changes), torch)
    if case.wrapper == CONVERT:
        scalars = {"BLOCK_SIZE": c.block_size, "NUM_TOPK_TOKENS": c.topk, "BLOCK_N": c.block_n,
                   "HAS_PREFILL_WORKSPACE": c.has_prefill, "return_valid_counts": c.counts}
        scalars.update(case.args)
        kwargs = {**{k: scalars[k] for k in ("BLOCK_SIZE", "NUM_TOPK_TOKENS", "BLOCK_N", "HAS_PREFILL_WORKSPACE")},
                  "prefill_workspace_request_ids": tensors["prefill_workspace_request_ids"],
                  "prefill_workspace_starts": tensors["prefill_workspace_starts"],
                  "return_valid_counts": scalars["return_valid_counts"]}
        return (tensors["req_id"], tensors["block_table"], tensors["token_indices"]), kwargs
    scalars = {"dcp_size": c.dcp_size, "dcp_rank": c.dcp_rank, "cp_kv_cache_interleave_size": c.interleave,
               "BLOCK_SIZE": c.block_size, "NUM_TOPK_TOKENS": c.topk, "BLOCK_N": c.block_n,
               "return_valid_counts": c.counts, "compact_valid_to_front": c.compact}
    scalars.update(case.args)
    positional = (tensors["req_id"], tensors["block_table"], tensors["token_indices"], scalars.pop("dcp_size"),
                  scalars.pop("dcp_rank"))
    return positional, scalars


def _changed(t, changes: dict, torch):
    if changes.get("missing"):
        return None
    if t is None:
        return None
    rows = changes.get("rows", 0)
    if rows > 0:
        t = torch.cat([t, t[:1].expand(rows, *t.shape[1:])])
    elif rows < 0:
        t = t[: t.shape[0] + rows].clone()
    cols = changes.get("columns", 0)
    if cols > 0:
        t = torch.cat([t, t[:, :1].expand(t.shape[0], cols)], dim=1)
    elif cols < 0:
        t = t[:, : t.shape[1] + cols].clone()
    if "dtype" in changes:
        dtype = getattr(torch, changes["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ConfigError(f"tensor change dtype = {changes['dtype']!r} is not a torch dtype")
        t = t.to(dtype)
    if changes.get("strided"):
        t = torch.stack([t, t], dim=-1)[..., 0]  # the same values, every other element
    return t


@dataclass(frozen=True)
class Attempt:
    """What one implementation did with a call: accepted it (``raised`` None) or raised.
    Plain data (compare.py judges it): the exception's qualified type, the qualified
    names of its classes (to accept a subclass), its message, with ``memcheck`` on
    the CPU what the call's launches touched (a ``memcheck.MemcheckReport``), and for
    an accepted call what it returned."""

    name: str
    raised: Optional[str] = None
    bases: tuple = ()
    message: str = ""
    memcheck: Optional[object] = None
    returned: str = ""  # an accepted call: what came back, in words

    def evidence(self) -> dict:
        """What the attempt did, as a report shows it (plain data)."""
        out: dict = {"name": self.name}
        if self.raised is None:
            out["returned"] = self.returned or "nothing"
        else:
            out["raised"] = self.raised
            out["message"] = self.message
        report: Any = self.memcheck
        if report is not None and report.launches:
            out["memcheck"] = report.summary()
            firsts: dict = {}  # the first finding of each kind, kernel and nearest tensor
            for f in report.findings:
                firsts.setdefault((f.kind, f.kernel, f.nearest), f.describe())
            out["memcheck_findings"] = list(firsts.values())
        return out

    @property
    def rejected(self) -> bool:
        return self.raised is not None

    def said(self) -> str:
        if self.raised is None:
            return f"{self.name} accepts it"
        return f"{self.name} raises {self.raised.rpartition('.')[2]}" + (f": {self.message}" if self.message else "")


def _qualified(kind: type) -> str:
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def attempt(impl, case: RejectionCase, inputs) -> Attempt:
    """Make the violating call through ``impl`` (a registry.Implementation).

    On the CPU the call is always memory-checked (memcheck.watching): an accepted call
    that reads or writes outside its tensors is masked there instead of taking the
    process down with it (the interpreter would touch the wild address), and what it
    touched is the attempt's ``memcheck`` report. On a GPU it runs as it is.

    The one place a rejection call is made: its arguments break the wrapper's
    preconditions, so it is no CaseConfig call through ``call.call``; it runs in that
    module's ``calling`` block (poisoning, memcheck) on a private copy of the inputs
    (``judged`` gives each side its own: what an accepting A writes, B never sees)."""

    args, kwargs = call_arguments(case, inputs)
    fn = getattr(impl.module, case.wrapper)
    named = {n: t for n, t in zip(("req_id", "block_table", "token_indices"), args[:3]) if t is not None}
    session = None
    try:
        with calling(inputs.device, impl.name, named) as session:
            result = fn(*args, **kwargs)
            synchronize(inputs.device)
    except Exception as exc:  # the answer we are after, when it is a rejection
        report = session.report if session is not None else None
        line = " ".join(str(exc).split())[:300]
        return Attempt(impl.name, _qualified(type(exc)), tuple(_qualified(k) for k in type(exc).__mro__), line, report)
    return Attempt(impl.name, memcheck=session.report if session is not None else None, returned=described(result))


def described(value) -> str:
    """A call's argument or return value in words: a tensor by dtype and shape (and
    "non-contiguous"), a tuple item by item, anything else by its repr."""
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype} tensor {list(value.shape)}" + ("" if value.is_contiguous() else ", non-contiguous")
    if isinstance(value, tuple):
        return "(" + ", ".join(described(v) for v in value) + ")"
    return repr(value)


def arguments_given(case: RejectionCase, inputs) -> dict:
    """The violating call's arguments as the wrapper gets them, in words, by name,
    each changed one marked (for the report's rejection section)."""
    import inspect

    args, kwargs = call_arguments(case, inputs)
    names = list(inspect.signature(_signature_of(case.wrapper)).parameters)
    given = dict(zip(names, args)) | kwargs
    changed = {name for name, _ in case.tensors} | {name for name, _ in case.args}
    return {name: described(v) + ("  ← changed" if name in changed else "") for name, v in given.items()}


def _signature_of(wrapper: str):
    """A stand-in with the wrapper's SPEC §1 parameter names, in order."""
    if wrapper == CONVERT:
        def convert(req_id, block_table, token_indices, BLOCK_SIZE=64, NUM_TOPK_TOKENS=2048, BLOCK_N=128,
                    HAS_PREFILL_WORKSPACE=False, prefill_workspace_request_ids=None, prefill_workspace_starts=None,
                    return_valid_counts=False): ...
        return convert

    def dcp(req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size=1, BLOCK_SIZE=64,
            NUM_TOPK_TOKENS=2048, BLOCK_N=128, return_valid_counts=False, compact_valid_to_front=True): ...
    return dcp


def run_rejection(case: RejectionCase, a: str = "old", b: str = "new", *, device: Optional[str] = None,
                  memcheck: bool = False):
    """The verdict of one rejection case: A's and B's attempts, judged by compare.py."""

    dev = runtime.select(device)
    return judged(case, registry.get(a), registry.get(b), dev, memcheck)[0]


def judged(case: RejectionCase, impl_a, impl_b, device: str, memcheck: bool = False, inputs=None):
    """``(verdict, a's attempt, b's attempt)`` of one rejection call on ``device``
    (``inputs``: the base case's, e.g. a report's saved ones; default generated)."""

    inputs = generate_inputs(case.base, device=device) if inputs is None else inputs.to(device)
    own_a, own_b = (p.cases[0] for p in PrivateInputs.each([inputs], 2))
    first, second = attempt(impl_a, case, own_a), attempt(impl_b, case, own_b)
    replay = run_line(case, impl_a.name, impl_b.name, device, memcheck)
    checked = memcheck_lines((first, second), memcheck)
    verdict = judge_rejection(case.case_id, case.describe(), first, second, replay=replay, memchecked=memcheck,
                              checked=checked, precondition=case.precondition, wrapper=case.wrapper,
                              arguments=arguments_given(case, inputs), what=case.what or case.id)
    return verdict, first, second


def memcheck_lines(attempts, memcheck: bool) -> list:
    """What the attempts' calls touched, one line each. With ``memcheck`` a line says
    what was checked (compare makes each out-of-bounds group a failure); without it,
    only a line counts what was masked (``--memcheck`` names it). On a GPU a rejection
    call is not sanitized: said so, never counted clean."""
    lines = []
    for o in attempts:
        report = o.memcheck
        if report is None:
            if memcheck:
                lines.append(f"memcheck {o.name}: not checked (a rejection call on a GPU is not sanitized)")
        elif report.launches == 0:
            if memcheck:
                lines.append(f"memcheck {o.name}: nothing to check (no launch: the call was refused first)")
        elif memcheck:
            lines.append(report.summary())
        elif not report.clean:
            lines.append(f"{o.name}'s call touched memory outside its tensors ({report.bad_elements} lanes, masked "
                         f"so the process lives); --memcheck names them")
    return lines


def run_line(case: RejectionCase, a: str, b: str, device: str, memcheck: bool = False,
                   path_entries: Iterable[str] = ()) -> str:
    """The ``remap-ab run --rejection ID`` line that makes ``case``'s call again."""
    return command_line.line("run", "--rejection", case.id, a=a, b=b, device=device, memcheck=memcheck,
                             path_entries=path_entries)


# --------------------------------------------------------------------------- in a sweep


@dataclass(frozen=True)
class RejectionPoint:
    """A rejection call as a sweep runs it, beside the grid's points: the same
    attributes as ``grid.GridPoint`` (``config`` is the RejectionCase), so the pool and
    the results table carry it unchanged; its row's ``rejection`` column names it."""

    index: int
    config: RejectionCase

    @property
    def case_id(self) -> str:
        return self.config.case_id

    @property
    def labels(self) -> tuple:
        return (("rejection", self.config.id),)

    def line(self) -> str:
        return f"{self.case_id}  rejection={self.config.id}"


def sweep_points(first_index: int, path: Optional[str] = None, grid=None) -> list[RejectionPoint]:
    """Every rejection call, indexed after the grid's points (every sweep runs them all):
    rejections.toml's, then the expected rejections ``grid`` declares (grid.Rejection)."""
    cases = list(load(path)) + [rejection_from_fields(r.fields, id=r.id) for r in (grid.rejections() if grid else ())]
    return [RejectionPoint(first_index + i, case) for i, case in enumerate(cases)]


def is_task(d: Mapping) -> bool:
    """Whether a task dict (``to_dict`` of a sweep point's config) is a rejection call."""
    return "precondition" in d
