"""The mutant catalogue: ``catalogue.toml`` read into checked ``Mutant`` values.

The catalogue is data (as the sweep grid is): each entry names the kernel package it
targets, what a developer might have written by mistake, the exact source edits, a
witness case, and optionally why it is equivalent, why only a GPU can show it, or
that only a memory check can see it. Every malformed entry is a ``MutantError`` naming
the mutant and the field, raised when the catalogue is loaded.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Optional

from remap_ab.config import CaseConfig
from remap_ab.errors import ConfigError, MutantError

CATALOGUE_FILE = "catalogue.toml"
TARGETS = ("old", "new")
OBSERVABLE = ("output", "memcheck", "call", "rejection")
_REQUIRED = ("id", "target", "area", "description", "witness", "edit")
_OPTIONAL = ("equivalent", "needs_gpu", "observable")


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
                 (the witness is ``{"rejection": id}``, an id of rejections.toml).
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
            from remap_ab.rejections import by_id

            return by_id(self.witness_rejection).base
        return CaseConfig(**self.witness)


def parse(data: dict[str, Any]) -> tuple[Mutant, ...]:
    """Check the parsed TOML and build the mutants; MutantError names what is wrong."""
    if data.get("version") != 1:
        raise MutantError(f"{CATALOGUE_FILE}: version must be 1, got {data.get('version')!r}")
    bases = data.get("bases", {})
    if not isinstance(bases, dict) or not all(isinstance(b, dict) for b in bases.values()):
        raise MutantError(f"{CATALOGUE_FILE}: [bases] must hold tables of CaseConfig fields")
    entries = data.get("mutant")
    if not isinstance(entries, list) or not entries:
        raise MutantError(f"{CATALOGUE_FILE}: no [[mutant]] entries")
    mutants, seen = [], set()
    for n, entry in enumerate(entries, 1):
        mutants.append(_mutant(entry, n, bases))
        if mutants[-1].id in seen:
            raise MutantError(f"{CATALOGUE_FILE}: mutant id {mutants[-1].id!r} appears twice")
        seen.add(mutants[-1].id)
    return tuple(mutants)


def _mutant(entry: Any, n: int, bases: dict) -> Mutant:
    where = f"{CATALOGUE_FILE}: mutant #{n}"
    if not isinstance(entry, dict):
        raise MutantError(f"{where} is not a table")
    mid = entry.get("id")
    if not isinstance(mid, str) or not mid.isidentifier():
        raise MutantError(f"{where}: id {mid!r} must be a Python identifier (it names package mutant_<id>)")
    where = f"{CATALOGUE_FILE}: mutant {mid}"
    missing = [k for k in _REQUIRED if k not in entry]
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        what = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(unknown)}"] if unknown else [])
        raise MutantError(f"{where}: {'; '.join(what)} (fields: {', '.join(_REQUIRED + _OPTIONAL)})")
    for key in ("area", "description") + tuple(k for k in ("equivalent", "needs_gpu") if k in entry):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise MutantError(f"{where}: {key} must be a non-empty string")
    if entry["target"] not in TARGETS:
        raise MutantError(f"{where}: target {entry['target']!r} is not one of {', '.join(TARGETS)}")
    observable = entry.get("observable", "output")
    if observable not in OBSERVABLE:
        raise MutantError(f"{where}: observable {observable!r} is not one of {', '.join(OBSERVABLE)}")
    edits = entry["edit"]
    if not isinstance(edits, list) or not edits:
        raise MutantError(f"{where}: needs at least one [[mutant.edit]]")
    pairs = []
    for i, e in enumerate(edits, 1):
        if not isinstance(e, dict) or set(e) != {"old", "new"} or not all(isinstance(v, str) for v in e.values()):
            raise MutantError(f"{where}: edit {i} must have exactly the string fields old and new")
        if not e["old"]:
            raise MutantError(f"{where}: edit {i} has an empty old text")
        pairs.append((e["old"], e["new"]))
    if observable == "rejection":
        witness = _rejection_witness(entry["witness"], where)
    else:
        witness = _witness(entry["witness"], bases, where)
    return Mutant(
        mid, entry["target"], entry["area"], entry["description"], tuple(pairs), witness,
        equivalent=entry.get("equivalent"), needs_gpu=entry.get("needs_gpu"), observable=observable,
    )


def _rejection_witness(spec: Any, where: str) -> dict:
    from remap_ab.rejections import by_id

    if not isinstance(spec, dict) or set(spec) != {"rejection"} or not isinstance(spec["rejection"], str):
        raise MutantError(f"{where}: observable = \"rejection\" needs witness = {{ rejection = \"ID\" }} (an id of "
                          "remap_ab/rejections.toml)")
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
    """The packaged catalogue (``remap_ab/mutants/catalogue.toml``)."""
    text = resources.files(__package__).joinpath(CATALOGUE_FILE).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MutantError(f"{CATALOGUE_FILE} is not valid TOML: {exc}") from None
    return parse(data)


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
