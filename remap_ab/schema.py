"""Declared shapes of the data remap-ab reads back, checked by one mechanism: pydantic
models in strict mode (no string-to-number coercion, no bool for an int, unknown keys
refused), and one translation of pydantic's first error into remap-ab's one-line error
naming the file and the field:

    <where> field 'verdict.failures[0].row' is str "0", expected an integer<remedy>

A model declares what is allowed; ``load`` checks data against it and raises the
caller's error class (``ReportError``, ``ConfigError``, ``MutantError``) with that line.
Here: the mechanism, the run folder's run.json and the building blocks every subject's
shapes use; a subject's own files' shapes are in its package (the remap's:
``remap_ab/subjects/remap/case/schema.py``).
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
            field = current.model_fields.get(str(part)) or next(
                (f for f in current.model_fields.values() if f.alias == part), None)  # a key under another name
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
    ``what`` names the file for a person (``grid file remap_ab/subjects/remap/grid/grid.toml``)."""
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

from pydantic import AfterValidator, BeforeValidator, Field, create_model  # noqa: E402

from remap_ab.sources import Source  # noqa: E402
from remap_ab.status import Status  # noqa: E402

# Enums are read from their plain words (``strict=False`` on those fields only).
WORD = Field(strict=False)

# A field a file may lack defaults to None, which no check sees: a missing field is not
# validated; a present one must have its type (null only where the type says so).
ABSENT: Any = Field(default=None)
COUNT: Any = Field(default=None, ge=0)
NAMED: Any = Field(default=None, min_length=1)


# run.json (run_folder.py).


def _report_cap(value: Any) -> Any:
    if value == "all" or (type(value) is int and value >= 0):
        return value
    raise ValueError('a count of report folders (0 or more) or "all"')


# --reports' value (report_cap.Cap): a count of report folders per failure class, or "all"
# (one check, so an error names the field and not a member of a union).
ReportCap = typing.Annotated[Any, AfterValidator(_report_cap)]


class ApiDifferenceData(Open):
    function: str = ABSENT
    parameter: str = ABSENT
    what: str
    fails: bool
    line: str


class RunSettings(Open):
    """A sweep's run-level settings as ``SweepOptions.stored`` keeps them (but A, B and the
    size cap): run.json's, and every pair's in a history's history.json."""

    device: typing.Literal["cpu", "cuda"]
    filters: list[str]
    subject: str = NAMED  # absent: subjects.DEFAULT (a run from before subjects)
    grid_file: Optional[str] = None
    memcheck: bool = ABSENT
    call_checks: typing.Literal["sample", "all", "off", "not run (no GPU)"] = ABSENT
    reports: ReportCap = ABSENT


class RunMeta(RunSettings):
    """run.json but for its size cap, which ``run_meta`` adds under the cap option's name."""

    a: str = Field(min_length=1)
    b: str = Field(min_length=1)
    selected: int = Field(ge=0)
    run: str = ABSENT
    grid_version: int = ABSENT
    grid_total: int = COUNT
    selection: str = ABSENT
    rejections: int = COUNT
    api: list[ApiDifferenceData] = ABSENT
    features: list[str] = ABSENT
    cap_note: str = ABSENT
    phase_seconds: dict[str, float] = ABSENT
    wall_seconds: float = ABSENT
    last_session: dict[str, Any] = ABSENT
    python_path: list[str] = ABSENT  # the sweep's PYTHONPATH folders (command_line.environment_entries)
    case_ids: list[str] = ABSENT  # the selected cases' IDs, in order


@functools.cache
def with_size_cap(model: type[RunSettings], size_key: str) -> type[RunSettings]:
    """``model`` and the grid's size cap (``max_size``, null: none), kept under
    ``size_key``, the cap option's name (``run_folder.SIZE_KEY``)."""
    return create_model(model.__name__, __base__=model, max_size=(Optional[int], Field(ge=1, alias=size_key)))


def run_meta(size_key: str) -> type[RunSettings]:
    """run.json's shape: ``RunMeta`` and the size cap."""
    return with_size_cap(RunMeta, size_key)


# results.csv (run_folder.py): one row per finished case, every cell read as the string
# it was written as. What every run's row holds; a subject's own columns are its own.


def _whole_number(value: str) -> str:
    if not value.isdigit():
        raise ValueError("a whole number")
    return value


def _worker(value: str) -> str:
    if value and not value.isdigit():
        raise ValueError("a worker number or empty")
    return value


def _one_word(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError("a case ID (one word)")
    return value


class ResultRow(Open):
    index: typing.Annotated[str, AfterValidator(_whole_number)]
    case_id: typing.Annotated[str, AfterValidator(_one_word)]
    status: Status = WORD  # a verdict (status.Status): pass, fail, error, crash or timeout
    worker: typing.Annotated[str, AfterValidator(_worker)] = ""


# Implementations as a report folder records them, and tensors as torch read them.


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


def _tensor(value: Any) -> Any:
    import torch  # loaded already: only a file torch read holds tensors

    if not isinstance(value, torch.Tensor):
        raise ValueError("a tensor")
    return value


Tensor = typing.Annotated[Any, BeforeValidator(_tensor)]


# Plain words and positive sizes, for any file's shape.


def _words(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty string")
    return value


Words = typing.Annotated[str, AfterValidator(_words)]


Name = typing.Annotated[str, Field(min_length=1)]
PositiveInts = list[typing.Annotated[int, Field(ge=1)]]
