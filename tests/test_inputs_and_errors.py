"""Deterministic inputs, one-line refusals of bad configurations and bad inputs."""

import subprocess
import sys

import pytest
import torch

from remap_ab.config import CaseConfig
from remap_ab.errors import ConfigError, InputError
from remap_ab.inputs import generate_inputs
from remap_ab.runner import run_case


def test_same_case_same_bytes_new_seed_new_bytes():
    config = CaseConfig(mode="convert", tokens=64, topk=256, prefill_fraction=0.3, negatives="any", out_of_range=0.2, row_layout="mixed")
    first, again = generate_inputs(config).sha256(), generate_inputs(config).sha256()
    assert first == again and set(first) == {"req_id", "block_table", "token_indices", "prefill_request_ids", "prefill_starts"}
    other = generate_inputs(config.replace(seed=1)).sha256()
    assert all(first[k] != other[k] for k in ("req_id", "block_table", "token_indices"))


def test_case_id_is_stable_and_value_based():
    a, b = CaseConfig(tokens=8), CaseConfig(tokens=8)
    assert a.case_id == b.case_id and len(a.case_id) == 12
    assert a.case_id != CaseConfig(tokens=9).case_id
    assert hash(a) == hash(b)
    assert CaseConfig.from_dict(a.to_dict()) == a


def test_ratios_are_honoured_exactly_at_the_ends():
    none_invalid = generate_inputs(CaseConfig(invalid_ratio=0.0, topk=256, tokens=8)).token_indices
    all_invalid = generate_inputs(CaseConfig(invalid_ratio=1.0, topk=256, tokens=8)).token_indices
    assert (none_invalid >= 0).all() and (all_invalid < 0).all()


@pytest.mark.parametrize(
    "options,needle",
    [
        (["--dcp-rank", "4", "--dcp-size", "4"], "dcp_rank=4"),
        (["--interleave", "48"], "does not divide block_size"),
        (["--topk", "300"], "not a multiple of block_n"),
        (["--tokens", "0"], "at least one token"),
        (["--invalid-ratio", "1.5"], "invalid_ratio"),
        (["--mode", "prefill"], "mode="),
        (["--tokens", "many"], "not a valid int"),
    ],
)
def test_bad_configuration_is_one_line(options, needle):
    proc = subprocess.run(
        [sys.executable, "-m", "remap_ab", "run", *options], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def _inputs(config):
    return generate_inputs(config)


def test_wrong_dtype_is_refused():
    config = CaseConfig(topk=256, tokens=2)
    inputs = _inputs(config)
    inputs.token_indices = inputs.token_indices.to(torch.int64)
    with pytest.raises(InputError, match="token_indices has dtype torch.int64"):
        run_case(config, inputs=inputs)


@pytest.mark.parametrize("delta", [-1, 1])
def test_req_id_length_must_match(delta):
    config = CaseConfig(topk=256, tokens=3)
    inputs = _inputs(config)
    inputs.req_id = torch.zeros(3 + delta, dtype=torch.int32)
    with pytest.raises(InputError, match=f"req_id has {3 + delta} rows but token_indices has 3"):
        run_case(config, inputs=inputs)


def test_bad_input_file_is_one_line(tmp_path):
    config = CaseConfig(topk=256, tokens=2)
    inputs = _inputs(config).tensors()
    inputs["req_id"] = inputs["req_id"].to(torch.int64)
    torch.save(inputs, tmp_path / "in.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a tensor file")
    for path, needle in ((tmp_path / "in.pt", "req_id has dtype torch.int64"),
                         (tmp_path / "junk.pt", "cannot read input file"),
                         (tmp_path / "missing.pt", "does not exist")):
        proc = subprocess.run(
            [sys.executable, "-m", "remap_ab", "run", "--topk", "256", "--tokens", "2", "--inputs", str(path)],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


def test_config_error_is_raised_at_construction():
    with pytest.raises(ConfigError):
        CaseConfig(prefill_fraction=0.5)  # the DCP wrapper has no prefill workspace


def test_run_command_prints_verdict_and_replays():
    config = CaseConfig(topk=384, tokens=2, dcp_size=2)
    proc = subprocess.run(
        [sys.executable, "-m", "remap_ab", "run", *config.cli_args().split()], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert f"case {config.case_id}: PASS" in proc.stdout
