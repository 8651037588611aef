"""Declared shapes of the remap's files read back (its report folders' verdict,
outputs and inputs, config.json, its grids, the call envelope, the rejection calls, the
mutant catalogue), checked by the one mechanism of ``remap_ab/schema.py`` (``load``,
``read_toml``: re-exported here, so that a reader of these files imports one module)."""

from __future__ import annotations

import functools
import typing
from typing import Any, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, RootModel, create_model

from remap_ab.schema import (  # noqa: F401  (Readable, load, read_toml: re-exported)
    ABSENT,
    WORD,
    ImplementationData,
    Name,
    Open,
    PositiveInts,
    Readable,
    Strict,
    Tensor,
    Words,
    load,
    read_toml,
)
from remap_ab.status import Status
from remap_ab.subjects.remap.case.checks import AnyCheck, check_of

# A verdict, and a report folder's files (report.py's load_report).


# A failure's check, read from its word: the machinery's checks and the remap's own.
CheckWord = typing.Annotated[AnyCheck, BeforeValidator(check_of)]


class MismatchData(Strict):
    """One failure of a verdict (compare.Mismatch.to_dict's keys)."""

    check: CheckWord
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
    status: Status = WORD
    failures: list[MismatchData]
    info: list[str]
    order_differs: bool
    order_differs_rows: int
    caller: str = ""
    hazard_rows: int = 0
    backend_view: str = ""



class ReportVerdictData(Open):
    """verdict.json's ``verdict`` (older reports may lack the optional fields)."""

    case_id: str
    status: str
    failures: list[MismatchData]
    info: list[str] = ABSENT
    order_differs: bool = ABSENT
    order_differs_rows: int = ABSENT


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
    status: Status = WORD
    format: int = Field(default=1, ge=1)
    a: ImplementationData
    b: ImplementationData
    device: str
    inputs_sha256: dict[str, str]
    inputs: Optional[ReportInputsData] = None  # format 2; format 1 keeps inputs.pt
    outputs: Optional[ReportOutputsData] = None  # format 2, a case with outputs
    schedule: typing.Annotated[Any, BeforeValidator(_policy_and_seed)] = None
    verdict: ReportVerdictData



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
    rows: int = ABSENT
    columns: int = ABSENT
    dtype: str = ABSENT
    missing: bool = ABSENT
    strided: bool = ABSENT


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


class EnvelopeDimension(Strict):
    """A dimension of the envelope's pairwise coverage: its values, or where they come from."""

    name: Name
    doc: Words = ""
    values: Optional[list[Name]] = Field(default=None, min_length=1)
    from_: Optional[typing.Literal["dcp_sizes", "row_classes"]] = Field(default=None, alias="from")


class EnvelopeRowClass(Strict):
    label: Name
    low: int = Field(ge=1)
    high: int = Field(ge=1)
    parity: typing.Literal["any", "odd", "even"] = "any"


class EnvelopeExclusion(Strict):
    when: dict[str, str] = Field(min_length=1, max_length=1)
    never: dict[str, list[str]] = Field(min_length=1)
    why: Words


class EnvelopeNot(Strict):
    not_: list[str] = Field(alias="not", min_length=1)


class EnvelopeCombination(Strict):
    name: Name
    values: dict[str, typing.Union[str, list[str], EnvelopeNot]] = Field(min_length=3)
    why: Words


class EnvelopeData(Strict):
    version: int = 1
    rows: EnvelopeRows
    blocks: EnvelopeBlocks
    stride: list[EnvelopeStride] = []
    buffers: EnvelopeBuffers
    dcp: EnvelopeDcp
    width: list[WidthEntry] = []
    dimension: list[EnvelopeDimension] = []
    row_class: list[EnvelopeRowClass] = []
    exclude: list[EnvelopeExclusion] = []
    combination: list[EnvelopeCombination] = []


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
