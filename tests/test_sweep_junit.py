"""``sweep --junitxml`` read back with a JUnit parser (the standard library's ElementTree),
and ``--filter case=ID[,ID...]`` re-running chosen cases of a run's table."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from remap_ab import command_line, runtime
from remap_ab.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]

SELECT = ["--max-tokens", "1", "--filter", "path=convert", "--filter", "k=128", "-j", "0", "--device", "cpu",
          "--no-progress"]


def _cpu_sweep(args: list, badlane) -> subprocess.CompletedProcess:
    """``remap-ab sweep ARGS`` (--device cpu): in this process where its Triton backend is
    the CPU's already (no GPU), else in a process of its own: the device fixes a process's
    backend, and this one runs kernels on cuda. The folder of ``badlane`` (conftest's; B
    changes lane (0, 0) when it is valid, so some cases of the selection fail, the rest
    pass) is on sys.path here and first on the subprocess's PYTHONPATH, this checkout next,
    the caller's entries behind them."""
    if runtime.default_device() == "cpu":
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli_main(["sweep", *args])
        r = subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())
    else:
        r = subprocess.run([sys.executable, "-m", "remap_ab", "sweep", *args], cwd=REPO, env=badlane.env(),
                           capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _run_env(folder: Path) -> str:
    """The PYTHONPATH every line printed for the run in ``folder`` carries (its run.json's)."""
    return command_line.python_path(json.loads((folder / "run.json").read_text())["python_path"])


@pytest.fixture(scope="module")
def badlane_run(tmp_path_factory, badlane_module):
    """One sweep of SELECT with B = badlane (some cases fail), its JUnit XML and every
    failing case's report: (the sweep, its runs root, the XML's path). The tests below
    read it; none changes it (a test that would copies the run folder first)."""
    base = tmp_path_factory.mktemp("junit")
    xml_path = base / "sweep.xml"
    r = _cpu_sweep(["--b", "badlane", *SELECT, "--root", str(base / "runs"), "--run", "r",
                    "--junitxml", str(xml_path), "--reports", "all"], badlane_module)
    return r, base / "runs", xml_path


def test_junit_has_one_testcase_per_case_with_the_verdict_line_and_the_replay_command(badlane_run, badlane_module):
    r, runs, xml_path = badlane_run
    assert r.returncode == 1, r.stdout + r.stderr
    calls = 0  # the rejection calls the filters keep are testcases too; path=convert keeps none (theirs count)
    assert r.stderr.endswith(f"JUnit XML: {xml_path} ({8 + calls} testcases)\n"), r.stderr
    folder = runs / "r"
    table = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)

    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert int(suite.get("tests")) == 8 + calls
    assert len(suite.findall("testcase[@classname='remap-ab.sweep.rejection']")) == calls
    cases = suite.findall("testcase[@classname='remap-ab.sweep.convert']")
    assert len(cases) == 8
    table = table[table["case_id"].isin([str(c.get("name")).split(" ")[0] for c in cases])]
    failing = table[table["status"] == "fail"]
    assert 0 < len(failing) < 8 and int(suite.get("failures")) == len(failing)
    assert suite.get("errors") == "0" and suite.get("skipped") == "0"
    by_id = {c.get("name").split(" ")[0]: c for c in cases}
    assert set(by_id) == set(table["case_id"])
    for row in table.to_dict("records"):
        case = by_id[row["case_id"]]
        assert case.get("classname") == "remap-ab.sweep.convert"
        assert case.get("name").startswith(f"{row['case_id']} [path=convert k=128 tokens=1 ")
        failure = case.find("failure")
        if row["status"] == "pass":
            assert failure is None and case.find("system-out") is None
            continue
        # The verdict line, word for word, as the failure message.
        assert failure.get("message") == row["first_mismatch"] == failure.text
        assert failure.get("message").startswith("[out] badlane: output differs from the oracle at row 0, col 0 (")
        assert failure.get("message").endswith("); 1 lane in 1 row differs")
        out = case.find("system-out").text.splitlines()
        assert out[0] == f"verdict: FAIL {row['first_mismatch']}"
        assert out[1] == (f"replay: PYTHONPATH={badlane_module.folder}${{PYTHONPATH:+:$PYTHONPATH}} remap-ab replay "
                          f"{(folder / row['case_id']).resolve()}")
        assert out[2] == f"report: {folder / row['case_id'] / 'diff.html'}"
        env = _run_env(folder)
        assert str(badlane_module.folder) in env  # B's folder: the line runs in a shell without it
        assert out[3] == (f"run it alone: {env}remap-ab sweep --a old --b badlane --device cpu --root {folder.parent} "
                          f"--filter case={row['case_id']}")


def test_a_run_not_finished_is_skipped_in_junit_never_passed(tmp_path, badlane_run):
    import shutil

    from remap_ab.subjects.remap.grid import grid as gridmod
    from remap_ab.sweep import junit

    r, runs, _ = badlane_run
    assert r.returncode == 1, r.stdout + r.stderr
    folder = tmp_path / "runs" / "r"
    shutil.copytree(runs / "r", folder)
    lines = (folder / "results.csv").read_text().splitlines(keepends=True)
    (folder / "results.csv").write_text("".join(lines[:4]))  # 3 of 8 rows survive
    g = gridmod.load()
    points = g.select(gridmod.parse_filters(g, ["path=convert", "k=128"]), max_tokens=1)
    root = junit.build(folder, points).getroot()
    skipped = root.findall(".//skipped")
    assert root.get("skipped") == "5" and len(skipped) == 5
    assert skipped[0].get("message") == (
        f"not run: the run is incomplete; resume with: {_run_env(folder)}remap-ab sweep --resume --run r "
        f"--root {tmp_path / 'runs'}")


def test_filter_case_reruns_exactly_the_cases_named(tmp_path, badlane_run, badlane_module):
    r, runs, _ = badlane_run
    assert r.returncode == 1, r.stdout + r.stderr
    table = pd.read_csv(runs / "r" / "results.csv", dtype=str, keep_default_na=False)
    wanted = list(table[table["status"] == "fail"]["case_id"])[:2]
    r = _cpu_sweep(["--b", "badlane", "--filter", f"case={','.join(wanted)}", "-j", "0", "--device", "cpu",
                    "--no-progress", "--root", str(tmp_path / "runs"), "--run", "again"], badlane_module)
    assert r.returncode == 1, r.stdout + r.stderr
    again = pd.read_csv(tmp_path / "runs" / "again" / "results.csv", dtype=str, keep_default_na=False)
    assert sorted(again["case_id"]) == sorted(wanted) and set(again["status"]) == {"fail"}
    assert f"  cases: 2 run of 2 selected (1728 in the grid); filters: case={','.join(wanted)}\n" in r.stdout


@pytest.mark.parametrize("spec, message", [
    ("case=xyz", "remap-ab sweep: error: --filter 'case=xyz': 'xyz' is not a case ID (12 hex digits, as "
                 "`sweep --list` and a run's results.csv show them)\n"),
    ("case=4a4bd9116017,abcdef123456", "remap-ab sweep: error: --filter 'case=4a4bd9116017,abcdef123456': no case of "
                                       "the grid has ID abcdef123456; `remap-ab sweep --list` lists the grid's cases\n"),
])
def test_filter_case_refuses_what_is_no_case_of_the_grid(spec, message, capsys):
    assert cli_main(["sweep", "--list", "--filter", spec]) == 2
    assert capsys.readouterr().err == message
