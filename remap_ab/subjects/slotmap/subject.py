"""vLLM's slot mapping as a declared subject (docs/slotmap.md): the host NumPy version (A)
against the device Triton kernel (B), each called in its own convention from one
scheduled batch (kernels_slotmap.adapter), both judged bit for bit against the torch
oracle. The PAD-tail contract is each case's ``pad_tail``; the host's int32 wrap and its
untouched tail are findings (the ``finding`` column, the summary's lines)."""

from __future__ import annotations

import importlib.util
import tempfile
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch

from kernels_slotmap import adapter
from remap_ab import runtime
from remap_ab.declare import Axis, Declared, Grid, Mutant, Output
from remap_ab.errors import ConfigError
from remap_ab.subjects.slotmap import cases

MUTANTS = tomllib.loads(Path(__file__).with_name("mutants.toml").read_text())["mutant"]
DEVICE_SOURCE = Path(__file__).resolve().parents[3] / "kernels_slotmap" / "device.py"


@dataclass(frozen=True)
class BlockGrid(Grid):
    """A grid of grid.toml's form (``name``: which of its grids): blocks of cross products."""

    file: str = str(cases.GRID_FILE)

    def cases(self) -> list[dict]:
        return list(cases.cases(self.name, Path(self.file)))


def block_grid(name: str = "default", file: Path = cases.GRID_FILE) -> BlockGrid:
    every = cases.cases(name, file)
    axes = tuple(Axis(a, tuple(sorted({c[a] for c in every}, key=lambda v: (str(type(v)), v)))) for a in cases.AXES)
    return BlockGrid(axes, tomllib.loads(file.read_text())["version"], size="requests", name=name, file=str(file))


def judged_as(call):
    """The implementation the A/B calls: ``call``'s buffer split as the case's PAD-tail contract says."""
    def implementation(pad_tail, **batch):
        buf, n = call(**batch), batch["positions"].shape[0]
        return buf[:n], buf[n:] if pad_tail == "judged" else buf[n:n]
    return implementation


@cache
def mutated(mutant_id: str):
    """device.py with the mutant's edits, imported from a file of its own (Triton reads a kernel's source)."""
    source = DEVICE_SOURCE.read_text()
    for edit in next(m for m in MUTANTS if m["id"] == mutant_id)["edit"]:
        assert source.count(edit["old"]) == 1, f"mutant {mutant_id}: {edit['old']!r} is not once in device.py"
        source = source.replace(edit["old"], edit["new"])
    path = Path(tempfile.mkdtemp(prefix="slotmap-mutant-")) / f"slotmap_mutant_{mutant_id}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SlotMapping(Declared):
    name = "slotmap"
    title = "vLLM's slot mapping, host NumPy against device Triton"
    grid = block_grid()
    implementations = {"host": judged_as(adapter.call_host), "device": judged_as(adapter.call_device),
                       "oracle": judged_as(adapter.call_oracle)}  # --a oracle: B judged alone, past A's findings
    outputs = (Output("slots"), Output("tail"))
    oracle = staticmethod(judged_as(adapter.call_oracle))
    extra_columns = ("finding",)
    mutants = tuple(Mutant(m["id"], judged_as(lambda i=m["id"], **batch: adapter.call_device(**batch, module=mutated(i))),
                           m["killed_by"], m["description"]) for m in MUTANTS)

    def inputs(self, case: dict, device: str) -> dict:
        runtime.select(device)  # the interpreter switch before the device kernel's import
        batch, params = cases.batch(case, self.seed(case))
        stale = np.arange(batch.max_num_tokens, dtype=np.int64) + 7_000_000  # an earlier step's slots
        table, qsl, positions, buf = (torch.from_numpy(t).to(device) for t in (
            batch.table_buffer, batch.query_start_loc, batch.positions, stale))
        return {"table_buffer": table, "columns": batch.columns, "query_start_loc": qsl, "positions": positions,
                "slot_mapping": buf, "params": params, "pad_tail": case["pad_tail"]}

    def select(self, grid, filters, max_size, a, b, device, resume):
        if grid not in (None, "", "default", "envelope") and not Path(str(grid)).is_file():
            raise ConfigError(f"--grid {grid}: the slotmap grids are default and envelope, or a file of {cases.GRID_FILE}'s form")
        self.grid = block_grid(grid) if grid == "envelope" else block_grid("default", Path(grid)) if grid not in (
            None, "", "default") else type(self).grid
        selection = super().select(None, filters, max_size, a, b, device, resume)
        judged = sum(p.config["pad_tail"] == "judged" for p in selection.points)
        selection.header = [f"slotmap ({grid or 'default'} grid): the PAD-tail contract: only slot_mapping[:num_tokens] "
                            f"judged in {len(selection.points) - judged} cases, the tail too (it must be PAD) in {judged}; "
                            "choose one with --filter pad_tail=ignored or --filter pad_tail=judged"]
        return selection

    def extras(self, case: dict, judged) -> dict:
        found = []
        for m in (m for m in judged.mismatches if m.side == "a"):
            got, want = (judged.outputs[k][m.output].cpu().numpy() for k in ("a", "oracle"))
            if m.output == "tail":
                found.append("host-leaves-tail")
            elif ((got == want) | (got == want - 2**32)).all():  # block * block_size wrapped in int32
                found.append("int32-wrap")
        return {"finding": " ".join(found)}

    def summary_findings(self, rows) -> list[str]:
        lines = []
        for finding in ("int32-wrap", "host-leaves-tail"):
            hit = rows[rows["finding"].fillna("").astype(str).str.contains(finding)]
            if len(hit):
                first = {a: int(v) if str(v).isdigit() else str(v) for a, v in hit.iloc[0][list(cases.AXES)].items()}
                lines.append(f"  finding {finding} (the host version): {len(hit)} cases, the first {hit.iloc[0]['case_id']}: "
                             f"{self.replay_line(first, None, None, self.default_a, self.default_b)}")
        return lines

    def strategy(self):
        return cases.strategy()


SUBJECT = SlotMapping()
