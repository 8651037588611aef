"""Deterministic inputs, one-line refusals of bad configurations and bad inputs."""

import subprocess
import sys

import pytest
import torch

from remap_ab.errors import ConfigError, InputError, InternalError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import generate_inputs
from remap_ab.subjects.remap.judge.runner import run_case


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
def test_bad_configuration_is_one_line(options, needle, capsys):
    status, err = _run_command(["run", *options], capsys)
    assert status == 2
    assert err.count("\n") == 1 and needle in err, err
    assert "Traceback" not in err


def _run_command(argv, capsys) -> tuple:
    """``remap-ab ARGV`` in this process (what `python -m remap_ab` runs, and exits with):
    (its status, its stderr). argparse refuses with SystemExit; the rest return a status."""
    from remap_ab import cli

    capsys.readouterr()
    try:
        status = cli.main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    return status, capsys.readouterr().err


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


def test_bad_input_file_is_one_line(tmp_path, capsys):
    config = CaseConfig(topk=256, tokens=2)
    inputs = _inputs(config).tensors()
    inputs["req_id"] = inputs["req_id"].to(torch.int64)
    torch.save(inputs, tmp_path / "in.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a tensor file")
    for path, needle in ((tmp_path / "in.pt", "req_id has dtype torch.int64"),
                         (tmp_path / "junk.pt", "cannot read input file"),
                         (tmp_path / "missing.pt", "does not exist")):
        status, err = _run_command(["run", "--topk", "256", "--tokens", "2", "--inputs", str(path)], capsys)
        assert status == 2 and err.count("\n") == 1 and needle in err, err


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


# --- how the command line turns exceptions into exit statuses -------------------------


def _fake_command(monkeypatch, exc):
    """Make `remap-ab run` raise ``exc`` as its first act."""
    from remap_ab.commands import run as run_command

    def boom(args):
        raise exc

    monkeypatch.setattr(run_command, "main", boom)


@pytest.mark.parametrize(
    "exc,status,needle",
    [
        (InputError("bad\ninput"), 2, "remap-ab run: error: bad input"),
        (InternalError("the oracle disagrees"), 3, "internal: the oracle disagrees (a remap-ab bug"),
        (ValueError("surprise\nacross lines"), 3, "internal error: ValueError: surprise across lines (a remap-ab bug; "
                                                  "rerun with REMAP_AB_TRACEBACK=1"),
        (KeyError("k"), 3, "internal error: KeyError: 'k'"),
    ],
)
def test_every_exception_is_one_line_with_its_status(monkeypatch, capsys, exc, status, needle):
    from remap_ab import cli

    monkeypatch.delenv("REMAP_AB_TRACEBACK", raising=False)
    _fake_command(monkeypatch, exc)
    assert cli.main(["run"]) == status
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err, err


def test_traceback_only_when_asked(monkeypatch, capsys):
    from remap_ab import cli

    monkeypatch.setenv("REMAP_AB_TRACEBACK", "1")
    _fake_command(monkeypatch, ValueError("surprise"))
    assert cli.main(["run"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("for the traceback)")


def test_a_closed_stdout_ends_quietly(monkeypatch, capsys):
    # `remap-ab report --json | head`: the reader leaves; no traceback, no message.
    from remap_ab import cli

    _fake_command(monkeypatch, BrokenPipeError(32, "Broken pipe"))
    assert cli.main(["run"]) == cli.CLOSED_STDOUT_STATUS
    assert capsys.readouterr().err == ""


def test_the_oracle_disagreeing_with_itself_is_internal(monkeypatch, capsys):
    # Not the user's fault: an ERROR verdict naming the oracle, built where every verdict
    # is (the sweep records it like any case), and `run` exits 3, never 2.
    from remap_ab import cli
    from remap_ab.status import Check
    from remap_ab.subjects.remap.judge import runner

    real = runner.reference

    def shifted(config, inputs):
        import dataclasses

        ref = real(config, inputs)
        return dataclasses.replace(ref, out=ref.out + 1)

    monkeypatch.setattr(runner, "reference", shifted)
    v = run_case(CaseConfig(topk=128, tokens=1)).verdict
    assert v.status == "error" and v.first.check == Check.ERROR and v.first.impl == "oracle"
    assert "internal: the oracle's public API disagrees with its reference (a remap-ab bug" in v.first.message
    assert cli.main(["run", "--topk", "128", "--tokens", "1"]) == 3
    assert "a remap-ab bug" in capsys.readouterr().out


def test_run_help_documents_every_case_option():
    # Meaning, default and allowed values, from CaseConfig's field metadata.
    from dataclasses import fields

    from remap_ab import cli
    from remap_ab.subjects.remap.case.config import field_help

    help_text = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    squeezed = "".join(help_text.split())  # argparse wraps lines (at hyphens too)
    for f in fields(CaseConfig):
        assert "--" + f.name.replace("_", "-") in help_text
        assert "".join(field_help(f.name).split()) in squeezed, f.name
    assert "".join("one of minus_one, any; default minus_one".split()) in squeezed
    assert "(defaulton)" in squeezed  # booleans say on/off


def test_strict_types_in_the_api_and_coercion_from_text():
    with pytest.raises(ConfigError, match="tokens='3' is a str, not an int"):
        CaseConfig(tokens="3")
    with pytest.raises(ConfigError, match="tokens=True is a bool"):
        CaseConfig(tokens=True)
    with pytest.raises(ConfigError, match="compact='no' is a str, not a bool"):
        CaseConfig(compact="no")
    assert CaseConfig(invalid_ratio=0) == CaseConfig(invalid_ratio=0.0)
    assert CaseConfig(invalid_ratio=0).case_id == CaseConfig(invalid_ratio=0.0).case_id
    assert CaseConfig.from_dict({"tokens": "3", "compact": "false", "invalid_ratio": "0"}) == CaseConfig(
        tokens=3, compact=False, invalid_ratio=0.0
    )


def test_saved_inputs_are_checked_before_any_kernel(monkeypatch):
    # The registry must not even be consulted: a bad req_id would read out of bounds.
    from remap_ab.subjects.remap.judge import registry
    def no_kernels(name):
        raise AssertionError("an implementation was imported before the inputs were checked")

    monkeypatch.setattr(registry, "get", no_kernels)
    config = CaseConfig(mode="convert", topk=128, tokens=2, prefill_fraction=0.5)
    inputs = _inputs(config)
    inputs.prefill_request_ids = torch.tensor([-1, 7], dtype=torch.int32)
    with pytest.raises(InputError, match=r"prefill_request_ids\[1\] = 7"):
        run_case(config, inputs=inputs)


def test_implementation_output_is_checked(broken_impl):
    impl = broken_impl("""
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return None
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """)
    v = run_case(CaseConfig(topk=128, tokens=1), "old", impl).verdict
    assert v.status == "error" and not v.passed
    assert f"{impl} returned None; with return_valid_counts it must return (out, valid_counts)" in v.describe()


def test_memory_bound_says_which_limit(monkeypatch):
    from remap_ab.errors import ResourceError
    from remap_ab.subjects.remap.case import inputs as inputs_module

    monkeypatch.setattr(inputs_module, "available_bytes", lambda device: (1 << 20, "available host memory"))
    with pytest.raises(ResourceError, match="only 1.0 MiB of available host memory"):
        run_case(CaseConfig(topk=2048, tokens=8))


def test_sha256_of_a_one_row_strided_tensor_is_that_of_its_copy():
    """A size-1 dimension with a stride other than 1 (a strided req_id of one token row,
    the `mixed` memory layout) hashes like its contiguous copy instead of raising."""
    import torch

    from remap_ab.subjects.remap.case.inputs import tensor_sha256

    base = torch.arange(9, dtype=torch.int32)
    one = base[3::3][:1]  # shape (1,), stride (3,)
    assert one.stride() == (3,) and one.is_contiguous()
    assert tensor_sha256(one) == tensor_sha256(one.clone())
    wide = torch.arange(12, dtype=torch.int32).reshape(3, 4)[:, :1].t()  # (1, 3) with strides (1, 4)
    assert tensor_sha256(wide) == tensor_sha256(wide.contiguous().clone())
