"""Failures at the speed of passes (issue 33): a failing case costs a full report folder
only for the first N of its failure class (check x path; ``--reports N|all``), every
case still has its row, the summary says how many folders were written and how to get
another's; ``--filter`` keeps the rejection calls as it keeps the grid's points."""

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from remap_ab import command_line, runtime, subjects
from remap_ab.cli import main as cli_main
from remap_ab.report_cap import ReportSlots, describe
from remap_ab.subject import Subject
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.grid.selection import select_with_calls
from remap_ab.subjects.remap.judge import rejections
from remap_ab.subjects.remap.report.failure_class import failure_class, path_name, slot_key

DEVICE = runtime.current()  # a process's Triton backend is fixed: the session's
WRITES_INPUTS = (Path(__file__).resolve().parent / "impls" / "writes_inputs.py").read_text()
# 16 cases of the plain convert, with and without counts; B writes into token_indices in
# every one, so nearly all fail (inputs_written), in two failure classes.
SIXTEEN = ["--filter", "path=convert,convert-counts", "--filter", "k=128", "--filter", "tokens=1",
           "--device", DEVICE, "-j", "0", "--no-progress"]


# ------------------------------------------------------------------ the cap itself


def _claim(slots: ReportSlots, config: CaseConfig, check: str) -> bool:
    return slots.claim_key(slot_key(config, check), config.case_id)


def test_slots_give_n_per_class_across_processes(tmp_path):
    convert, counts = CaseConfig(mode="convert", counts=False), CaseConfig(mode="convert", counts=True)
    others = [CaseConfig(mode="convert", counts=False, tokens=n) for n in (2, 3, 5)]  # the same class, other cases
    first, second = ReportSlots(tmp_path, 2), ReportSlots(tmp_path, 2)  # two workers of one run
    assert [_claim(first, convert, "out"), _claim(second, others[0], "out"), _claim(first, others[1], "out"),
            _claim(second, others[2], "out")] == [True, True, False, False]
    # A case run again (a resume after a kill, or --resume --repair) keeps the slot it holds.
    assert _claim(ReportSlots(tmp_path, 2), others[0], "out") and _claim(second, convert, "out")
    assert _claim(second, counts, "out") and _claim(second, convert, "counts")  # other classes: their own slots
    assert not _claim(ReportSlots(tmp_path, 2), others[2], "out")  # a resumed run keeps counting
    assert _claim(ReportSlots(tmp_path, 3), others[1], "out")  # a larger cap has room again
    assert not _claim(ReportSlots(tmp_path / "other", 0), convert, "out")
    assert all(_claim(ReportSlots(tmp_path, "all"), convert, "out") for _ in range(5))


def test_the_policy_names_each_subjects_own_failure_class():
    assert describe(3, subject=subjects.get("remap")) == "the first 3 failing cases of each failure class (check × path)"
    assert describe(3, subject=subjects.get("topology")) == "the first 3 failing cases of each failure class (check)"
    assert describe(3, subject=type("Bare", (Subject,), {})()) == "the first 3 failing cases of each failure class"  # none declared
    assert describe("all", "--remap-grid-reports", subjects.get("topology")) == "every failing case (--remap-grid-reports all)"


def test_failure_classes_name_the_check_and_the_wrapper_path():
    assert path_name(CaseConfig(mode="convert", counts=False)) == "convert"
    assert path_name(CaseConfig(mode="convert", counts=True, prefill_fraction=0.5)) == "convert-prefill-counts"
    assert path_name(CaseConfig(mode="dcp", dcp_size=1, dcp_rank=0, counts=True)) == "dcp1-counts"
    assert path_name(CaseConfig(mode="dcp", dcp_size=2, compact=True, counts=False)) == "dcp-compact"
    assert path_name(CaseConfig(mode="dcp", dcp_size=4, dcp_rank=1, compact=False, counts=True)) == "dcp-inplace-counts"
    assert failure_class(CaseConfig(mode="convert", counts=False), "inputs_written") == "inputs_written × convert"


# ------------------------------------------------------------------ a failing sweep


@pytest.fixture(scope="module")
def failing(tmp_path_factory, broken_impl_module):
    """Two runs of the same 16 failing cases: the default cap, and --reports all."""
    root = tmp_path_factory.mktemp("cap")
    impl = broken_impl_module(WRITES_INPUTS, name="writes_inputs_cap")
    codes = [cli_main(["sweep", "--b", impl, *SIXTEEN, "--root", str(root), "--run", name, *extra])
             for name, extra in (("capped", []), ("all", ["--reports", "all"]))]
    return root, impl, codes


def _table(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)


def test_every_case_is_judged_and_only_the_first_three_of_each_class_get_a_folder(failing):
    root, impl, codes = failing
    assert codes == [1, 1]
    capped, full = _table(root / "capped"), _table(root / "all")
    assert len(capped) == len(full) == 16  # every case has its row (tokens=1: no rejection call is selected)
    # The same verdicts either way: the cap changes what is written, not what is judged.
    cols = ["case_id", "status", "check", "first_mismatch", "mismatch_lanes", "inputs_sha256", "max_row_valid"]
    assert capped[cols].sort_values("case_id").values.tolist() == full[cols].sort_values("case_id").values.tolist()
    failed = capped[capped.status == "fail"]
    assert set(failed.check) == {"inputs_written"} and set(failed.path) == {"convert", "convert-counts"}
    per_class = failed.groupby("path")
    assert all(len(rows) > 3 for _, rows in per_class)  # so the cap shows
    for _, rows in per_class:
        assert (rows.report != "").sum() == 3
    written = set(failed[failed.report != ""].report)
    assert written == set(failed[failed.report != ""].case_id)
    folders = {p.name for p in (root / "capped").iterdir() if p.is_dir() and not p.name.startswith(".")}
    assert folders == written
    for name in written:
        assert (root / "capped" / name / "verdict.json").is_file() and (root / "capped" / name / "diff.md").is_file()
    # --reports all: a folder for every failing case, none for a passing one.
    every = full[full.status == "fail"]
    assert (every.report == every.case_id).all() and (full[full.status == "pass"].report == "").all()
    assert {p.name for p in (root / "all").iterdir() if p.is_dir() and not p.name.startswith(".")} == set(every.case_id)


def test_the_summary_counts_the_folders_and_says_how_to_get_the_others(failing, capsys):
    root, impl, _ = failing
    assert cli_main(["report", str(root / "capped")]) == 1  # cases without a folder are no missing report
    out = capsys.readouterr().out
    failed = _table(root / "capped").query("status == 'fail'")
    # B was imported from a folder on this process's sys.path: every line carries it.
    env = command_line.python_path(json.loads((root / "capped" / "run.json").read_text())["python_path"])
    assert str(Path(sys.modules[impl].__file__).parent) in env
    assert (f"  report folders: 6 written for {len(failed)} failing cases, the first 3 failing cases of each failure "
            f"class (check × path); any other case's report: `{env}remap-ab sweep --a old "
            f"--b {impl} --filter case=ID[,ID...] --device {DEVICE} --root {root} --reports all` (a new run), or "
            f"`{env}remap-ab replay ID --a old --b {impl} --device {DEVICE}` (its verdict again, from regenerated "
            "inputs)") in out
    s = json.loads((root / "capped" / "summary.json").read_text())
    assert s["report_folders"] == 6 and s["failing_cases"] == len(failed) and s["reports"] == 3
    # failures_by_dimension stays complete: every failing case counted, folder or not.
    assert sum(f for f, _ in s["failures_by_dimension"]["path"].values()) == len(failed)
    assert s["failures_by_dimension"]["path"]["convert"] == [int((failed.path == "convert").sum()), 8]
    assert cli_main(["report", str(root / "all")]) == 1
    out = capsys.readouterr().out
    assert (f"  report folders: {len(failed)} written for {len(failed)} failing cases, every failing case "
            "(--reports all)\n") in out


def test_the_command_the_summary_gives_writes_a_missing_report(failing, tmp_path, capsys):
    root, impl, _ = failing
    table = _table(root / "capped")
    missing = table[(table.status == "fail") & (table.report == "")].case_id.tolist()[:4]
    assert cli_main(["sweep", "--filter", f"case={','.join(missing)}", "--a", "old", "--b", impl, "--device", DEVICE,
                     "-j", "0", "--no-progress", "--reports", "all", "--root", str(tmp_path), "--run", "one"]) == 1
    again = _table(tmp_path / "one")
    assert sorted(again.case_id) == sorted(missing) and (again.report == again.case_id).all()
    assert all((tmp_path / "one" / c / "verdict.json").is_file() for c in missing)
    capsys.readouterr()


def test_a_resumed_run_keeps_the_cap_and_judges_the_rest(failing, tmp_path, capsys):
    root, impl, _ = failing
    run = tmp_path / "copy"
    shutil.copytree(root / "capped", run)
    (run / "run.lock").unlink(missing_ok=True)
    lines = (run / "results.csv").read_text().splitlines(keepends=True)
    (run / "results.csv").write_text("".join(lines[:6]))  # 5 rows survive the "kill"
    before = set(_table(run).case_id)
    assert cli_main(["sweep", "--resume", "--run", "copy", "--root", str(tmp_path), "--no-progress"]) == 1
    after = _table(run)
    assert len(after) == 16 and after.case_id.is_unique and before < set(after.case_id)
    failed = after[after.status == "fail"]
    assert all((rows.report != "").sum() <= 3 for _, rows in failed.groupby("path"))
    assert json.loads((run / "run.json").read_text())["reports"] == 3
    assert "report folders:" in capsys.readouterr().out


def test_reports_refused_with_resume_and_bad_values_are_one_line(tmp_path, capsys):
    assert cli_main(["sweep", "--resume", "--reports", "all", "--root", str(tmp_path)]) == 2
    assert "--reports" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["sweep", "--list", "--reports", "some"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'some' is neither a count (0 or more) nor 'all'" in err and "Traceback" not in err


# ------------------------------------------------------------------ the soak


def test_a_failing_soak_lists_every_case_and_caps_its_folders(tmp_path, broken_impl, capsys):
    impl = broken_impl(WRITES_INPUTS, name="writes_inputs_soak")
    code = cli_main(["soak", "--minutes", "5", "--max-cases", "12", "--max-tokens", "4", "--max-topk", "256",
                     "--seed", "3", "--device", DEVICE, "--b", impl, "--reports", "1", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    (found,) = (tmp_path / "soak").glob("*/soak.json")
    data = json.loads(found.read_text())
    failures = data["failures"]
    assert data["cases"] == 12 and len(failures) == data["statuses"]["fail"] > 1
    classes: dict = {}
    for f in failures:
        classes.setdefault((f["line"].split("[")[1].split("]")[0], f["labels"]["path"]), []).append(f)
    assert len(classes) < len(failures)  # so the cap shows
    for recs in classes.values():
        with_folder = [f for f in recs if f["report"]]
        assert len(with_folder) == 1 and (Path(with_folder[0]["report"]) / "verdict.json").is_file()
        for f in recs:  # every case: its replay line, a folder or not
            assert f["replay"].startswith("PYTHONPATH=") and (" remap-ab replay " in f["replay"]) == bool(f["report"])
    assert data["report_folders"] == len(classes)
    assert (f"  report folders: {len(classes)} written for {len(failures)} cases not passing, the first 1 failing "
            "cases of each failure class (check × path); any other case's report: its replay line below (or in "
            "soak.json) with --report DIR") in out
    folders = [p for p in found.parent.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(folders) == len(classes)


# ------------------------------------------------------------------ --filter and the rejection calls


def _calls(*filters: str) -> list[str]:
    g = gridmod.load()
    return [c.config.id for c in select_with_calls(g, list(filters), None, rejections.sweep_points(len(g.points()), grid=g))[1]]


CONVERT_CALLS = ["req-id-longer", "req-id-shorter", "topk-not-multiple-of-block-n", "width-not-num-topk",
                 "req-id-int64", "block-table-int64", "token-indices-int64"]
PREFILL_CALLS = ["prefill-ids-missing", "prefill-starts-missing", "prefill-ids-int64", "prefill-starts-int64",
                 "prefill-ids-strided", "prefill-starts-strided"]
DCP_CALLS = ["req-id-longer-dcp", "topk-not-multiple-of-block-n-dcp", "width-not-num-topk-dcp", "req-id-int64-dcp",
             "block-table-int64-dcp", "token-indices-int64-dcp", "dcp-size-zero", "dcp-rank-past-size",
             "dcp-rank-negative", "interleave-not-dividing-block-size"]


def test_filters_keep_the_rejection_calls_whose_base_case_they_keep():
    every = [c.id for c in rejections.load()]
    assert sorted(every) == sorted(CONVERT_CALLS + PREFILL_CALLS + DCP_CALLS)
    assert _calls() == every
    # path: the wrapper, mode and counts of the call's base case (every call's base returns counts).
    assert _calls("path=convert-counts") == CONVERT_CALLS
    assert _calls("path=convert") == [] and _calls("path=dcp-inplace,dcp1-delegate") == []
    assert _calls("path=convert-prefill-counts,dcp-compact-counts") == [c for c in every if c not in CONVERT_CALLS]
    assert _calls("mode=dcp") == [c for c in every if c in DCP_CALLS]  # a configuration field
    # A dimension the base case sits off (4 token rows, K 256): no call is kept.
    assert _calls("tokens=1") == [] and _calls("path=convert-counts", "k=128") == []
    assert _calls("k=384") == ["topk-not-multiple-of-block-n", "topk-not-multiple-of-block-n-dcp"]
    # A rotation is "-" where a dimension sets its fields, as on the grid's points.
    assert _calls("flags=counts") == [] and _calls("flags=-") == every
    assert _calls("dcp=2x1") == ["interleave-not-dividing-block-size"]


def test_case_ids_still_name_rejection_rows_and_a_filtered_list_says_so(capsys):
    g = gridmod.load()
    call = rejections.sweep_points(len(g.points()), grid=g)[0]
    assert _calls(f"case={call.case_id}") == [call.config.id]
    assert cli_main(["sweep", "--list", "--device", "cpu", "--filter", "path=convert", "--filter", "k=128",
                     "--filter", "tokens=1", "--filter", "invalid=0,0.3"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 4 and "rejection=" not in out and "and 0 rejection calls" in err

