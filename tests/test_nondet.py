"""remap-ab nondet on the CPU: permuted interpreter schedules stand in for the GPU's
scheduler. Small cases only (one or two token rows): each program costs milliseconds
in the interpreter."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from remap_ab import cli, runtime
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge import nondet, registry
from remap_ab.subjects.remap.judge.runner import reference

pytestmark = pytest.mark.skipif(runtime.cuda_available(), reason="schedule fuzzing runs in the Triton interpreter (CPU)")

RUNS = 5  # row_major, reversed, tiles_reversed, tiles_rotated:1, random:0


@pytest.fixture(scope="module", autouse=True)
def _cpu():
    runtime.select("cpu")


def _case(topk: int, tokens: int) -> CaseConfig:
    return nondet.nondet_cases([topk], [tokens])[0]


def _characterise(impl_name: str, config: CaseConfig) -> nondet.Multiplicity:
    inputs = generate_inputs(config)
    return nondet.characterise(registry.get(impl_name), config, inputs, nondet.cpu_schedule_runs(RUNS), "schedules")


def test_new_single_tile_gives_one_output_under_every_schedule():
    m = _characterise("new", _case(2048, 2))
    assert m.ordered and m.runs == RUNS
    assert (m.distinct_outputs, m.distinct_counts) == (1, 1)
    assert m.judge()[0] == "ok"


def test_old_at_2048_varies_and_is_reported_not_failed():
    config = _case(2048, 1)
    # The race needs several tiles holding valid lanes; make sure the case has them.
    valid = reference(config, generate_inputs(config)).valid
    tiles_with_valid = int(valid.view(config.tokens, config.tiles_per_row, config.block_n).any(dim=2).sum())
    assert tiles_with_valid >= 2
    m = _characterise("old", config)
    assert not m.ordered
    assert m.distinct_outputs > 1
    assert m.distinct_counts == 1
    assert m.judge()[0] == "reported"
    assert not m.contract_failures  # every order it produced is an allowed one


def test_new_tiled_at_384_is_as_racy_as_old_and_the_table_shows_it():
    m = _characterise("new", _case(384, 2))
    assert not m.ordered  # K=384 is no power of two: the atomic allocator stays
    assert m.distinct_outputs > 1
    assert m.judge()[0] == "reported"
    row = m.row()
    assert row["class"] == "K=384 non-pow2" and row["distinct_outputs"] == m.distinct_outputs


def test_counts_that_vary_always_fail_even_on_a_tiled_path():
    m = nondet.Multiplicity("schedules", "old", _case(384, 1), ordered=False, path="3 tiles", runs=2,
                            outputs=Counter({"a": 1, "b": 1}), counts=Counter({"c1": 1, "c2": 1}))
    status, why = m.judge()
    assert status == "FAIL" and "valid counts varied" in why


def test_an_error_is_a_failure():
    m = nondet.Multiplicity("schedules", "x", _case(2048, 1), ordered=True, path="single tile", runs=1,
                            errors=["row_major: RuntimeError: boom"])
    assert m.judge()[0] == "FAIL"


@pytest.fixture
def racy_single_tile_module(broken_impl):
    """A broken "new": it declares the single-tile shape (so its order contract promises
    column order) but launches the old tiled kernel with its atomic slot allocator."""
    return broken_impl("""
        from kernels_old import triton_convert_req_index_to_global_index, triton_filter_and_convert_dcp_index
        from kernels_new import _remap_tiling
    """)


def test_failure_rule_fires_for_an_order_nondeterministic_single_tile(racy_single_tile_module, tmp_path):
    out_dir = tmp_path / "out"
    rc = cli.main(["nondet", "--impls", racy_single_tile_module, "--topk", "2048", "--tokens", "1",
                   "--runs", str(RUNS), "--out", str(out_dir)])
    assert rc == 1
    [result] = json.loads((out_dir / "nondet.json").read_text())["results"]
    assert result["status"] == "FAIL"
    assert "promises column order" in result["why"] and result["distinct_outputs"] > 1


def test_cli_writes_table_json_and_chart(tmp_path, capsys):
    rc = cli.main(["nondet", "--topk", "2048,384", "--tokens", "1", "--runs", "4", "--out", str(tmp_path)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "K=2048 pow2" in printed and "K=384 non-pow2" in printed
    import pandas as pd

    frame = pd.read_csv(tmp_path / "nondet.csv")
    assert set(frame["impl"]) == {"old", "new"} and len(frame) == 4
    assert {"distinct_outputs", "distinct_counts", "status", "case_id"} <= set(frame.columns)
    assert (tmp_path / "nondet.png").exists() or (tmp_path / "nondet.svg").exists()


def test_cli_rejects_a_gpu_condition_on_cpu_in_one_line(tmp_path, capsys):
    rc = cli.main(["nondet", "--conditions", "contended", "--tokens", "1", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "contended" in err


def test_artifacts_land_under_the_shared_root(tmp_path, capsys):
    # Without --out, nondet writes beside the sweep's runs: <root>/nondet/<time>-<device>/.
    rc = cli.main(["nondet", "--topk", "128", "--tokens", "1", "--runs", "1", "--root", str(tmp_path)])
    assert rc == 0, capsys.readouterr()
    [folder] = (tmp_path / "nondet").iterdir()
    assert (folder / "nondet.json").is_file() and (folder / "nondet.csv").is_file()
    assert str(folder / "nondet.csv") in capsys.readouterr().out
