"""Report folders whose size does not grow with the case (issue 41): inputs stored as the
configuration, seed, generator version and sha256 that regenerate them, outputs as the
rows that differ plus each whole tensor's sha256, whole tensors only with
--full-tensors; replay bit-exact from each kind of folder, and from a format-1 one."""

import json
import textwrap

import pytest
import torch

from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.errors import ReportError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.case.inputs import GENERATOR_VERSION, CaseInputs, generate_inputs, tensor_sha256
from remap_ab.subjects.remap.judge.compare import OrderContract, Output, compare
from remap_ab.subjects.remap.judge.runner import CaseResult, reference
from remap_ab.subjects.remap.report import report as report_mod
from remap_ab.subjects.remap.report.report import ROWS_BUDGET_BYTES, load_report, write_case_report

WIDE = CaseConfig(mode="dcp", tokens=16, topk=2048, dcp_size=2, compact=False, counts=True, invalid_ratio=0.3)


# The device this process runs kernels on: a CPU-only test run cannot switch a GPU process
# to the interpreter.
DEVICE = runtime.default_device()

def _result(config, rows) -> CaseResult:
    """A CaseResult built from the oracle (no kernels: fast) whose B is off by one in
    every lane of ``rows``."""
    inputs = generate_inputs(config)
    ref = reference(config, inputs)
    contract = OrderContract(True, config.topk, "reference")
    a = Output("old", ref.out.clone(), ref.counts.clone(), contract)
    spoilt = ref.out.clone()
    spoilt[list(rows)] += 1
    b = Output("new", spoilt, ref.counts.clone(), contract)
    v = compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned)
    return CaseResult(config, inputs, a, b, ref, v, oracle=Output("oracle", ref.out.clone(), ref.counts.clone(), contract))


def _size(folder, pictures: bool = True) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if pictures or p.name not in ("lanes.png", "diff.html"))


def test_a_folder_does_not_grow_with_the_rows(tmp_path):
    small = write_case_report(_result(WIDE, range(4)), tmp_path / "small")
    large = write_case_report(_result(WIDE.replace(tokens=1024), range(4)), tmp_path / "large")
    # Format 1 wrote 1024 x 2048 x 4 bytes per output tensor (8 MB each, ~50 MB in all).
    # Beside the picture (drawn in at most 256 x 512 cells, whatever the case) the
    # folders hold the same data.
    assert _size(large, pictures=False) < 1.05 * _size(small, pictures=False) + 1000, (_size(small), _size(large))
    assert _size(large) < 1_000_000
    # The same 4 rows are kept either way; the whole tensors are known by their sha256.
    assert (large / "rows.pt.gz").stat().st_size < 1.2 * (small / "rows.pt.gz").stat().st_size
    rep = load_report(large)
    assert rep.outputs["rows_differing"] == rep.outputs["rows_kept"] == 4


def test_rows_beyond_the_budget_are_counted_not_kept(tmp_path):
    config = WIDE.replace(tokens=1024)
    result = _result(config, range(1024))
    folder = write_case_report(result, tmp_path)
    rep = load_report(folder)
    kept = rep.kept_rows()
    row_bytes = 3 * (config.topk * 4 + 4)  # A, B and the oracle: a row's lanes and its count
    assert rep.outputs["rows_differing"] == 1024
    assert rep.outputs["rows_kept"] == len(kept["rows"]) == ROWS_BUDGET_BYTES // row_bytes
    assert result.verdict.first.row in kept["rows"].tolist()  # the row the verdict names is always kept
    assert (folder / "rows.pt.gz").stat().st_size < ROWS_BUDGET_BYTES
    # Each kept row is the side's own, and the whole tensor is the one hashed.
    rows = kept["rows"]
    assert torch.equal(kept["roles"]["b"]["out"], result.b.out[rows])
    assert rep.outputs["roles"]["b"]["tensors"]["out"]["sha256"] == tensor_sha256(result.b.out)


def test_kept_rows_and_the_regenerated_oracle_give_back_the_whole_outputs(tmp_path):
    """Within the budget every differing row is kept: B's whole output is the oracle's
    (from the regenerated inputs) with the kept rows put back, as its sha256 proves."""
    result = _result(WIDE, [1, 5, 6])
    rep = load_report(write_case_report(result, tmp_path))
    kept = rep.kept_rows()
    rebuilt = reference(rep.config, rep.inputs).out.clone()
    rebuilt[kept["rows"]] = kept["roles"]["b"]["out"]
    assert tensor_sha256(rebuilt) == rep.outputs["roles"]["b"]["tensors"]["out"]["sha256"]


def test_a_changed_generator_is_a_one_line_error_saying_what_to_do(tmp_path, monkeypatch, capsys):
    folder = write_case_report(_result(WIDE, [2]), tmp_path)
    real = report_mod.generate_inputs

    def changed(config, device="cpu"):
        inputs = real(config, device)
        token_indices = inputs.token_indices.clone()
        token_indices[0, 0] += 1
        return CaseInputs(inputs.req_id, inputs.block_table, token_indices)

    monkeypatch.setattr(report_mod, "generate_inputs", changed)
    with pytest.raises(ReportError, match="the input generator changed") as exc:
        load_report(folder)
    message = str(exc.value)
    assert "token_indices" in message and "without a version bump" in message and "remap-ab run" in message
    monkeypatch.setattr(report_mod, "GENERATOR_VERSION", GENERATOR_VERSION + 1)
    assert cli_main(["replay", str(folder), "--device", DEVICE]) == 2
    err = capsys.readouterr().err.strip()
    then_now = f"written with generator version {GENERATOR_VERSION}, this remap-ab has version {GENERATOR_VERSION + 1}"
    assert len(err.splitlines()) == 1 and then_now in err
    assert "replay it with the remap-ab that wrote it" in err


BUMP_PAST_ROW_0 = '''
    """kernels_new whose outputs are off by one in every valid lane past row 0."""
    import kernels_new as _real
    from kernels_new import _remap_tiling  # noqa: F401


    def _bump(result):
        out = result[0] if isinstance(result, tuple) else result
        out[1:] += (out[1:] >= 0).to(out.dtype)
        return result


    def triton_convert_req_index_to_global_index(*args, **kwargs):
        return _bump(_real.triton_convert_req_index_to_global_index(*args, **kwargs))


    def triton_filter_and_convert_dcp_index(*args, **kwargs):
        return _bump(_real.triton_filter_and_convert_dcp_index(*args, **kwargs))
'''


@pytest.fixture(scope="module")
def bumped(tmp_path_factory):
    path = tmp_path_factory.mktemp("impls") / "bump_past_row_0.py"
    path.write_text(textwrap.dedent(BUMP_PAST_ROW_0))
    return str(path)


CASE = ["--tokens", "3", "--topk", "128", "--device", DEVICE]


@pytest.mark.parametrize("kind", ["generated", "full-tensors", "stored"])
def test_replay_is_bit_exact_from_each_kind_of_folder(tmp_path, bumped, capsys, monkeypatch, kind):
    extra = {"generated": [], "full-tensors": ["--full-tensors"], "stored": ["--inputs", str(tmp_path / "in.pt")]}[kind]
    if kind == "stored":  # inputs no generator makes: the config's, one value changed
        tensors = generate_inputs(CaseConfig(tokens=3, topk=128)).tensors()
        tensors["token_indices"][1, 0] = 7
        torch.save(tensors, tmp_path / "in.pt")
    assert cli_main(["run", "--b", bumped, *CASE, "--report", str(tmp_path / "r"), *extra]) == 1
    capsys.readouterr()
    (folder,) = (tmp_path / "r").iterdir()
    names = {p.name for p in folder.iterdir()}
    assert "inputs.pt" not in names and "outputs.pt" not in names
    assert ("inputs.pt.gz" in names) == (kind != "generated")
    assert ("outputs.pt.gz" in names) == (kind == "full-tensors")
    rep = load_report(folder)
    assert rep.meta["inputs"]["source"] == ("stored" if kind == "stored" else "generated")
    assert rep.outputs["rows_differing"] == rep.outputs["rows_kept"] == 2  # rows 1 and 2
    if kind == "full-tensors":
        whole = rep.full_outputs()
        assert whole["b"]["out"].shape == (3, 128) and torch.equal(whole["b"]["out"][1:2], rep.kept_rows()["roles"]["b"]["out"][:1])
        # The whole tensors are what a replay reads: a generator that changed since does not matter.
        monkeypatch.setattr(report_mod, "generate_inputs", lambda *a, **k: pytest.fail("regenerated"))
    assert cli_main(["replay", str(folder), "--device", DEVICE]) == 1
    out = capsys.readouterr().out
    assert "reproduced: yes" in out
    assert "outputs: bit-identical to the saved ones" in out and "bump_past_row_0.py's out" in out


def _format_1(result, folder):
    """``result``'s report in format 1's layout: inputs.pt and outputs.pt hold the whole
    tensors (torch.save), verdict.json has neither ``inputs`` nor ``outputs``."""
    folder = write_case_report(result, folder)
    for p in folder.glob("*.gz"):
        p.unlink()
    meta = json.loads((folder / "verdict.json").read_text())
    for key in ("inputs", "outputs"):
        del meta[key]
    meta["format"] = 1
    (folder / "verdict.json").write_text(json.dumps(meta, indent=2))
    host = {k: v.cpu().contiguous() for k, v in result.inputs.tensors().items()}
    torch.save(host, folder / "inputs.pt")
    outputs = {role: {"name": o.name, "out": o.out, "counts": o.counts, "error": o.error}
               for role, o in (("a", result.a), ("b", result.b), ("oracle", result.oracle))}
    ref = result.reference
    outputs["reference"] = {"out": ref.out, "counts": ref.counts, "lanes": ref.lanes, "valid": ref.valid}
    torch.save(outputs, folder / "outputs.pt")
    return folder


def test_a_format_1_folder_still_replays(tmp_path, capsys):
    config = CaseConfig(tokens=3, topk=128)
    inputs = generate_inputs(config)
    ref = reference(config, inputs)
    contract = OrderContract(True, config.topk, "reference")
    a = Output("old", ref.out.clone(), ref.counts.clone(), contract)
    b = Output("oracle", ref.out.clone(), ref.counts.clone(), contract)
    b.out[1, 0] += 1  # what the saved verdict says; the replay's B (the oracle) passes
    v = compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned)
    folder = _format_1(CaseResult(config, inputs, a, b, ref, v, oracle=a), tmp_path / "old")
    rep = load_report(folder)
    assert rep.meta["format"] == 1 and torch.equal(rep.inputs.token_indices, inputs.token_indices)
    with pytest.raises(ReportError, match="keeps no rows"):
        rep.kept_rows()
    # The planted verdict failed on the very code that passes now: a nondeterministic failure (exit 1).
    assert cli_main(["replay", str(folder), "--device", DEVICE]) == 1
    out = capsys.readouterr().out
    assert f"from saved inputs of {folder}" in out and "saved verdict: FAIL" in out and "outputs:" not in out
    assert "NONDETERMINISTIC FAILURE: 0 of 5 replays failed" in out
    # Without its inputs.pt a format-1 folder cannot replay: one line says which file.
    (folder / "inputs.pt").unlink()
    assert cli_main(["replay", str(folder), "--device", DEVICE]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inputs.pt is missing" in err


def test_a_newer_format_says_which_remap_ab_reads_it(tmp_path):
    folder = write_case_report(_result(WIDE, [0]), tmp_path)
    meta = json.loads((folder / "verdict.json").read_text())
    meta["format"] = 99
    (folder / "verdict.json").write_text(json.dumps(meta))
    with pytest.raises(ReportError, match="format 99, newer than this remap-ab reads"):
        load_report(folder)


def test_inputs_no_generator_makes_are_stored_compressed(tmp_path):
    """A caller that does not say where its inputs came from (the property suite) gets
    them checked against the generator: inputs it did not make are stored."""
    config = CaseConfig(tokens=3, topk=128)
    inputs = generate_inputs(config)
    inputs.token_indices[1, 0] = 7
    ref = reference(config, inputs)
    contract = OrderContract(True, config.topk, "reference")
    a = Output("old", ref.out.clone(), ref.counts.clone(), contract)
    b = Output("new", ref.out.clone(), ref.counts.clone(), contract)
    b.out[0, 0] += 1
    v = compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned)
    folder = write_case_report(CaseResult(config, inputs, a, b, ref, v, oracle=a), tmp_path)
    rep = load_report(folder)
    assert rep.meta["inputs"] == {"source": "stored", "generator_version": GENERATOR_VERSION, "seed": 0, "file": "inputs.pt.gz"}
    assert torch.equal(rep.inputs.token_indices, inputs.token_indices)
    # The same case on its generated inputs: nothing stored.
    assert load_report(write_case_report(_result(config, [0]), tmp_path / "g")).meta["inputs"]["file"] is None
