"""The topology subject as the sweep sees it (remap_ab/subjects/topology/subject.py):
selection of the grid, cases as dicts, rows and report folders from ``judge``, a lost
case's row, and the summary's topology part. Small cases only (the CPU interpreter)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from remap_ab import runtime
from remap_ab.errors import ConfigError, ImplementationError
from remap_ab.status import Status
from remap_ab.subject import BatchTimes, JudgeSettings, Subject
from remap_ab.subjects import get
from remap_ab.subjects.topology import grid, mutants, report
from remap_ab.subjects.topology.__main__ import main as replay_main
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.subject import COLUMNS, SUBJECT, choose

DEVICE = runtime.current()
# docs/topology.md: the PR's L/S bound fails here (witnesses [0, -1], tokens 1..3 uncovered).
L5_S2 = TopologyCase(rows=1, topk=1, segments=2, keep=0, max_replacements=1,
                     explicit_learned=((4,),), explicit_lens=(5,))


def settings(folder, b="b", reports=None) -> JudgeSettings:
    return JudgeSettings(a="a", b=b, device=DEVICE, folder=str(folder) if folder else None, reports=reports)


def uncovered_case() -> TopologyCase:
    """A grid case (3 rows) on which the PR's L/S bound does not hold."""
    return next(c for c in grid.cpu_cases() if (c.rows, c.topk, c.segments, c.lens, c.learned) == (3, 8, 2, "above", "mixed"))


def with_labels(rows: list, cases: list) -> pd.DataFrame:
    """results.csv as the sweep writes it: index, case_id, the axes, the subject's columns."""
    full = [{"index": i, **{axis: str(getattr(c, axis)) for axis in grid.AXES}, **r}
            for i, (r, c) in enumerate(zip(rows, cases))]
    return pd.DataFrame(full).astype(str)


def test_the_subject_is_found_by_name_and_satisfies_the_protocol():
    subject = get("topology")
    assert subject is SUBJECT
    members = [n for n in vars(Subject) if not n.startswith("_")] + list(Subject.__annotations__)
    assert {"select", "judge", "summary_lines", "name", "columns"} <= set(members)
    for name in members:  # mypy checks the signatures (``SUBJECT: Subject``)
        assert hasattr(subject, name), name
    assert {"status", "check", "first_mismatch", "report"} <= set(COLUMNS)


def test_select_takes_the_cpu_cases_and_says_what_it_left_out():
    sel = SUBJECT.select(None, [], None, "a", "b", DEVICE, None)
    if DEVICE == "cpu":
        assert len(sel.points) == sel.grid_points == len(grid.cpu_cases()) < sel.grid_total == len(grid.cases())
        left = len(grid.cases()) - len(grid.cpu_cases())
        assert f"{left} of {len(grid.cases())} selected cases" in sel.note and "GPU" in sel.note
    else:
        assert len(sel.points) == sel.grid_total == len(grid.cases()) and sel.note == ""
    assert sel.axes == list(grid.AXES) and (sel.a, sel.b) == ("a", "b")
    ids = [p.case_id for p in sel.points]
    assert len(set(ids)) == len(ids) and all(len(i) == 12 and int(i, 16) >= 0 for i in ids)
    assert sel.grid == grid.cases()  # handed back to summarise
    assert choose("pr", [], None, "cuda").note == "" and len(choose("pr", [], None, "cuda").points) == len(grid.cases())


def test_filters_keep_what_they_name():
    seg64 = choose(None, ["segments=64"], None, "cpu").points
    assert len(seg64) == sum(c.segments == 64 for c in grid.cpu_cases()) > 0
    both = choose(None, ["segments=1,64", "lens=far"], None, "cpu").points
    assert {p.config.segments for p in both} == {1, 64} and {p.config.lens for p in both} == {"far"}
    one = choose(None, [f"case={seg64[3].case_id}"], None, "cpu").points
    assert [p.config for p in one] == [seg64[3].config] and dict(one[0].labels)["segments"] == "64"
    capped = choose(None, ["topk=32"], 2, "cpu")
    assert {p.config.rows for p in capped.points} == {1, 2} and "more than 2 rows" in capped.note


@pytest.mark.parametrize("filters, message", [
    (["warps=4"], "no axis 'warps'"),
    (["segments"], "NAME=V"),
    (["segments=65"], "select no case"),
    (["case=000000000000"], "no case of the topology grid has ID"),
    (["rows=1024"], "select no case this run can take"),  # on the CPU: GPU-only rows
])
def test_a_bad_filter_is_a_one_line_config_error(filters, message):
    with pytest.raises(ConfigError, match=message) as err:
        choose(None, filters, None, "cpu")
    assert "\n" not in str(err.value)


def test_another_grid_file_and_an_unknown_grid_name(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text('version = 7\n[[block]]\nname = "tiny"\nrows = [1, 2]\ntopk = [4]\nsegments = [2]\n'
                    'lens = ["mixed"]\nlearned = ["valid"]\nkeep = [0]\nmax_replacements = ["free"]\n')
    chosen = choose(str(path), [], None, "cpu")
    assert [p.config.rows for p in chosen.points] == [1, 2] and chosen.grid_total == 2 and chosen.version == 7
    with pytest.raises(ConfigError, match="no such grid"):
        choose("models", [], None, "cpu")
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[[block]]\nname = 'x'\n")
    with pytest.raises(ConfigError, match="not a topology grid file"):
        choose(str(bad), [], None, "cpu")


def test_an_implementation_that_does_not_load_is_one_line(tmp_path):
    with pytest.raises(ImplementationError, match="cannot import"):
        SUBJECT.select(None, ["case=" + report.case_id(grid.cpu_cases()[0])], None, "a", "no_such.module", DEVICE, None)
    lacking = tmp_path / "lacking.py"
    lacking.write_text("def something():\n    return 1\n")
    with pytest.raises(ImplementationError, match="no fused_topology_witness_merge"):
        SUBJECT.select(None, [], None, "a", str(lacking), DEVICE, None)


@pytest.mark.parametrize("case", [grid.cases()[0], grid.cases()[-1], L5_S2], ids=["first", "prefill", "explicit"])
def test_a_case_round_trips_through_json(case):
    d = json.loads(json.dumps(SUBJECT.case_dict(case)))
    assert SUBJECT.case_from_dict(d) == case and report.case_id(SUBJECT.case_from_dict(d)) == report.case_id(case)


def test_small_cases_pass_with_timings_and_no_report(tmp_path):
    cases = [p.config for p in choose(None, ["lens=zero,one", "learned=mixed", "segments=1,64"], None, "cpu").points]
    times = BatchTimes()
    rows = SUBJECT.judge(cases, settings(tmp_path), times)
    assert len(rows) == len(cases) == 4
    for row, case in zip(rows, cases):
        assert set(row) == {"case_id", *COLUMNS} and row["case_id"] == report.case_id(case)
        assert (row["status"], row["check"], row["first_mismatch"], row["report"]) == (Status.PASS, "", "", "")
        assert float(row["a_ms"]) > 0 and float(row["b_ms"]) > 0
    assert all(times.seconds[p] > 0 for p in ("gen", "kernels", "compare")) and times.seconds["write"] == 0
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_a_mutant_b_fails_naming_b_with_a_report_that_replays_it(tmp_path):
    mutant = next(m for m in mutants.mutants() if m.id == "edge_rounded_down")
    path = tmp_path / f"{mutant.module_name}.py"
    path.write_text(mutants.mutated_source(mutant))
    sel = SUBJECT.select(None, [f"case={report.case_id(mutant.witness_case)}"], None, "a", str(path), DEVICE, None)
    assert sel.b == str(path.resolve()) and sel.meta["implementations"]["b"]["sha256"]
    runs = tmp_path / "run"
    [row] = SUBJECT.judge([p.config for p in sel.points], settings(runs, b=sel.b), BatchTimes())
    assert (row["status"], row["check"], row["mismatches"]) == (Status.FAIL, "b-vs-oracle", "b:merged")
    assert row["first_mismatch"].startswith("B merged[") and "oracle" in row["first_mismatch"]
    # B differing from A follows from B differing from the oracle: no finding on the property.
    assert "fused_equals_pair" not in row["properties_failed"].split()
    text = (runs / row["report"] / "report.md").read_text()
    assert row["report"] == row["case_id"]
    assert re.search(r"- B merged\[\d+, \d+\]: A -?\d+, B -?\d+, oracle -?\d+", text), text
    consequences = text.split("consequences of the mismatches above)")[1]
    assert "fused_equals_pair" in consequences and "checked on a, b" in consequences
    assert f"remap-ab replay --subject topology '{mutant.witness_case.to_json()}' --b {path.resolve()}" in text
    assert (f"remap-ab sweep --b {path.resolve()} --device {DEVICE} --subject topology --root {tmp_path} "
            f"--filter case={row['case_id']}") in text  # the run's --root (the run folder's parent)
    assert TopologyCase.from_json((runs / row["report"] / "case.json").read_text()) == mutant.witness_case
    # The replay line it prints runs the mutant again: a mismatch, exit 1.
    assert replay_main([mutant.witness_case.to_json(), "--b", str(path)]) == 1


def test_a_property_finding_names_the_property_and_blames_no_side(tmp_path):
    [row] = SUBJECT.judge([L5_S2], settings(tmp_path), BatchTimes())
    assert (row["status"], row["check"]) == (Status.FAIL, "property:uncovered_run_pr")
    assert row["mismatches"] == "" and row["properties_failed"] == "uncovered_run_pr"
    assert row["first_mismatch"].startswith("property uncovered_run_pr") and "uncovered run 3 > L/S = 5/2" in row["first_mismatch"]
    text = (tmp_path / row["report"] / "report.md").read_text()
    mismatches = text.split("## Mismatches")[1].split("## Property findings")[0]
    assert mismatches.strip().endswith("none") and "no blame on A or B" in text
    assert L5_S2.replay_command() in text


def test_an_implementation_that_raises_is_an_error_row(tmp_path):
    raising = tmp_path / "raising.py"
    raising.write_text("def fused_topology_witness_merge(*args):\n    raise RuntimeError('no kernel today')\n")
    [row] = SUBJECT.judge([grid.cpu_cases()[0]], settings(tmp_path / "run", b=str(raising)), BatchTimes())
    assert (row["status"], row["check"]) == (Status.ERROR, "error")
    assert row["first_mismatch"] == "B raised RuntimeError: no kernel today"
    assert "no kernel today" in (tmp_path / "run" / row["report"] / "report.md").read_text()
    assert replay_main([grid.cpu_cases()[0].to_json(), "--b", str(raising)]) == 1
    assert replay_main([grid.cpu_cases()[0].to_json(), "--b", "no_such.module"]) == 2


def test_the_report_cap_counts_per_check(tmp_path):
    failing = [uncovered_case(), L5_S2]
    rows = SUBJECT.judge(failing, settings(tmp_path, reports=1), BatchTimes())
    assert [r["check"] for r in rows] == ["property:uncovered_run_pr"] * 2
    assert [bool(r["report"]) for r in rows] == [True, False]


def test_a_lost_case_gets_its_status_and_message(tmp_path):
    case = grid.cpu_cases()[5]
    row = SUBJECT.lost_row(case, settings(tmp_path), "worker ran past --case-timeout 60 s", Status.TIMEOUT)
    assert set(row) == {"case_id", *COLUMNS} and row["case_id"] == report.case_id(case)
    assert (row["status"], row["check"]) == (Status.TIMEOUT, "timeout")
    assert "--case-timeout 60 s" in row["first_mismatch"]
    assert "--case-timeout 60 s" in (tmp_path / row["report"] / "report.md").read_text()
    assert SUBJECT.cost(case) == case.rows * case.topk and SUBJECT.variant(case) is None


def test_summary_counts_sides_and_properties_with_the_smallest_case(tmp_path):
    mutant = next(m for m in mutants.mutants() if m.id == "edge_rounded_down")
    path = tmp_path / "mutant.py"
    path.write_text(mutants.mutated_source(mutant))
    bigger, smaller = uncovered_case(), next(c for c in grid.cpu_cases() if c.rows == 2 and c.topk == 64
                                                 and c.lens == "mixed" and c.segments == 5)
    cases = [bigger, smaller, mutant.witness_case, grid.cpu_cases()[0]]
    rows = SUBJECT.judge(cases, settings(tmp_path / "run", b=str(path)), BatchTimes())
    df = with_labels(rows, cases)
    s = SUBJECT.summarise(df, {"a": "a", "b": str(path)}, None)
    assert s["failing_cases"] == int((df["status"] != "pass").sum()) and s["run_failure"] == ""
    assert s["mismatches_by_side"]["a"] == 0 and s["mismatches_by_side"]["b"] >= 1
    found = s["findings_by_property"]
    assert "uncovered_run_pr" in found and found["uncovered_run_pr"]["known"]
    hits = [c for c, r in zip(cases, rows) if "uncovered_run_pr" in r["properties_failed"].split()]
    small = min(hits, key=lambda c: (c.rows, c.topk))
    assert found["uncovered_run_pr"]["smallest"] == report.case_id(small)
    assert small.replay_command() in found["uncovered_run_pr"]["replay"]
    assert s["failures_by_dimension"]["rows"]["3"][1] == sum(c.rows == 3 for c in cases)
    lines = SUBJECT.summary_lines({**s, "a": "a", "b": "mutant"})
    assert lines.report_file == "report.md" and 1 <= len(lines.findings) <= 4
    text = "\n".join(lines.findings)
    assert "B (mutant) in " in text and "uncovered_run_pr in" in text and found["uncovered_run_pr"]["replay"] in text
