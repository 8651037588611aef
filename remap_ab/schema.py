"""Declared shapes of the data remap-ab reads back (reports, run folders, grids, the
mutant catalogue, rejection calls), checked by one mechanism: pydantic models in strict
mode (no string-to-number coercion, no bool for an int, unknown keys refused), and one
translation of pydantic's first error into remap-ab's one-line error naming the file
and the field:

    <where> field 'verdict.failures[0].row' is str "0", expected an integer<remedy>

A model declares what is allowed; ``load`` checks data against it and raises the
caller's error class (``ReportError``, ``ConfigError``, ``MutantError``) with that line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
import types
import typing
from typing import Any, Optional, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from remap_ab.errors import RemapABError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """The base of every schema: strict types, unknown keys refused, frozen."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Open(Strict):
    """A schema whose unknown keys are kept and ignored (files that grow fields)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


_WORDS = {
    "string_type": "a string", "int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
    "list_type": "a list", "dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
    "tuple_type": "a list", "int_from_float": "an integer", "none_required": "null",
}


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """``(annotation without Optional, whether None is allowed)``."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return annotation, False


def _field_at(model: type[BaseModel], loc: tuple) -> tuple[Any, bool]:
    """The annotation ``loc`` points at inside ``model``, and whether it is nullable."""
    current: Any = model
    nullable = False
    for part in loc:
        current, _ = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None, False
            current, nullable = _unwrap(field.annotation)
            continue
        args = typing.get_args(current)
        origin = typing.get_origin(current)
        if origin in (list, tuple) and args:
            current, nullable = _unwrap(args[0])
        elif origin is dict and len(args) == 2:
            current, nullable = _unwrap(args[1])
        else:
            return None, False
    return current, nullable


def _expected(error: dict, model: type[BaseModel]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("enum", "literal_error"):
        allowed = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"one of {allowed}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        word = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"a number {word} {bound}"
    if kind == "string_too_short":
        return "a non-empty string"
    if kind == "too_short":
        n = ctx.get("min_length", "?")
        return f"at least {n} item{'' if n == 1 else 's'}"
    if kind == "too_long":
        n = ctx.get("max_length", "?")
        return f"at most {n} item{'' if n == 1 else 's'}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    words = _WORDS.get(kind, error["msg"].lower())
    _, nullable = _field_at(model, error["loc"])
    return f"{words} or null" if nullable and words != "null" else words


def problem(error: dict, model: type[BaseModel]) -> str:
    """One pydantic error as the words after ``<where>``."""
    path = _path(error["loc"])
    field = f"field {path!r} " if path else ""
    if error["type"] == "missing":
        return f"{field}is missing"
    if error["type"] == "extra_forbidden":
        return f"{field}is not a known field"
    value = error.get("input")
    shown = json.dumps(value, default=repr)[:40] if not isinstance(value, str) else repr(value)[:40]
    if error["loc"][-1:] == ("[key]",):  # a mapping's key, not its value
        owner = _path(error["loc"][:-2])
        return f"{f'field {owner!r} ' if owner else ''}has the key {shown}, expected {_expected(error, model)}"
    return f"{field}is {type(value).__name__} {shown}, expected {_expected(error, model)}"


def load(model: type[M], data: Any, *, where: str, error: type[RemapABError], remedy: str = "",
         context: Optional[dict] = None, describe: Optional[typing.Callable[[dict], str]] = None) -> M:
    """``data`` checked against ``model``; ``error(f"{where} {problem}{remedy}")`` for its
    first problem (``describe(error)`` instead, where a caller words it itself).
    ``context`` reaches the model's validators."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        first = dict(exc.errors(include_url=False)[0])
        raise error(describe(first) if describe else f"{where} {problem(first, model)}{remedy}") from None


class Readable(Protocol):
    """A file to read: a ``pathlib.Path`` or a packaged resource (``importlib.resources``)."""

    def read_text(self, encoding: Optional[str] = None) -> str: ...


def read_toml(file: Readable, *, what: str, error: type[RemapABError]) -> dict[str, Any]:
    """The parsed TOML of ``file``; ``error`` with one line when it cannot be read
    (``cannot read <what>: <reason>``) or is not TOML (``<what> is not valid TOML: ...``).
    ``what`` names the file for a person (``grid file remap_ab/subjects/remap/grid.toml``)."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not valid TOML: byte {exc.start} is not UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} is not valid TOML: {exc}") from None


# --------------------------------------------------------------------------- the shapes
# Enums are read from their plain words (``strict=False`` on those fields only).

from pydantic import AfterValidator, BeforeValidator, Field, RootModel, create_model  # noqa: E402

from remap_ab.sources import Source  # noqa: E402
from remap_ab.status import Check, Status  # noqa: E402

_WORD = Field(strict=False)


class MismatchData(Strict):
    """One failure of a verdict (compare.Mismatch.to_dict's keys)."""

    check: Check = _WORD
    impl: str
    row: int
    col: int
    values: dict[str, Optional[int]]
    lanes: int
    rows: int
    message: str
    evidence: dict[str, Any] = {}  # verdicts written before the report sections have none


class VerdictData(Strict):
    """A verdict as compare.Verdict.to_dict writes it."""

    case_id: str
    status: Status = _WORD
    failures: list[MismatchData]
    info: list[str]
    order_differs: bool
    order_differs_rows: int
    caller: str = ""
    hazard_rows: int = 0
    backend_view: str = ""


# run.json (run_folder.py). Fields it may lack default to None, which no check sees:
# a missing field is not validated; a present one must have its type (null only where
# the type says so).
_ABSENT: Any = Field(default=None)
_COUNT: Any = Field(default=None, ge=0)


class ApiDifferenceData(Open):
    function: str = _ABSENT
    parameter: str = _ABSENT
    what: str
    fails: bool
    line: str


class RunMeta(Open):
    a: str = Field(min_length=1)
    b: str = Field(min_length=1)
    device: typing.Literal["cpu", "cuda"]
    filters: list[str]
    max_tokens: Optional[int] = Field(ge=1)
    selected: int = Field(ge=0)
    run: str = _ABSENT
    grid_file: Optional[str] = None
    grid_version: int = _ABSENT
    grid_total: int = _COUNT
    selection: str = _ABSENT
    memcheck: bool = _ABSENT
    call_checks: typing.Literal["sample", "all", "off", "not run (no GPU)"] = _ABSENT
    reports: typing.Union[typing.Annotated[int, Field(ge=0)], typing.Literal["all"]] = _ABSENT  # report_cap.Cap
    rejections: int = _COUNT
    api: list[ApiDifferenceData] = _ABSENT
    features: list[str] = _ABSENT
    cap_note: str = _ABSENT
    phase_seconds: dict[str, float] = _ABSENT
    wall_seconds: float = _ABSENT
    last_session: dict[str, Any] = _ABSENT


# A report folder's JSON files (report.py's load_report).


def _model_of(cls: type) -> type[Strict]:
    """A Strict model with the fields of the dataclass ``cls``: its types and defaults."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {
        f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(cls)
    }
    return create_model(f"{cls.__name__}Data", __base__=Strict, **fields)


SourceData = _model_of(Source)  # sources.Source as recorded (its to_dict)


class ImplementationData(Open):
    name: str
    module: Optional[str] = None
    path_entry: Optional[str] = None
    source: Optional[SourceData] = None  # type: ignore[valid-type]


class ReportVerdictData(Open):
    """verdict.json's ``verdict`` (older reports may lack the optional fields)."""

    case_id: str
    status: str
    failures: list[MismatchData]
    info: list[str] = _ABSENT
    order_differs: bool = _ABSENT
    order_differs_rows: int = _ABSENT


def _policy_and_seed(value: Any) -> Any:
    if value is not None and not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
                                  and type(value[1]) is int):
        raise ValueError("[policy, seed]")
    return value


class ReportInputsData(Strict):
    """verdict.json's ``inputs`` (format 2): how the inputs come back. ``generated``:
    from config.json by the input generator of ``generator_version`` (its bytes checked
    against ``inputs_sha256``); ``stored``: only from ``file`` (``run --inputs``). A
    ``file`` beside generated inputs is a --full-tensors copy."""

    source: typing.Literal["generated", "stored"]
    generator_version: int
    seed: int
    file: Optional[str] = None


class TensorDigestData(Strict):
    """One whole tensor as recorded: its shape, dtype and sha256 (inputs.tensor_sha256)."""

    shape: list[int]
    dtype: str
    sha256: str


class RoleOutputsData(Strict):
    """One side's outputs (``a``, ``b``, ``oracle``, ``reference``) in verdict.json's
    ``outputs``: each tensor's digest (null: not returned), and whether the kept rows
    hold its values there."""

    name: Optional[str] = None
    error: Optional[str] = None
    tensors: dict[str, Optional[TensorDigestData]]
    kept: list[str] = []


class ReportOutputsData(Strict):
    """verdict.json's ``outputs`` (format 2): the rows kept where A, B and the oracle
    differ (``rows_file``), how many differ in all, and each whole tensor's digest;
    ``full_file``: the whole tensors (--full-tensors)."""

    rows_file: Optional[str] = None
    rows_differing: int = Field(ge=0)
    rows_kept: int = Field(ge=0)
    full_file: Optional[str] = None
    roles: dict[str, RoleOutputsData]


class VerdictFile(Open):
    case_id: str
    status: Status = _WORD
    format: int = Field(default=1, ge=1)
    a: ImplementationData
    b: ImplementationData
    device: str
    inputs_sha256: dict[str, str]
    inputs: Optional[ReportInputsData] = None  # format 2; format 1 keeps inputs.pt
    outputs: Optional[ReportOutputsData] = None  # format 2, a case with outputs
    schedule: typing.Annotated[Any, BeforeValidator(_policy_and_seed)] = None
    verdict: ReportVerdictData


def _tensor(value: Any) -> Any:
    import torch  # loaded already: only a file torch read holds tensors

    if not isinstance(value, torch.Tensor):
        raise ValueError("a tensor")
    return value


Tensor = typing.Annotated[Any, BeforeValidator(_tensor)]


class KeptRoleData(Strict):
    out: Optional[Tensor] = None
    counts: Optional[Tensor] = None


class KeptRowsData(Strict):
    """The kept-rows file (torch.save, gzip-compressed): the row indices, and each kept
    side's values at those rows."""

    rows: Tensor
    roles: dict[str, KeptRoleData]


class FullRoleData(Strict):
    name: Optional[str] = None
    error: Optional[str] = None
    out: Optional[Tensor] = None
    counts: Optional[Tensor] = None
    lanes: Optional[Tensor] = None
    valid: Optional[Tensor] = None


class FullOutputsData(RootModel[dict[str, FullRoleData]]):
    """The whole-outputs file (--full-tensors): each side's outputs as returned."""

    model_config = ConfigDict(strict=True, frozen=True)


InputName = typing.Literal["req_id", "block_table", "token_indices", "prefill_request_ids", "prefill_starts"]


class InputTensorsData(RootModel[dict[InputName, Tensor]]):
    """A stored inputs file: the input tensors by their SPEC §2 names (inputs.TENSOR_NAMES)."""

    model_config = ConfigDict(strict=True, frozen=True)


@functools.lru_cache(maxsize=4)
def config_file(field_types: tuple) -> type[BaseModel]:
    """config.json: ``case_id`` and ``config``, CaseConfig's fields with their types
    (``field_types``: ``((name, type), ...)``, config.FIELD_TYPES; a float field may hold
    an int). Unknown fields are left to CaseConfig.from_dict, which names them."""
    fields: dict[str, Any] = {name: (kind, Field(default=None)) for name, kind in field_types}
    config_fields = create_model("strs", __base__=Open, **fields)
    return create_model("ConfigFile", __base__=Open, case_id=(str, ...), config=(config_fields, ...))


# The mutant catalogue (mutants/catalogue.py): the file's shape, then each entry's.


def _identifier(value: str) -> str:
    if not value.isidentifier():
        raise ValueError("a Python identifier (it names package mutant_<id>)")
    return value


def _words(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty string")
    return value


Words = typing.Annotated[str, AfterValidator(_words)]


class CatalogueData(Strict):
    version: typing.Literal[1]
    bases: dict[str, dict[str, Any]] = {}
    mutant: list[dict[str, Any]] = Field(min_length=1)


class EditData(Strict):
    old: str = Field(min_length=1)
    new: str


class MutantEntry(Strict):
    id: typing.Annotated[str, AfterValidator(_identifier)]
    target: typing.Literal["old", "new"]
    area: Words
    description: Words
    witness: dict[str, Any]
    edit: list[EditData] = Field(min_length=1)
    equivalent: Optional[Words] = None
    needs_gpu: Optional[Words] = None
    observable: typing.Literal["output", "memcheck", "call", "rejection", "speed"] = "output"


# Rejection calls (rejections.toml): the file's shape, then each call's.


class RejectionsData(Strict):
    version: typing.Literal[1] = 1
    base: dict[str, Any] = {}
    call: list[dict[str, Any]] = Field(min_length=1)


class TensorChangeData(Strict):
    rows: int = _ABSENT
    columns: int = _ABSENT
    dtype: str = _ABSENT
    missing: bool = _ABSENT
    strided: bool = _ABSENT


class RejectionCallData(Strict):
    id: Words
    precondition: Words
    what: str = ""
    base: dict[str, Any] = {}
    args: dict[str, typing.Union[bool, int]] = {}
    tensors: dict[str, TensorChangeData] = {}
    spec_rejects: bool = True


# Grid files (grid.py): the file's shape, each axis entry's, each width's. What the
# entries mean together (configuration field names, labels, `over`, rotations taken
# modulo a field) stays in grid.py.


Name = typing.Annotated[str, Field(min_length=1)]


class WidthEntry(Strict):
    k: int = Field(ge=1)
    block_n: list[typing.Annotated[int, Field(ge=1)]] = Field(min_length=1)
    rejected_block_n: list[typing.Annotated[int, Field(ge=1)]] = []
    source: Words


class GridRejectionsData(Strict):
    over: list[str] = []
    fields: dict[str, Any] = {}
    doc: str = ""


class GridEnvelopeData(Strict):
    # The envelope's sets (envelope.SETS) the grid holds every value of.
    cover: list[typing.Literal["rows", "blocks", "strides", "buffers", "dcp", "widths"]] = Field(min_length=1)


class GridData(Strict):
    version: int = 1
    defaults: dict[str, Any] = {}
    dimension: list[dict[str, Any]] = []
    rotate: list[dict[str, Any]] = []
    width: list[WidthEntry] = []
    rejections: Optional[GridRejectionsData] = None
    envelope: Optional[GridEnvelopeData] = None


# The call envelope (remap_ab/subjects/remap/envelope.toml, read by envelope.py).
PositiveInts = list[typing.Annotated[int, Field(ge=1)]]


class EnvelopeRows(Strict):
    decode: PositiveInts = Field(min_length=1)
    prefill: PositiveInts = []


class EnvelopeBlocks(Strict):
    sizes: PositiveInts = Field(min_length=1)


class EnvelopeStride(Strict):
    block_size: int = Field(ge=1)
    block_stride: int = Field(ge=1, le=2**31 - 1)
    why: Words


class EnvelopeBuffers(Strict):
    out_buffers: list[bool] = Field(min_length=1)
    counts: list[bool] = Field(min_length=1)


class EnvelopeDcp(Strict):
    sizes: PositiveInts = Field(min_length=1)
    interleaves: PositiveInts = Field(min_length=1)


class EnvelopeData(Strict):
    version: int = 1
    rows: EnvelopeRows
    blocks: EnvelopeBlocks
    stride: list[EnvelopeStride] = []
    buffers: EnvelopeBuffers
    dcp: EnvelopeDcp
    width: list[WidthEntry] = []


class DimensionEntry(Strict):
    name: Name
    doc: str = ""
    field: Optional[str] = None
    values: Optional[list[Any]] = Field(default=None, min_length=1)  # or `from = "widths"`
    from_: Optional[typing.Literal["widths"]] = Field(default=None, alias="from")


class RotateEntry(Strict):
    name: Name
    doc: str = ""
    field: Optional[str] = None
    values: list[Any] = Field(min_length=1)
    over: list[str] = []
    modulo: Optional[str] = None



# CaseConfig.from_dict (config.py): the command line's and saved JSON's strings
# converted ("3", "true", "0.3"), never a bool for a number, never NaN or infinity.


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("not a bool")
    return value


class _Lax(BaseModel):
    model_config = ConfigDict(strict=False, extra="forbid", frozen=True, allow_inf_nan=False)


@functools.lru_cache(maxsize=4)
def config_input(field_types: tuple) -> type[BaseModel]:
    """CaseConfig's fields (``((name, type), ...)``, config.FIELD_TYPES) as a lax model:
    what ``from_dict`` converts."""
    fields: dict[str, Any] = {}
    for name, kind in field_types:
        annotation: Any = typing.Annotated[kind, BeforeValidator(_no_bool)] if kind in (int, float) else kind
        fields[name] = (annotation, Field(default=None))
    return create_model("ConfigInput", __base__=_Lax, **fields)
