"""vLLM's slot mapping as a declared subject (docs/slotmap.md): the host NumPy version (A)
against the device Triton kernel (B), each called in its own convention from one
scheduled batch (kernels_slotmap.adapter), both judged bit for bit against the torch
oracle. The PAD-tail contract is each case's ``pad_tail``; the host's int32 wrap and its
untouched tail are findings (the ``finding`` column, the summary's lines)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import torch

from kernels_slotmap import adapter
from remap_ab import runtime
from remap_ab.declare import Declared, Grid, Output, from_edits, from_toml
from remap_ab.subjects.slotmap import cases

HERE = Path(__file__).parent


def block_grid(table: str, file: Path = cases.GRID_FILE, name: str = "") -> Grid:
    return from_toml(file, table, size="requests", keep=cases.valid, name=name or table)


def judged_as(call):
    """The implementation the A/B calls: ``call``'s buffer split as the case's PAD-tail contract says."""
    def implementation(pad_tail, **batch):
        buf, n = call(**batch), batch["positions"].shape[0]
        return buf[:n], buf[n:] if pad_tail == "judged" else buf[n:n]
    return implementation


class SlotMapping(Declared):
    name = "slotmap"
    title = "vLLM's slot mapping, host NumPy against device Triton"
    grid = block_grid("default")
    grids = {"envelope": block_grid("envelope")}
    implementations = {"host": judged_as(adapter.call_host), "device": judged_as(adapter.call_device),
                       "oracle": judged_as(adapter.call_oracle)}  # --a oracle: B judged alone, past A's findings
    outputs = (Output("slots"), Output("tail"))
    bench = tuple(block_grid("bench").cases())  # decode and prefill sizes; the host timed as vLLM runs it
    bench_implementations = {"host": lambda pad_tail, **batch: partial(
        judged_as(adapter.host_as_vllm_runs_it(**batch)), pad_tail, **batch)}
    bench_eager = ("host",)  # NumPy on the host: a graph would hold its copy alone
    oracle = staticmethod(judged_as(adapter.call_oracle))
    no_host_sync = ("device",)  # the host version copies to and from the host by design
    extra_columns = ("finding",)
    findings = {"int32-wrap": "the host version: block * block_size wrapped in int32",
                "host-leaves-tail": "the host version leaves the PAD tail as it was"}
    mutants = from_edits(HERE / "mutants.toml", HERE.parents[2] / "kernels_slotmap" / "device.py",
                         lambda module: judged_as(partial(adapter.call_device, module=module)))

    def grid_from_file(self, path: Path):
        return block_grid("default", path, name=path.name)

    def header_lines(self, grid, points) -> list[str]:
        judged = sum(p.config["pad_tail"] == "judged" for p in points)
        return [f"slotmap ({grid.name} grid): the PAD-tail contract: only slot_mapping[:num_tokens] judged in "
                f"{len(points) - judged} cases, the tail too (it must be PAD) in {judged}; "
                "choose one with --filter pad_tail=ignored or --filter pad_tail=judged"]

    def inputs(self, case: dict, device: str) -> dict:
        runtime.select(device)  # the interpreter switch before the device kernel's import
        batch, params = cases.batch(case, self.seed(case))
        stale = np.arange(batch.max_num_tokens, dtype=np.int64) + 7_000_000  # an earlier step's slots
        table, qsl, positions, buf = (torch.from_numpy(t).to(device) for t in (
            batch.table_buffer, batch.query_start_loc, batch.positions, stale))
        return {"table_buffer": table, "columns": batch.columns, "query_start_loc": qsl, "positions": positions,
                "slot_mapping": buf, "params": params, "pad_tail": case["pad_tail"]}

    def fresh_inputs(self, case: dict, inputs: dict, device: str) -> dict:  # the graph replayed on another step's table
        table = inputs["table_buffer"]
        return {**inputs, "table_buffer": table.flatten().roll(1).view_as(table)}

    def extras(self, case: dict, judged) -> dict:
        found = []
        for m in (m for m in judged.mismatches if m.side == "a"):
            got, want = (judged.outputs[k][m.output].cpu().numpy() for k in ("a", "oracle"))
            if m.output == "tail":
                found.append("host-leaves-tail")
            elif ((got == want) | (got == want - 2**32)).all():  # block * block_size wrapped in int32
                found.append("int32-wrap")
        return {"finding": " ".join(found)}

    def strategy(self):
        return cases.strategy()


SUBJECT = SlotMapping()
