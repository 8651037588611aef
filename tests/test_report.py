"""Failing-case reports (write_case_report, the API the property suite uses), and the
batched proof of passing that lets the sweep skip compare() for passing cases."""

import json
import struct
import zlib

import pytest
import torch

from remap_ab.batch import proof_of_pass
from remap_ab.compare import OrderContract, Output, compare
from remap_ab.config import CaseConfig
from remap_ab.errors import ReportError
from remap_ab.inputs import generate_inputs
from remap_ab.report import lane_picture, load_report, write_case_report, write_crash_report
from remap_ab.runner import CaseResult, reference

CFG = CaseConfig(mode="dcp", tokens=3, topk=512, dcp_size=2, compact=False, counts=True, invalid_ratio=0.3)


def _result(config, tamper=None):
    """A CaseResult built from the oracle (no kernels: fast), optionally tampered."""
    inputs = generate_inputs(config)
    ref = reference(config, inputs)
    contract = OrderContract(True, config.topk, "reference")
    a = Output("old", ref.out.clone(), ref.counts.clone(), contract)
    b = Output("new", ref.out.clone(), ref.counts.clone(), contract)
    if tamper:
        tamper(b)
    v = compare(config.case_id, a, b, ref, compacted=config.compacts, counts_returned=config.counts_returned)
    o = Output("oracle", ref.out.clone(), ref.counts.clone(), contract)
    return CaseResult(config, inputs, a, b, ref, v, oracle=o)


def _bump(o):
    r, c = (o.out >= 0).nonzero()[3].tolist()
    o.out[r, c] += 7
    o.counts[2] += 1


def test_write_case_report_round_trip(tmp_path):
    result = _result(CFG, _bump)
    assert result.verdict.status == "fail"
    folder = write_case_report(result, tmp_path / "run")
    assert folder == tmp_path / "run" / CFG.case_id
    rep = load_report(folder)
    assert rep.config == CFG
    assert torch.equal(rep.inputs.token_indices, result.inputs.token_indices)
    assert rep.verdict.to_dict() == result.verdict.to_dict()
    first = rep.verdict.first
    md = (folder / "diff.md").read_text()
    assert f"at row {first.row}, col {first.col}" in md or f"at row {first.row}" in md
    assert "valid counts of `new` differ in 1 rows: 2" in md
    outs = torch.load(folder / "outputs.pt", weights_only=True)
    assert set(outs) == {"a", "b", "oracle", "reference"}
    assert torch.equal(outs["b"]["out"], result.b.out)
    # Rewriting the same case replaces it; no temporary folders are left behind.
    write_case_report(result, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [CFG.case_id]


def test_html_is_self_contained_with_a_valid_png(tmp_path):
    folder = write_case_report(_result(CFG, _bump), tmp_path)
    html = (folder / "diff.html").read_text()
    assert "http://" not in html and "https://" not in html and "<script" not in html
    import base64

    data = base64.b64decode(html.split("data:image/png;base64,")[1].split("'")[0])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 0 and height > 0
    # The IDAT decompresses to height rows of 1 + 3 * width bytes.
    idat_len = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41 : 41 + idat_len])
    assert len(raw) == height * (1 + 3 * width)


def test_picture_marks_the_differing_lane():
    result = _result(CFG.replace(tokens=1, topk=128), lambda o: o.out.__setitem__((0, 5), 12345))
    from remap_ab.report import DiffData

    d = DiffData.from_result(result)
    assert d.first[0]["row"] == 0 and d.first[0]["col"] == 5 and d.first[0]["new"] == 12345
    assert d.per_row == [(0, 0, 1)]
    uri, legend = lane_picture(d)
    assert "1 row(s) x 1 column(s)" in legend


def test_passing_result_and_crash_report(tmp_path):
    folder = write_case_report(_result(CFG), tmp_path)
    assert load_report(folder).verdict.status == "pass"
    crash = write_crash_report(CFG, "old", "new", "worker killed by signal SIGSEGV", tmp_path / "c")
    rep = load_report(crash)
    assert rep.verdict.status == "crash" and "SIGSEGV" in rep.verdict.first.message


def test_load_report_errors_are_one_line(tmp_path):
    folder = write_case_report(_result(CFG), tmp_path)
    (folder / "config.json").write_text(json.dumps({"case_id": "000000000000", "config": CFG.to_dict()}))
    with pytest.raises(ReportError, match="config.json says case 000000000000") as exc:
        load_report(folder)
    assert "\n" not in str(exc.value)
    with pytest.raises(ReportError, match="no report"):
        load_report(tmp_path / "missing")


# --- the batched proof of passing ----------------------------------------------------


def _compacted_case(topk=512, tokens=4):
    c = CaseConfig(mode="dcp", tokens=tokens, topk=topk, dcp_size=2, compact=True, counts=True, invalid_ratio=0.3)
    x = generate_inputs(c)
    return c, reference(c, x)


def _segment_swapped(ref, seg):
    """Rows compacted with their tile segments in reverse order (a legal tiled order)."""
    t, k = ref.out.shape
    out = torch.full_like(ref.out, -1)
    for r in range(t):
        segs = []
        for s in range(0, k, seg):
            vals = ref.lanes[r, s : s + seg][ref.valid[r, s : s + seg]]
            if len(vals):
                segs.append(vals)
        row = torch.cat(segs[::-1]) if segs else ref.out.new_empty(0)
        out[r, : len(row)] = row
    return out


def test_proof_accepts_a_reordered_tiled_compaction():
    c, ref = _compacted_case()
    tiled = OrderContract(False, 128, "4 tiles")
    out = _segment_swapped(ref, 128)
    assert not torch.equal(out, ref.out)
    o = Output("old", out, ref.counts.clone(), tiled)
    assert bool(proof_of_pass(o, ref, c))
    assert compare(c.case_id, o, o, ref, compacted=True, counts_returned=True).passed
    # The same order is a failure for an implementation that promises column order.
    ordered = Output("new", out, ref.counts.clone(), OrderContract(True, 512, "single tile"))
    assert not bool(proof_of_pass(ordered, ref, c))


@pytest.mark.parametrize("damage", ["swap_within_segment", "tail", "count", "value"])
def test_proof_never_passes_what_compare_fails(damage):
    c, ref = _compacted_case()
    tiled = OrderContract(False, 128, "4 tiles")
    out = _segment_swapped(ref, 128)
    counts = ref.counts.clone()
    n = int(ref.counts[0])
    if damage == "swap_within_segment":
        out[0, 0], out[0, 1] = out[0, 1].clone(), out[0, 0].clone()
    elif damage == "tail":
        out[0, n] = 5
    elif damage == "count":
        counts[1] += 1
    else:
        out[0, n - 1] += 1
    o = Output("old", out, counts, tiled)
    verdict = compare(c.case_id, o, o, ref, compacted=True, counts_returned=True)
    assert not verdict.passed
    assert not bool(proof_of_pass(o, ref, c))


def test_proof_accepts_the_old_kernels_output_under_a_reversed_schedule():
    from remap_ab import backend, registry
    from remap_ab.runner import run_implementation
    from remap_ab.schedule import interpreter_schedule

    if backend.select(None) != "cpu":
        pytest.skip("program schedules need the interpreter")
    c = CaseConfig(mode="dcp", tokens=2, topk=512, dcp_size=2, compact=True, counts=True, invalid_ratio=0.3)
    x = generate_inputs(c)
    ref = reference(c, x)
    o = run_implementation(registry.get("old"), c, x, schedule=lambda: interpreter_schedule("tiles_reversed"))
    assert not torch.equal(o.out, ref.out)  # the race order, not column order
    assert bool(proof_of_pass(o, ref, c))


def test_batch_verdicts_equal_run_case_verdicts(tmp_path):
    from remap_ab import backend, grid
    from remap_ab.batch import run_batch
    from remap_ab.runner import run_case

    device = backend.select(None)
    g = grid.load()
    pts = g.select(grid.parse_filters(g, ["tokens=1", "k=128,384", "invalid=0.3", "oor=on", "path=dcp-compact,convert-prefill-counts"]))
    assert len(pts) == 4
    batch = run_batch([p.config for p in pts], "old", "new", device)
    for p, outcome in zip(pts, batch):
        assert outcome.verdict.to_dict() == run_case(p.config, device=device).verdict.to_dict()
        assert outcome.inputs_sha256 and outcome.a_ms is not None


def test_schedule_is_recorded_and_replayed(tmp_path, capsys):
    from remap_ab import backend
    from remap_ab.cli import main as cli_main

    if backend.select(None) != "cpu":
        pytest.skip("program schedules need the interpreter")
    folder = write_case_report(_result(CFG.replace(tokens=1, topk=128)), tmp_path, schedule=("tiles_reversed", 0))
    assert json.loads((folder / "verdict.json").read_text())["schedule"] == ["tiles_reversed", 0]
    assert cli_main(["replay", str(folder)]) == 0
    assert "program schedule tiles_reversed:0" in capsys.readouterr().out
