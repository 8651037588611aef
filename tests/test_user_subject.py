"""A user's own subject, end to end (issue 61, item 7): a file outside the repository, of
at most 100 lines, declaring a small tensor kernel pair on remap_ab.declare (an int32
prefix sum written twice; B drops the carry past its second block of 32), run through
``--subject MODULE:ATTRIBUTE`` by sweep (failing, resumed, --reports honoured), report,
soak, the pytest grid, and run / replay / mutants (through the subject's command parts,
and through the command line where it reaches such a subject)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from remap_ab import cli, runtime, subjects

REPO = Path(__file__).resolve().parents[1]
MODULE = "user_prefix_subject"
NAME = f"{MODULE}:SUBJECT"
DEVICE = runtime.default_device()  # in-process calls run where this process runs kernels

SOURCE = '''"""An inclusive int32 prefix sum, written twice: B drops the carry past its second block."""
import torch
from hypothesis import strategies as st

from remap_ab.declare import Axis, Declared, Grid, Mutant, Output


def prefix_torch(x):
    return torch.cumsum(x, 0, dtype=torch.int32)


def prefix_blocked(x):
    out = torch.empty_like(x)
    carry = 0
    for start in range(0, x.numel(), 32):
        block = torch.cumsum(x[start:start + 32], 0, dtype=torch.int32) + carry
        out[start:start + 32] = block
        carry = int(block[-1]) if start + 32 < 64 else 0  # the planted corner: no carry past 64
    return out


class PrefixSum(Declared):
    title = "an inclusive int32 prefix sum"
    grid = Grid(axes=(Axis("n", (0, 1, 31, 32, 33, 65, 100)), Axis("low", (-5, 0), ("signed", "natural"))), size="n")
    implementations = {"torch": prefix_torch, "blocked": prefix_blocked}
    outputs = (Output("sums"),)
    mutants = (Mutant("plus_one", lambda x: prefix_torch(x) + 1, "b-vs-oracle", "every sum one too high"),
               Mutant("zeroes_input", lambda x: (prefix_torch(x), x.zero_())[0], "inputs_written", "clears its input"))

    def inputs(self, case, device):
        g = torch.Generator().manual_seed(self.seed(case))
        return {"x": torch.randint(case["low"], 10, (case["n"],), generator=g, dtype=torch.int32).to(device)}

    def oracle(self, x):
        total, out = 0, []
        for v in x.tolist():
            total += v
            out.append(total)
        return torch.tensor(out, dtype=torch.int32)

    def strategy(self):
        return st.fixed_dictionaries({"n": st.integers(0, 130), "low": st.sampled_from((-5, 0))})


SUBJECT = PrefixSum()
'''

FAILING = 4  # n 65 and 100, each at both lows
GRID = 14


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The subject's folder, on sys.path for this module's tests (as PYTHONPATH puts it)."""
    folder = tmp_path_factory.mktemp("user")
    (folder / f"{MODULE}.py").write_text(SOURCE)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop(MODULE, None)


def _env(home: Path) -> dict:
    paths = [str(home), str(REPO), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _cli(home: Path, *argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "remap_ab", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=_env(home))


def test_the_subject_is_under_100_lines_and_loads_by_module_and_attribute(home):
    assert len(SOURCE.splitlines()) <= 100
    # docs/subjects.md walks a reader through this very file.
    assert re.search(r"```python\n(.*?)```", (REPO / "docs" / "subjects.md").read_text(), re.S)[1] == SOURCE
    subject = subjects.get(NAME)
    assert subject.columns[:3] == ("status", "check", "first_mismatch") and len(subject.grid.cases()) == GRID


def test_sweep_fails_honours_reports_resumes_and_reports(home, tmp_path):
    root = tmp_path / "runs"
    r = _cli(home, "sweep", "--subject", NAME, "--root", str(root), "--run", "r", "--device", "cpu", "-j", "2",
             "--reports", "1", "--no-progress")
    assert r.returncode == 1, r.stderr
    run = root / "r"
    table = pd.read_csv(run / "results.csv", dtype=str, keep_default_na=False)
    assert list(table.columns[:4]) == ["index", "case_id", "n", "low"] and set(table["low"]) == {"signed", "natural"}
    failed = table[table["status"] != "pass"]
    assert len(failed) == FAILING and set(failed["n"]) == {"65", "100"} and set(failed["check"]) == {"b-vs-oracle"}
    # --reports 1: one folder for the one failure class, whose report shows the first mismatching element.
    reported = [f for f in run.iterdir() if (f / "report.md").is_file()]
    assert len(reported) == 1 and (failed["report"] != "").sum() == 1
    text = (reported[0] / "report.md").read_text()
    case = json.loads((reported[0] / "case.json").read_text())["case"]
    assert "| [64] |" in text and "sha256" in text and f"remap-ab replay --subject {NAME}" in text and case["n"] >= 65
    assert "B's output sums differs from the oracle's at [64]" in r.stdout and "n: 0 0/2" in r.stdout

    # A killed run: the last rows lost; a resume runs only those, and ends with the same verdicts.
    lines = (run / "results.csv").read_text().splitlines(keepends=True)
    (run / "results.csv").write_text("".join(lines[:6]))
    again = _cli(home, "sweep", "--resume", "--run", "r", "--root", str(root), "--no-progress", "-j", "0")
    assert again.returncode == 1, again.stderr
    resumed = pd.read_csv(run / "results.csv", dtype=str, keep_default_na=False)
    assert len(resumed) == GRID and (resumed["status"] != "pass").sum() == FAILING
    shown = _cli(home, "report", str(run))
    assert shown.returncode == 1 and "b-vs-oracle" in shown.stdout, shown.stderr


def test_a_short_soak_finds_the_corner(home, tmp_path):
    r = _cli(home, "soak", "--subject", NAME, "--minutes", "1", "--max-cases", "20", "--workers", "1", "--seed", "7",
             "--device", "cpu", "--root", str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "cases did not pass" in r.stdout and f"remap-ab replay --subject {NAME}" in r.stdout
    # The size cap reaches the strategy: nothing past the corner is drawn, so everything passes.
    capped = _cli(home, "soak", "--subject", NAME, "--minutes", "1", "--max-cases", "10", "--workers", "1",
                  "--seed", "7", "--device", "cpu", "--root", str(tmp_path), "--max-tokens", "64")
    assert capped.returncode == 0 and "PASS — all 10 cases passed" in capped.stdout, capped.stdout + capped.stderr
    # Past one run of the strategy's draws (64 cases), the stream goes on drawing.
    longer = _cli(home, "soak", "--subject", NAME, "--minutes", "1", "--max-cases", "100", "--workers", "1",
                  "--seed", "7", "--device", "cpu", "--root", str(tmp_path), "--max-tokens", "64")
    assert longer.returncode == 0 and "PASS — all 100 cases passed" in longer.stdout, longer.stdout + longer.stderr
    other = _cli(home, "soak", "--subject", NAME, "--minutes", "1", "--device", "cpu", "--root", str(tmp_path),
                 "--max-topk", "64")
    assert other.returncode == 2 and "--max-topk: " in other.stderr and "capped on n only" in other.stderr


def test_the_pytest_grid_runs_the_subjects_grid(home, tmp_path):
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "remap_ab.pytest.plugin", "-p", "no:cacheprovider",
                        "--remap-grid", f"--remap-subject={NAME}", "--remap-grid-reports", str(tmp_path / "grid"),
                        "-q", "-n", "0"], cwd=home, capture_output=True, text=True, timeout=300, env=_env(home))
    assert r.returncode == 1 and f"{FAILING} failed, {GRID - FAILING} passed" in r.stdout, r.stdout[-2000:]
    assert f"replay: PYTHONPATH={home}" in r.stdout


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"a": None, "b": None, "device": DEVICE, "memcheck": False, "root": "reports", **kw})


def test_run_and_replay_through_the_subjects_parts(home, tmp_path, capsys):
    subject = subjects.get(NAME)
    run, replay = subject.command_part("run"), subject.command_part("replay")
    assert run.main(_args(case='{"n": 33, "low": 0}', report=None)) == 0
    assert run.main(_args(case='{"n": 65, "low": -5}', report=str(tmp_path))) == 1
    out = capsys.readouterr().out
    assert out.startswith("PASS") and "FAIL [b-vs-oracle] B's output sums differs from the oracle's at [64]" in out
    folder = next(p for p in tmp_path.iterdir() if (p / "report.md").is_file())
    assert replay.main(_args(target=str(folder))) == 1
    assert "saved verdict: FAIL [b-vs-oracle]" in capsys.readouterr().out
    assert replay.main(_args(target='{"n": 1, "low": 0}', b="torch")) == 0


def test_the_strategy_shrinks_to_the_corner_and_serves_as_a_property_test(home, capsys):
    subject = subjects.get(NAME)
    assert subject.smallest_failing("torch", "blocked", DEVICE)["n"] == 65  # the first length past the corner
    assert subject.command_part("run").main(_args(case=None, report=None, shrink=True)) == 1
    assert 'smallest failing case: {"low": ' in capsys.readouterr().out
    subject.property_test(b="torch")()  # B written right: every drawn case passes
    with pytest.raises(AssertionError, match="b-vs-oracle: B's output sums differs"):
        subject.property_test()()


def test_the_mutants_are_killed_by_their_declared_checks(home, capsys):
    part = subjects.get(NAME).command_part("mutants")
    assert part.main(argparse.Namespace(only=None, list=False, device=DEVICE, jobs=1, json=None)) == 0
    out = capsys.readouterr().out
    assert "mutants: 2 of 2 killed by their declared check" in out and "killed  plus_one" in out


def test_a_mutant_declared_with_the_wrong_check_is_broken_not_killed(home):
    from remap_ab.declare import mutants
    from remap_ab.status import Outcome

    subject = subjects.get(NAME)
    wrong = mutants.Mutant("mislabelled", subject.mutants[0].b, "layout")
    (kill,) = mutants.kill_all(subject, [wrong], DEVICE)
    assert kill.verdict == Outcome.BROKEN and "caught by b-vs-oracle, not by the declared layout" in kill.detail


COMMANDS = [
    (["run", "--subject", NAME, "--case", '{"n": 65, "low": 0}', "--device", DEVICE], 1, "FAIL [b-vs-oracle]"),
    (["replay", "--subject", NAME, '{"n": 100, "low": -5}', "--device", DEVICE], 1, "FAIL [b-vs-oracle]"),
    (["mutants", "--subject", NAME, "--device", DEVICE], 0, "2 of 2 killed"),
]


@pytest.mark.parametrize("argv, status, says", COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_the_command_line_reaches_the_subjects_parts(home, capsys, argv, status, says):
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse: the command does not know the part's options
        code = exc.code
    captured = capsys.readouterr()
    if code == 2 and any(w in captured.err for w in ("packaged subjects", "has no", "unrecognized arguments")):
        pytest.skip(f"remap-ab {argv[0]} does not ask a MODULE:ATTRIBUTE subject's command_part yet (issue 61 "
                    f"item 2, the core-wiring branch): {captured.err.strip()}")
    assert code == status and says in captured.out, captured.out + captured.err
