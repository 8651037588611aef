"""The mutant catalogue: ``catalogue.toml`` read into checked ``Mutant`` values.

The catalogue is data (as the sweep grid is): each entry names the kernel package it
targets, what a developer might have written by mistake, the exact source edits, a
witness case, and optionally why it is equivalent, why only a GPU can show it, or
that only a memory check can see it. Every malformed entry is a ``MutantError`` naming
the mutant and the field, raised when the catalogue is loaded.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Optional

from remap_ab.errors import ConfigError, MutantError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.rejections import by_id

CATALOGUE_FILE = "catalogue.toml"
TARGETS = ("old", "new")
OBSERVABLE = ("output", "memcheck", "call", "rejection", "speed")


@dataclass(frozen=True)
class Mutant:
    """One seeded bug.

    id           short unique name (a Python identifier).
    target       "old" or "new": the kernel package the edits apply to.
    area         the SPEC section it breaks.
    description  one line: what a developer might have written by mistake.
    edits        ``(old_text, new_text)`` pairs applied in order to
                 ``kernels_<target>/_remap.py``; each ``old_text`` must match exactly once.
    witness      CaseConfig fields of a case on which the mutant's output differs from
                 the real kernel's (checked by ``witness.find_witness``).
    equivalent   None, or why the mutant cannot change any output (never counted).
    needs_gpu    None, or why a sequential (interpreter) run cannot show the bug.
    observable   "output"; "memcheck": no output changes, only a memory check sees it;
                 "call": no output changes, only the call checks (inputs written,
                 aliasing; on CUDA sync, stream, graph) see it; "rejection": no valid
                 case changes, only a call that breaks a SPEC §6 precondition shows it
                 (the witness is ``{"rejection": id}``, an id of rejections.toml);
                 "speed": every output the same, only slower: only the speed gate
                 on a GPU (the bench's, remap_ab/speed.py) sees it.
    """

    id: str
    target: str
    area: str
    description: str
    edits: tuple
    witness: dict
    equivalent: Optional[str] = None
    needs_gpu: Optional[str] = None
    observable: str = "output"

    @property
    def package(self) -> str:
        return f"mutant_{self.id}"

    @property
    def sides(self) -> tuple[str, str]:
        """(A, B) for the A/B checks: the mutant replaces its own side."""
        return ("old", self.package) if self.target == "new" else (self.package, "new")

    @property
    def original(self) -> str:
        return self.target

    @property
    def witness_rejection(self) -> Optional[str]:
        """The rejection call that is this mutant's witness (observable "rejection")."""
        return self.witness.get("rejection") if self.observable == "rejection" else None

    def witness_config(self) -> CaseConfig:
        if self.witness_rejection is not None:
            return by_id(self.witness_rejection).base
        return CaseConfig(**self.witness)


def parse(data: dict[str, Any]) -> tuple[Mutant, ...]:
    """Check the parsed TOML (schema.CatalogueData, then each entry's
    schema.MutantEntry) and build the mutants; MutantError names what is wrong."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    top = schema.load(schema.CatalogueData, data, where=CATALOGUE_FILE, error=MutantError)
    mutants, seen = [], set()
    for n, entry in enumerate(top.mutant, 1):
        mutants.append(_mutant(entry, n, top.bases))
        if mutants[-1].id in seen:
            raise MutantError(f"{CATALOGUE_FILE}: mutant id {mutants[-1].id!r} appears twice")
        seen.add(mutants[-1].id)
    return tuple(mutants)


def _mutant(entry: dict, n: int, bases: dict) -> Mutant:
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    mid = entry.get("id")
    named = isinstance(mid, str) and mid.isidentifier()
    where = f"{CATALOGUE_FILE}: mutant {mid}" if named else f"{CATALOGUE_FILE}: mutant #{n}"
    e = schema.load(schema.MutantEntry, entry, where=where, error=MutantError)
    if e.observable == "rejection":
        witness = _rejection_witness(e.witness, where)
    else:
        witness = _witness(e.witness, bases, where)
    return Mutant(
        e.id, e.target, e.area, e.description, tuple((edit.old, edit.new) for edit in e.edit), witness,
        equivalent=e.equivalent, needs_gpu=e.needs_gpu, observable=e.observable,
    )


def _rejection_witness(spec: Any, where: str) -> dict:
    if not isinstance(spec, dict) or set(spec) != {"rejection"} or not isinstance(spec["rejection"], str):
        raise MutantError(f"{where}: observable = \"rejection\" needs witness = {{ rejection = \"ID\" }} (an id of "
                          "remap_ab/subjects/remap/judge/rejections.toml)")
    try:
        by_id(spec["rejection"])
    except ConfigError as exc:
        raise MutantError(f"{where}: witness: {exc}") from None
    return dict(spec)


def _witness(spec: Any, bases: dict, where: str) -> dict:
    if not isinstance(spec, dict):
        raise MutantError(f"{where}: witness must be a table of CaseConfig fields")
    fields = dict(spec)
    base = fields.pop("base", None)
    if base is not None:
        if base not in bases:
            raise MutantError(f"{where}: witness base {base!r} is not one of [bases] {', '.join(bases)}")
        fields = {**bases[base], **fields}
    try:
        config = CaseConfig.from_dict(fields)
    except ConfigError as exc:
        raise MutantError(f"{where}: witness is not a valid case: {exc}") from None
    except TypeError as exc:  # a wrong-typed field where the config does not check it itself
        raise MutantError(f"{where}: witness is not a valid case: {exc}") from None
    return {k: getattr(config, k) for k in fields}


@functools.lru_cache(maxsize=1)
def load() -> tuple[Mutant, ...]:
    """The packaged catalogue (``remap_ab/subjects/remap/parts/mutants/catalogue.toml``)."""
    from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

    file = resources.files(__package__).joinpath(CATALOGUE_FILE)
    return parse(schema.read_toml(file, what=CATALOGUE_FILE, error=MutantError))


def select(only=None) -> list[Mutant]:
    """The catalogue, or the mutants named in ``only`` (ids), in catalogue order."""
    mutants = load()
    if not only:
        return list(mutants)
    known = {m.id for m in mutants}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise MutantError(f"unknown mutant id(s) {', '.join(unknown)}; `remap-ab mutants --list` lists them")
    wanted = set(only)
    return [m for m in mutants if m.id in wanted]


def get(mutant_id: str) -> Mutant:
    return select([mutant_id])[0]
