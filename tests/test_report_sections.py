"""A section per failed check in a report (report_sections.py), each produced by an
implementation broken that way, its evidence checked against what really happened;
rejection calls' report folders (run --rejection --report, the sweep) and their
replay; the summary's failures by check."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch

from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.status import Check
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.judge.call import _stream_evidence, late_launches, sync_frame
from remap_ab.subjects.remap.judge.compare import Mismatch, Verdict
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report.report import load_report, render, write_case_report
from remap_ab.subjects.remap.report.report_sections import sections

SMALL = CaseConfig(mode="convert", tokens=2, topk=128, counts=True, invalid_ratio=0.3)
VALUE_HEADINGS = ("## First mismatching lanes", "## Output lanes (", "## Valid counts per row", "## Picture")
UNTRUE = "the verdict's failure is in the counts, an error or a shape"

# Writes its result into token_indices and returns that tensor: inputs written and aliased.
WRITES_INPUT = """
import kernels_new as _real
_remap_tiling = _real._remap_tiling
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index

def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    out, counts = _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs)
    token_indices.copy_(out)
    return token_indices, counts
"""

# Scratch writes that assume rows of exactly K elements: on a wider buffer they land in
# the slack after row 0.
WRITES_SLACK = """
import torch
import kernels_new as _real
_remap_tiling = _real._remap_tiling
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index

def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    res = _real.triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs)
    k = token_indices.shape[1]
    torch.as_strided(token_indices, (token_indices.shape[0] * k,), (1,))[k : k + 3] = -7
    return res
"""

# Leaves out the req_id length check (the grid is then sized by token_indices).
NO_LENGTH_CHECK = """
import kernels_new as _real
_remap_tiling = _real._remap_tiling
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index

def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, *args, **kwargs):
    return _real.triton_convert_req_index_to_global_index(req_id[: token_indices.shape[0]], block_table,
                                                          token_indices, *args, **kwargs)
"""


def _report(tmp_path, config, b, a="old"):
    result = run_case(config, a, b, device=runtime.current())
    folder = write_case_report(result, tmp_path / "r", implementations=(registry.get(a), registry.get(b)))
    return result, folder, (folder / "diff.md").read_text(), (folder / "diff.html").read_text()


def _section(md: str, title: str) -> str:
    """The Markdown of section ``title`` (up to the next heading); fails if absent."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    assert found, f"no section {title!r} in:\n{md}"
    return found.group(1)


def _replays(folder, capsys) -> bool:
    capsys.readouterr()
    assert cli_main(["replay", str(folder)]) == 1
    return "reproduced: yes, same verdict and first mismatch" in capsys.readouterr().out


def test_inputs_written_and_aliased_sections_hold_the_evidence_and_no_value_sections(tmp_path, broken_impl, capsys):
    b = broken_impl(WRITES_INPUT)
    result, folder, md, html = _report(tmp_path, SMALL, b)
    checks = [str(m.check) for m in result.verdict.failures]
    assert checks == ["inputs_written", "aliased"]
    written = _section(md, "Inputs written")
    # The count and the first elements are the ones really changed: what went in, what came out.
    original = result.inputs.token_indices.flatten()
    after = result.b.out.flatten()
    changed = torch.nonzero(original != after).flatten()
    assert f"{changed.numel()} elements changed, all of them elements of the view" in written
    first = int(changed[0])
    r, c = divmod(first, SMALL.topk)
    assert f"| [{r}, {c}] | yes | {int(original[first])} | {int(after[first])} |" in written
    aliased = _section(md, "Outputs sharing an input's storage")
    assert f"| out | token_indices | {original.numel() * 4} |" in aliased
    # Values equal the oracle's: no value section, no picture, and no sentence about another failure.
    for heading in VALUE_HEADINGS:
        assert heading not in md
    assert not (folder / "lanes.png").exists()
    assert UNTRUE not in md and UNTRUE not in html
    values = _section(md, "Output values")
    assert f"{b}'s output equals the oracle's lane for lane, and its valid counts too" in values
    # The HTML shows the same sections, each under its check's anchor.
    assert 'id="inputs_written"' in html and 'id="aliased"' in html
    assert "First mismatching lanes" not in html and "<img" not in html
    assert _replays(folder, capsys)


def test_inputs_written_in_a_strided_views_slack_says_so(tmp_path, broken_impl):
    b = broken_impl(WRITES_SLACK)
    config = SMALL.replace(layout="token_rows")
    result, _, md, _ = _report(tmp_path, config, b)
    written = _section(md, "Inputs written")
    assert "3 elements changed, none of them an element of the view: all in the slack" in written
    assert "a strided view of a wider buffer" in written
    for n in (1, 2, 3):
        assert f"| slack of row 0, +{n} past its last element | no (slack) |" in written
    assert "| -7 |" in written
    assert result.verdict.failures[0].evidence["in_slack"] == 3


def test_value_sections_appear_when_values_differ_and_no_call_section(tmp_path, broken_impl):
    b = broken_impl(patch="out = out.clone(); out[0, 5] += 1")
    result, folder, md, _ = _report(tmp_path, SMALL, b)
    assert [str(m.check) for m in result.verdict.failures] == ["out"]
    assert "## First mismatching lanes" in md and "## Valid counts per row" in md and "## Picture" in md
    assert "## Inputs written" not in md and "## Output values" not in md


def test_an_exception_gets_its_section_and_says_which_side_has_no_output(tmp_path, broken_impl):
    b = broken_impl(patch="raise RuntimeError('kaput')")
    _, _, md, _ = _report(tmp_path, SMALL, b)
    assert "kaput" in _section(md, "Raised")
    values = _section(md, "Output values")
    assert "old's output equals the oracle's lane for lane" in values
    assert f"{b} returned no output of the oracle's shape to compare" in values
    assert UNTRUE not in md


def test_backend_view_section_shows_what_the_backend_reads_from_each_side(tmp_path, broken_impl, capsys):
    # FA3 reads the first count entries in order: B's count one short drops the last KV row.
    b = broken_impl(patch="counts = counts.clone(); counts[0] -= 1")
    config = CaseConfig(mode="convert", tokens=2, topk=128, counts=True, invalid_ratio=0.3, backend="fa3",
                        block_size=64)
    result, folder, md, html = _report(tmp_path, config, b)
    assert "backend_view" in [str(m.check) for m in result.verdict.failures]
    section = _section(md, "What the attention backend would read")
    assert "FA3 SM90 reads the first count entries of each row, in order" in section
    count_a = int(result.a.counts[0])
    assert f"| old | {count_a} |" in section and f"| {b} | {count_a - 1} |" in section
    assert 'id="backend_view"' in html
    assert _replays(folder, capsys)


def test_rejection_call_report_replay_and_run_json(tmp_path, broken_impl, capsys):
    b = broken_impl(NO_LENGTH_CHECK)
    out = tmp_path / "R"
    assert cli_main(["run", "--rejection", "req-id-longer", "--b", b, "--report", str(out)]) == 1
    printed = capsys.readouterr().out
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1 and f"report: {folders[0] / 'diff.html'}" in printed
    md = (folders[0] / "diff.md").read_text()
    section = _section(md, "Rejection")
    assert "`req_id.shape[0] == token_indices.shape[0]`" in section
    assert "| req_id | int32 tensor [5]  ← changed |" in section
    assert "| token_indices | int32 tensor [4, 256] |" in section
    assert "| old (A) | raised AssertionError | req_id (5 rows) and token_indices (4 rows) must cover the same tokens |" in section
    assert f"| {b} (B) | accepted the call; returned (int32 tensor [4, 256], int32 tensor [4]) |" in section
    if runtime.current() == "cpu":  # on the CPU every rejection call is memory-checked
        assert "Memcheck of B's call: clean" in section
    assert "remap-ab run --rejection req-id-longer" in md
    for heading in VALUE_HEADINGS + ("## Output values",):
        assert heading not in md
    report = load_report(folders[0])
    assert report.rejection is not None and report.rejection.id == "req-id-longer"
    # Replay makes the call again, on the saved inputs.
    assert cli_main(["replay", str(folders[0])]) == 1
    replayed = capsys.readouterr().out
    assert "replay of rejection call req-id-longer" in replayed
    assert "reproduced: yes, same verdict and first mismatch" in replayed
    # A passing call writes nothing, and says so.
    assert cli_main(["run", "--rejection", "req-id-longer", "--report", str(tmp_path / "none")]) == 0
    assert "report: none written" in capsys.readouterr().out
    assert not any((tmp_path / "none").iterdir())


def test_a_failing_rejection_call_in_a_sweep_gets_a_folder_and_the_summary_groups_by_check(tmp_path, broken_impl, capsys):
    b = broken_impl(NO_LENGTH_CHECK)
    argv = ["sweep", "--b", b, "--root", str(tmp_path), "--run", "r", "--filter", "path=convert-counts", "--max-tokens", "1",
            "-j", "0"]
    assert cli_main(argv) == 1
    printed = capsys.readouterr().out
    run = tmp_path / "r"
    summary = json.loads((run / "summary.json").read_text())
    groups = summary["failures_by_check"]
    assert list(groups) == ["rejects"] and groups["rejects"]["cases"] == 1
    case = groups["rejects"]["first"]
    assert groups["rejects"]["report"] == case and (run / case / "diff.md").is_file()
    assert "## Rejection" in (run / case / "diff.md").read_text()
    lines = printed.splitlines()
    head = next(i for i, line in enumerate(lines) if "failures by check" in line)
    assert f"rejects  1; {case}; {run / case / 'diff.md'}" in lines[head + 1]
    assert head < next(i for i, line in enumerate(lines) if "failures by dimension" in line)


def test_sync_frame_names_the_line_in_the_implementations_own_code(broken_impl):
    name = broken_impl("""
    def sync_here(x):
        return x.item()  # a host sync

    def triton_convert_req_index_to_global_index(*args, **kwargs):
        raise RuntimeError("called a synchronizing CUDA operation")
    """)
    module = __import__(name)
    try:
        module.triton_convert_req_index_to_global_index()
    except RuntimeError as exc:
        frame = sync_frame(exc, SimpleNamespace(module=module))
    assert frame is not None and frame["file"] == module.__file__
    assert frame["function"] == "triton_convert_req_index_to_global_index" and "raise RuntimeError" in frame["code"]


def _finding_section(check: Check, message: str, evidence: dict) -> str:
    """A verdict of one finding rendered as Markdown (CUDA-only checks, built from data here)."""
    from remap_ab.status import Status
    from remap_ab.subjects.remap.report.report import CaseReport, ImplementationInfo

    v = Verdict("c" * 12, Status.FAIL, [Mismatch(check, "b", -1, -1, {}, 0, 0, message, evidence)])
    r = CaseReport(case_id="c" * 12, status=Status.FAIL, verdict=v, config=SMALL, a=ImplementationInfo("a"),
                   b=ImplementationInfo("b"), device="cuda", replay="replay", run_command="run", inputs_sha256={},
                   inputs_sha256_combined="", written="")
    return render(r, "md")


def test_sync_stream_and_graph_sections_from_their_findings_data():
    md = _finding_section(Check.SYNC, "b synchronises", {"error": "RuntimeError: called a synchronizing CUDA operation",
                                                         "frame": {"file": "/x/b.py", "line": 12, "function": "convert",
                                                                   "code": "n = int(counts.max())"}})
    section = _section(md, "Host synchronisation inside the call")
    assert "/x/b.py:12 in convert" in section and "n = int(counts.max())" in section
    x = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int32)
    y = x.clone()
    y[1, 1] = -1
    evidence = _stream_evidence(x, y, None, None, True, "graph replay", "eager call")
    assert evidence["out"] == {"at": [1, 1], "graph replay": 5, "eager call": -1, "differing": 1}
    md = _finding_section(Check.GRAPH, "b: replaying gives other outputs", evidence)
    assert "| out | [1, 1] | 5 | -1 | 1 |" in _section(md, "CUDA graph capture and replay")
    evidence = _stream_evidence(x, y, x[0], y[0], True, "on the caller's stream", "after a synchronize")
    md = _finding_section(Check.STREAM, "b: outputs differ", evidence)
    assert "| out | [1, 1] | 5 | -1 | 1 |" in _section(md, "Outputs not ready on the caller's stream")
    md = _finding_section(Check.GRAPH, "b cannot be captured in a CUDA graph", {
        "capture_failed": "RuntimeError: operation not permitted when stream is capturing",
        "frame": {"file": "/x/b.py", "line": 7, "function": "convert", "code": "total = int(counts.sum())"}})
    section = _section(md, "CUDA graph capture and replay")
    assert "/x/b.py:7 in convert" in section and "total = int(counts.sum())" in section


def test_a_stream_finding_from_the_events_gives_its_timing_and_names_no_element():
    # The stream check's event finding (call._stream_check): the outputs agreed, so no
    # element can be named, and the section must not say they were compared as sets.
    message, evidence = late_launches([-0.2, 1.02])
    md = _finding_section(Check.STREAM, f"b: {message}", evidence)
    section = _section(md, "Outputs not ready on the caller's stream")
    assert "finished 1.020 ms after the call returned" in section and "| finished after ms | 1.02 |" in section
    assert "| launches on other streams | 2 |" in section and "| finished after the return | 1 |" in section
    assert "as sets per row" not in section


def test_a_check_without_a_renderer_shows_its_evidence_side_by_side():
    # The shape a later check (an output layout, a B-only feature) needs to give its
    # evidence to get a section without code here.
    failure = SimpleNamespace(check="layout", impl="b", message="out is column-major",
                              evidence={"tensor": "out", "a": {"name": "old", "shape": [3, 8], "stride": [8, 1]},
                                        "b": {"name": "new", "shape": [3, 8], "stride": [1, 3]}})
    (section,) = sections([failure])
    assert section.title == "Output layout"
    rows = {b.headers: b.rows for b in section.blocks if b.kind == "table"}
    assert rows[("", "old", "new")] == (("shape", "[3, 8]", "[3, 8]"), ("stride", "[8, 1]", "[1, 3]"))
    assert rows[("field", "value")] == (("tensor", "out"),)


def test_value_checks_have_no_section_of_their_own():
    failures = [SimpleNamespace(check=c, impl="b", message="m", evidence={}) for c in ("out", "counts", "crash")]
    assert sections(failures) == []


def test_evidence_survives_verdict_json_and_old_verdicts_still_load():
    m = Mismatch(Check.ALIASED, "b", -1, -1, {}, 0, 0, "m", {"output": "out", "input": "req_id"})
    d = Verdict("c" * 12, "fail", [m]).to_dict()
    assert Verdict.from_dict(d).failures[0].evidence == {"output": "out", "input": "req_id"}
    del d["failures"][0]["evidence"]
    assert Verdict.from_dict(d).failures[0].evidence == {}
    with pytest.raises(Exception, match="evidence"):
        Verdict.from_dict({**d, "failures": [{**d["failures"][0], "evidence": "not an object"}]})


# ----------------------------------------------------------------------------- on CUDA

GPU_CASE = CaseConfig(mode="convert", tokens=3, topk=256, counts=True, num_reqs=2, blocks_per_req=16, block_size=16)

# Reads the counts back to the host inside the call.
READS_COUNTS_BACK = """
import kernels_new as _real
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index

def triton_convert_req_index_to_global_index(*args, **kwargs):
    out, counts = _real.triton_convert_req_index_to_global_index(*args, **kwargs)
    total = int(counts.sum())  # host sync
    return out, counts
"""

# Launches on its own stream and does not make the caller's stream wait for it.
OWN_STREAM = """
import torch
import kernels_new as _real
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index

def triton_convert_req_index_to_global_index(*args, **kwargs):
    mine = torch.cuda.Stream()
    mine.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(mine):
        return _real.triton_convert_req_index_to_global_index(*args, **kwargs)
"""


@pytest.mark.gpu
def test_a_host_sync_section_names_the_line_in_bs_code(tmp_path, broken_impl):
    b = broken_impl(READS_COUNTS_BACK)
    result = run_case(GPU_CASE, "old", b, device="cuda")
    folder = write_case_report(result, tmp_path / "r", implementations=(registry.get("old"), registry.get(b)))
    md = (folder / "diff.md").read_text()
    section = _section(md, "Host synchronisation inside the call")
    assert f"{broken_impl.folder / (b + '.py')}:" in section and "total = int(counts.sum())" in section
    assert "## CUDA graph capture and replay" in md
    for heading in VALUE_HEADINGS:
        assert heading not in md


@pytest.mark.gpu
def test_a_private_stream_section_names_the_first_differing_element(tmp_path, broken_impl):
    b = broken_impl(OWN_STREAM)
    result = run_case(GPU_CASE.replace(tokens=64, topk=2048, blocks_per_req=256), "old", b, device="cuda")
    (finding,) = [m for m in result.verdict.failures if m.check is Check.STREAM]
    folder = write_case_report(result, tmp_path / "r", implementations=(registry.get("old"), registry.get(b)))
    section = _section((folder / "diff.md").read_text(), "Outputs not ready on the caller's stream")
    d = finding.evidence.get("out") or finding.evidence["valid_counts"]
    x, y = finding.evidence["compared"]
    assert f"| {d['at']} | {d[x]} | {d[y]} | {d['differing']} |" in section


def test_a_rejection_call_on_another_base_case_offers_only_its_replay(tmp_path):
    from remap_ab.subjects.remap.judge.rejections import by_id, judged
    from remap_ab.subjects.remap.report.report import write_rejection_report

    listed = by_id("req-id-longer")
    varied = type(listed)(listed.id, listed.precondition, listed.base.replace(tokens=2), listed.args, listed.tensors,
                          listed.what, listed.spec_rejects)
    for case, offered in ((listed, True), (varied, False)):
        v = judged(case, registry.get("old"), registry.get("new"), runtime.current())[0]
        md = (write_rejection_report(case, v, "old", "new", tmp_path) / "diff.md").read_text()
        assert ("remap-ab run --rejection req-id-longer" in md) is offered
        assert ("only the replay above makes it again" in md) is not offered
        assert f"made on the valid case `{case.base.cli_args()}`" in md


def test_a_rejection_section_shows_the_memcheck_finding_of_bs_accepted_call(tmp_path):
    # The #47327 regression: no req_id check and a grid sized by req_id, so B's accepted
    # call writes past out. On the CPU every rejection call is memory-checked.
    from dataclasses import replace

    from conftest import importable_mutants

    from remap_ab.subjects.remap.judge.rejections import by_id, judged
    from remap_ab.subjects.remap.parts.mutants.catalogue import get as get_mutant
    from remap_ab.subjects.remap.report.report import write_rejection_report

    if torch.cuda.is_available():
        pytest.skip("on a GPU a rejection call is not memory-checked (and its wild store would land)")
    m = get_mutant("req_id_length_unchecked")
    grid = ("grid = (token_indices.shape[0], tiles_per_row)", "grid = (req_id.shape[0], tiles_per_row)")
    with importable_mutants(tmp_path / "m", [replace(m, id="sizes_grid", edits=m.edits + (grid,))]):
        case = by_id("req-id-longer")
        v = judged(case, registry.get("old"), registry.get("mutant_sizes_grid"), "cpu")[0]
        md = (write_rejection_report(case, v, "old", "mutant_sizes_grid", tmp_path / "r") / "diff.md").read_text()
    section = _section(md, "Rejection")
    assert re.search(r"Memcheck of B's call: \d+ elements out of bounds", section)
    assert "store of 4 bytes outside every argument tensor" in section and "past the last element of out" in section
