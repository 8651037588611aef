"""GPU-only checks of the sweep (skipped without CUDA by the remap-ab plugin)."""

import os
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = pytest.mark.gpu

FILTER = ["--filter", "tokens=1,16", "--filter", "k=384,2048", "--filter", "invalid=0.3"]


def test_batched_cuda_verdicts_equal_run_case_and_cpu_inputs(tmp_path):
    from remap_ab.subjects.remap.case.inputs import generate_inputs
    from remap_ab.subjects.remap.grid import grid
    from remap_ab.subjects.remap.judge.batch import hash_inputs, run_batch
    from remap_ab.subjects.remap.judge.runner import run_case

    g = grid.load()
    pts = g.select(grid.parse_filters(g, ["tokens=16", "k=384,2048", "invalid=0.3", "oor=on"]))
    outcomes = run_batch([p.config for p in pts], "old", "new", "cuda")
    for p, o in zip(pts, outcomes):
        ref = run_case(p.config, device="cuda").verdict
        assert o.verdict.status == ref.status and o.verdict.failures == ref.failures, p.case_id
        assert o.inputs_sha256 == hash_inputs(generate_inputs(p.config, "cpu"))[1]


def test_xdist_worker_sees_one_gpu_when_pinned():
    import torch

    if os.environ.get("REMAP_AB_PINNED_GPU"):
        assert torch.cuda.device_count() == 1


def _sweep(tmp_path, run, workers):
    r = subprocess.run(
        [sys.executable, "-m", "remap_ab", "sweep", *FILTER, "-j", str(workers), "--root", str(tmp_path), "--run", run,
         "--no-progress"],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode in (0, 1), r.stderr
    return pd.read_csv(tmp_path / run / "results.csv", keep_default_na=False, dtype={"gpu": str})


def test_one_worker_and_one_worker_per_gpu_agree(tmp_path):
    import torch

    one = _sweep(tmp_path, "one", 1)
    many = _sweep(tmp_path, "many", max(2, torch.cuda.device_count()))
    assert dict(zip(one.case_id, one.status)) == dict(zip(many.case_id, many.status))
    if torch.cuda.device_count() >= 2:
        assert many.gpu.nunique() >= 2  # the work really spread over the GPUs
