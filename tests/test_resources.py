"""remap-ab resources: cross-compiling every variant of A and B for GPU targets on a
machine without one. The gate (exit 1) is proved by B implementations that spill where
A does not and that fail to compile; the binding by the specialisation a launch gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remap_ab import cli
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.bench import cross_compile, resources

KERNEL = Path(__file__).resolve().parents[1] / "kernels_new" / "_remap.py"


def _variant_module(tmp_path, monkeypatch, name: str, old: str, new: str) -> str:
    """kernels_new/_remap.py with one edit, importable as ``name`` (here and in the
    spawned compile workers, which inherit sys.path)."""
    source = KERNEL.read_text()
    assert source.count(old) == 1
    (tmp_path / f"{name}.py").write_text(source.replace(old, new))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.forget(name)
    return name


def _run(tmp_path, *argv) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    rc = cli.main(["resources", "--targets", "sm_90,gfx942", "--jobs", "2", "--json", str(out), *argv])
    return rc, json.loads(out.read_text())


def test_the_same_kernel_passes_and_every_row_has_its_figures(tmp_path, capsys):
    rc, data = _run(tmp_path, "--a", "new", "--b", "new", "--paths", "counts,dcp-compact,nocounts", "--topk", "384,2048")
    assert rc == 0
    rows = data["rows"]
    assert len(rows) == 2 * 2 * 3 * 2  # targets x sides x paths x K
    cuda = [r for r in rows if r["target"] == "sm_90"]
    amd = [r for r in rows if r["target"] == "gfx942"]
    assert all(r["regs"] > 0 and r["spill_bytes"] == 0 and r["arch"] == "sm_90a" for r in cuda)
    assert all(r["vgprs"] > 0 and r["sgprs"] > 0 and r["compiler_occupancy"] for r in amd)
    single = [r for r in cuda if r["path"] == "counts" and r["topk"] == 2048]
    assert all(r["single_tile"] and r["num_warps"] == 8 and r["tiles_per_row"] == 1 for r in single)
    tiled = [r for r in cuda if r["path"] == "counts" and r["topk"] == 384]
    assert all(not r["single_tile"] and r["num_warps"] == 4 and r["tiles_per_row"] == 3 for r in tiled)
    # The launch's own specialisation: unit strides constant, unused pointers None,
    # pointers and row strides known divisible by 16.
    nocounts = next(r for r in cuda if r["path"] == "nocounts")
    assert "valid_counts_ptr=None" in nocounts["specialised_constants"]
    assert "ti_stride1=1" in nocounts["specialised_constants"]
    assert "ti_stride0" in nocounts["divisible_by_16"].split()
    text = capsys.readouterr().out
    assert "PASS" in text and "sm_90 (sm_90a, Triton" in text and "gfx942 (gfx942" in text


# Upstream's DCP compaction after #50365 in this specialisation (W = 64, sm_90a, Triton
# 3.7.1), as issue 22 gives it; the figure moves with the kernel's statement order.
UPSTREAM_DCP_COMPACT_2048_SM90_REGS = 47


def test_one_job_compiles_in_a_process_of_its_own_and_the_dcp_compaction_matches_upstreams_registers(tmp_path):
    import triton

    out = tmp_path / "r.json"
    rc = cli.main(["resources", "--targets", "sm_90", "--paths", "dcp-compact", "--topk", "2048", "--jobs", "1",
                   "--json", str(out)])
    assert rc == 0
    (row,) = [r for r in json.loads(out.read_text())["rows"] if r["side"] == "B"]
    if triton.__version__ == "3.7.1":
        assert row["regs"] == UPSTREAM_DCP_COMPACT_2048_SM90_REGS, row
    else:
        assert row["regs"] > 0


def test_the_figures_stay_whole_beside_a_gpu_process_that_caches_binaries_only(tmp_path, monkeypatch):
    # A user's environment may set TRITON_STORE_BINARY_ONLY=1; the figures read the PTX
    # and AMDGCN text, so the cross-compile keeps them all the same.
    monkeypatch.setenv("TRITON_STORE_BINARY_ONLY", "1")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    rc, data = _run(tmp_path, "--a", "new", "--b", "new", "--paths", "counts", "--topk", "2048")
    assert rc == 0
    assert {r["arch"] for r in data["rows"] if r["target"] == "sm_90"} == {"sm_90a"}
    assert all(r["vgprs"] > 0 and r["compiler_occupancy"] for r in data["rows"] if r["target"] == "gfx942")


def test_b_that_spills_where_a_does_not_fails_the_gate(tmp_path, monkeypatch, capsys):
    b = _variant_module(tmp_path, monkeypatch, "narrow_single_tile", "_SINGLE_TILE_NUM_WARPS = 8", "_SINGLE_TILE_NUM_WARPS = 1")
    rc, data = _run(tmp_path, "--a", "new", "--b", b, "--paths", "counts", "--topk", "8192")
    assert rc == 1
    assert any("B (narrow_single_tile) spills" in line and "A (new) does not" in line
               for line in data["verdict"]["regressions"])
    assert "FAIL" in capsys.readouterr().out


def test_b_that_fails_to_compile_fails_the_gate(tmp_path, monkeypatch):
    b = _variant_module(tmp_path, monkeypatch, "bad_arange", "cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)",
                        "cols = tile * BLOCK_N + tl.arange(0, BLOCK_N + 1)")
    rc, data = _run(tmp_path, "--a", "new", "--b", b, "--paths", "counts", "--topk", "256")
    assert rc == 1
    assert all("fails to compile" in line for line in data["verdict"]["regressions"])
    assert len(data["verdict"]["regressions"]) == 2


@pytest.mark.parametrize("argv, says", [
    (["--targets", "sm_91"], "--targets 'sm_91': choose from"),
    (["--paths", "nope"], "--paths 'nope': choose from"),
    (["--block-n", "96"], "--block-n 96: BLOCK_N must be a power of two"),
    (["--topk", "100"], "--topk 100: must be a positive multiple"),
    (["--b", "no_such_module_here"], "cannot import implementation"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert cli.main(["resources", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err


def test_regressions_and_onsets_from_rows():
    def row(side, k, spill, error=None):
        return {"side": side, "impl": {"A": "old", "B": "new"}[side], "target": "sm_90", "path": "counts", "topk": k,
                "block_n": 128, "regs": 255 if spill else 40, "spill_bytes": 8 if spill else 0, "spills": spill,
                "tiles_per_row": 1, "launched_block_n": k, "num_warps": 8, "error": error, "triton": "x"}
    rows = [row("A", 2048, False), row("B", 2048, False), row("A", 8192, True), row("B", 8192, True),
            row("A", 16384, False), row("B", 16384, True)]
    assert cross_compile.regressions(rows) == [
        "sm_90 counts K=16384 BLOCK_N=128: B (new) spills (8 B spill stores, 255 registers), A (old) does not"]
    onsets = cross_compile.spill_onsets(rows)
    assert "sm_90 counts B (new), BLOCK_N 128: spills from K = 8192" in onsets[1]
    rows.append(row("B", 4096, False, error="boom"))
    assert any("fails to compile: boom" in line for line in cross_compile.regressions(rows))


def test_occupancy_limits_per_target():
    # sm_120 holds 48 warps: 8-warp blocks of 32 registers fit 6, all threads.
    occ = resources.occupancy(32, 8, 0, resources.SM120)
    assert occ.blocks == 6 and occ.fraction == 1.0
    # AMD: the compiler's register-bound waves, lowered by LDS (64 KiB per CU on CDNA3).
    assert resources.cu_occupancy(8, 8, 0).waves_per_simd == 8
    lds = resources.cu_occupancy(8, 8, 32 * 1024)
    assert lds.waves_per_simd == 4 and lds.limiter == "LDS"
    assert resources.cu_occupancy(8, 8, 32 * 1024, resources.CDNA4).waves_per_simd == 8
    assert resources.cu_occupancy(None, 8, 0) is None


def test_a_known_spill_is_reported_but_not_failed():
    rows = [{"side": s, "impl": s, "target": "sm_90", "path": "dcp-compact", "topk": 16384, "block_n": 128,
             "regs": 255, "spill_bytes": 40 if s == "B" else 0, "spills": s == "B"} for s in ("A", "B")]
    assert len(cross_compile.regressions(rows)) == 1
    assert cross_compile.regressions(rows, ["*:dcp-compact:16384"]) == []
    assert len(cross_compile.known_regressions(rows, ["sm_90:*:*"])) == 1
    assert len(cross_compile.regressions(rows, ["sm_90:counts:16384"])) == 1  # another path: still a regression


@pytest.mark.gpu
def test_cross_compiled_figures_equal_the_loaded_kernels_on_this_gpu():
    """On the GPU: each variant cross-compiled for the device's own target has the
    registers, spills and shared memory the driver reports for the kernel the wrapper
    really launched (the binding is the launch's)."""
    import torch
    from triton.runtime import jit

    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    major, minor = torch.cuda.get_device_capability()
    target = {(8, 0): "sm_80", (9, 0): "sm_90", (10, 0): "sm_100", (12, 0): "sm_120"}.get((major, minor))
    if target is None:
        pytest.skip(f"no resources target for compute capability {major}.{minor}")
    paths, topks = ("counts", "nocounts", "dcp-compact"), (384, 2048)
    cross = {(r["side"], r["path"], r["topk"]): r for r in cross_compile.run("old", "new", [target], paths, topks, (128,), 2)}
    launched: list = []
    original = jit.JITFunction.run

    def run(self, *args, **kwargs):
        compiled = original(self, *args, **kwargs)
        launched.append(compiled)
        return compiled

    jit.JITFunction.run = run
    try:
        for side, impl in (("A", "old"), ("B", "new")):
            for path in paths:
                for k in topks:
                    config = CaseConfig(topk=k, block_n=128, tokens=cross_compile.TOKENS, **cross_compile.PATHS[path])
                    launched.clear()
                    registry.get(impl)(config, generate_inputs(config, device="cuda"))
                    facts = resources.compiled_facts(launched[-1])
                    row = cross[(side, path, k)]
                    where = f"{impl} {path} K={k}"
                    assert facts["n_regs"] == row["regs"], where
                    assert (facts["n_spills"] or 0) > 0 if row["spills"] else (facts["n_spills"] or 0) == 0, where
                    assert facts["shared"] == row["shared_bytes"], where
                    assert facts["num_warps"] == row["num_warps"], where
    finally:
        jit.JITFunction.run = original
