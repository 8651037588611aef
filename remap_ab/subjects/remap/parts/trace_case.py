"""Recorded calls of the remap as cases (``sweep --trace``): one recorded call
(``trace_file.Sample``) becomes a ``CaseConfig`` plus the recorded inputs, judged as a
grid case is (``runner.run_case``: A, B and the oracle through ``call.call``, ``compare``
the verdict; a report folder holding the inputs when it fails)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from remap_ab import report_cap
from remap_ab.errors import InputError
from remap_ab.subject import JudgeSettings
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import CaseInputs, check_inputs, hash_inputs
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.batch import CaseOutcome
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report.failure_class import slot_key
from remap_ab.subjects.remap.report.recording import outcome_row
from remap_ab.subjects.remap.report.report import write_case_report
from remap_ab.subjects.remap.traced import BUFFERS, FUNCTIONS
from remap_ab.traces import trace_file

# A recorded input's name -> CaseInputs' name for it.
_CASE_NAMES = {"prefill_workspace_request_ids": "prefill_request_ids", "prefill_workspace_starts": "prefill_starts"}
# The SPEC §1 defaults of the parameters a case reads (a call records every parameter its function has).
_DEFAULTS = {"BLOCK_SIZE": 64, "NUM_TOPK_TOKENS": 2048, "BLOCK_N": 128, "cp_kv_cache_interleave_size": 1,
             "return_valid_counts": False, "compact_valid_to_front": True, "HAS_PREFILL_WORKSPACE": False}


def layout_of(strides: dict) -> str:
    """The shipped input layout (layouts.py) nearest to the recorded one: each strided
    input is placed as that layout places it; several kinds at once are ``mixed``.
    ``strides``: input name -> {"shape", "stride", "offset"} as recorded."""
    kinds = set()
    t = strides.get("token_indices")
    if t and len(t["shape"]) == 2:
        rows, cols = t["shape"]
        if cols > 1 and t["stride"][1] != 1:
            kinds.add("token_cols")
        elif rows > 1 and t["stride"][0] > cols:
            kinds.add("token_rows")
    b = strides.get("block_table")
    if b and len(b["shape"]) == 2 and b["shape"][0] > 1 and b["stride"][0] > b["shape"][1]:
        kinds.add("table_slice")
    r = strides.get("req_id")
    if r and r["shape"] and r["shape"][0] > 1 and r["stride"][0] != 1:
        kinds.add("req_strided")
    if any(s.get("offset", 0) for s in strides.values()):
        kinds.add("offset")
    if not kinds:
        return "contiguous"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def case_of(sample) -> tuple:
    """``(CaseConfig, CaseInputs)`` of a recorded call (``trace_file.Sample``): the
    configuration its parameters and shapes make, its seed a digest of its inputs (so
    each distinct call has a case ID and a report folder of its own; the inputs are the
    recorded ones, never generated from it). ConfigError or InputError (one line) when
    the call is no case of the remap."""
    mode = FUNCTIONS.get(sample.function)
    if mode is None:
        raise InputError(f"records a call of {sample.function}, which is not one of the remap's functions "
                         f"({', '.join(FUNCTIONS)})")
    p = {**_DEFAULTS, **sample.params}
    tensors = {_CASE_NAMES.get(k, k): v for k, v in sample.tensors.items()}
    for name in ("req_id", "block_table", "token_indices"):
        if name not in tensors:
            raise InputError(f"records no {name} (a call needs req_id, block_table and token_indices)")
    tokens, topk = (int(n) for n in tensors["token_indices"].shape) if tensors["token_indices"].dim() == 2 else (0, 0)
    table = tensors["block_table"]
    has_prefill = mode == "convert" and bool(p.get("HAS_PREFILL_WORKSPACE"))
    fields: dict[str, Any] = {
        "mode": mode, "tokens": tokens, "topk": int(p["NUM_TOPK_TOKENS"]), "block_size": int(p["BLOCK_SIZE"]),
        "block_n": int(p["BLOCK_N"]), "num_reqs": int(table.shape[0]) if table.dim() == 2 else 0,
        "blocks_per_req": int(table.shape[1]) if table.dim() == 2 else 0,
        "counts": bool(p["return_valid_counts"]), "layout": layout_of(sample.strides),
        "block_stride": int(p.get("BLOCK_STRIDE_ROWS") or 0),
        "out_buffers": any(sample.buffers.get(name) for name in BUFFERS),
    }
    if topk != fields["topk"]:
        raise InputError(f"token_indices is {topk} wide but NUM_TOPK_TOKENS is {fields['topk']}")
    if mode == "dcp":
        fields.update(dcp_size=int(p["dcp_size"]), dcp_rank=int(p["dcp_rank"]),
                      interleave=int(p["cp_kv_cache_interleave_size"]), compact=bool(p["compact_valid_to_front"]))
    if has_prefill:
        ids = tensors.get("prefill_request_ids")
        share = float((ids >= 0).sum()) / max(1, tokens) if ids is not None else 0.0
        # Any share > 0 turns the workspace on; the share itself only shapes generated inputs.
        fields["prefill_fraction"] = share if share > 0 else 1.0 / (tokens + 1)
    inputs = CaseInputs(**{k: v.contiguous() for k, v in tensors.items()
                           if k in ("req_id", "block_table", "token_indices")
                           or (has_prefill and k in ("prefill_request_ids", "prefill_starts"))})
    digest = hashlib.sha256(json.dumps(sorted(inputs.sha256().items())).encode()).hexdigest()
    fields["seed"] = int(digest[:8], 16)
    config = CaseConfig(**fields)
    check_inputs(config, inputs)  # SPEC §2 on the recorded values: one line now, not a crash where it is judged
    return config, inputs


@dataclass(frozen=True)
class TraceCase:
    """One recorded call as a sweep point: the file it was read from, its signature
    (the recorder's: shapes, dtypes, strides and parameters), its case. The inputs are
    read again from ``path`` where the case is judged (a worker), never sent across."""

    path: str
    signature: str
    config: Any  # CaseConfig

    @property
    def case_id(self) -> str:
        return self.config.case_id

    # The sweep's machinery reads these of a case (subject.cost, progress, the summary).
    @property
    def tokens(self) -> int:
        return self.config.tokens

    @property
    def topk(self) -> int:
        return self.config.topk

    def to_dict(self) -> dict:
        return {"trace": self.path, "signature": self.signature, "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> TraceCase:
        return cls(d["trace"], d["signature"], CaseConfig.from_dict(d["config"]))


def judge_traces(cases: list, settings: JudgeSettings, times=None) -> list[dict]:
    """A results row per recorded call, each judged by ``run_case`` on the recorded
    inputs (every check a grid case gets: on a GPU the sync, stream and graph checks of
    every call unless ``call_checks`` is off), and a report folder, the inputs stored in
    it, for each failing call its failure class has room for (``settings.reports``)."""
    a, b, device, folder = settings.a, settings.b, settings.device, settings.folder
    slots = report_cap.slots(folder, settings.reports) if folder is not None else None
    production = torch.device(device).type == "cuda" and settings.call_checks != "off"
    rows = []
    for case in cases:
        start = time.perf_counter()
        _, inputs = case_of(trace_file.read(case.path))
        result = run_case(case.config, a, b, device=device, inputs=inputs, memcheck=settings.memcheck,
                          production=production)
        v = result.verdict
        outcome = CaseOutcome(case.config, v, result.a.seconds * 1e3, result.b.seconds * 1e3,
                              inputs_sha256=hash_inputs(result.inputs)[1],
                              max_row_valid=int(result.reference.counts.max()) if result.reference.counts.numel() else 0)
        report = ""
        if not v.passed and folder is not None:
            check = str(v.first.check) if v.first else str(v.status)
            if slots is None or slots.claim_key(slot_key(case.config, check), case.case_id):
                report = write_case_report(result, Path(folder), implementations=(registry.get(a), registry.get(b)),
                                           inputs_generated=False).name
        rows.append(outcome_row(outcome, report))  # the signature is the point's label
        if times is not None:
            times.seconds["kernels"] += time.perf_counter() - start
    return rows
