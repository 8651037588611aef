"""The fused kernel's seeded mutants (mutants.toml): each is fused.py with its
edits, built as a module of its own whose entry point the checks call like B's."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Optional

from remap_ab.subjects.topology.config import TopologyCase

MUTANTS_FILE = Path(__file__).with_name("mutants.toml")
TARGET = Path(__file__).resolve().parents[3] / "kernels_topology" / "fused.py"
CAUGHT_BY = ("output", "rejection")


@dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    caught_by: str
    edits: tuple[tuple[str, str], ...]
    witness_case: Optional[TopologyCase]  # caught_by == "output"
    witness_rejection: Optional[str]  # caught_by == "rejection"
    needs_gpu: Optional[str] = None

    @property
    def module_name(self) -> str:
        return f"topology_mutant_{self.id}"


@cache
def mutants() -> tuple[Mutant, ...]:
    data = tomllib.loads(MUTANTS_FILE.read_text())
    out = []
    for entry in data["mutant"]:
        if entry["caught_by"] not in CAUGHT_BY:
            raise ValueError(f"mutant {entry['id']}: caught_by must be one of {CAUGHT_BY}, got {entry['caught_by']!r}")
        witness = dict(entry["witness"])
        rejection = witness.pop("rejection", None)
        out.append(
            Mutant(
                id=entry["id"],
                description=entry["description"],
                caught_by=entry["caught_by"],
                edits=tuple((e["old"], e["new"]) for e in entry["edit"]),
                witness_case=TopologyCase(**witness) if rejection is None else None,
                witness_rejection=rejection,
                needs_gpu=entry.get("needs_gpu"),
            )
        )
    return tuple(out)


def mutated_source(mutant: Mutant, source: Optional[str] = None) -> str:
    """fused.py with the mutant's edits; each edit's ``old`` must occur exactly once."""
    text = TARGET.read_text() if source is None else source
    for old, new in mutant.edits:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"mutant {mutant.id}: the edit's old text occurs {found} times in {TARGET.name}, not once: {old.strip()!r}")
        text = text.replace(old, new)
    return text


def materialize(mutant: Mutant, folder: Path) -> ModuleType:
    """Write the mutant into ``folder`` (Triton reads a kernel's source from its file)
    and import it under its own name."""
    path = Path(folder) / f"{mutant.module_name}.py"
    path.write_text(mutated_source(mutant))
    spec = importlib.util.spec_from_file_location(mutant.module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mutant.module_name] = module
    spec.loader.exec_module(module)
    return module
