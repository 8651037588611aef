"""A failure that a replay does not reproduce is a nondeterministic failure, never a pass
read as "fixed" (issue 60, item 2; remap_ab/replays.py): ``remap-ab replay`` judges a
case whose saved verdict failed 5 times (``--repeat N`` otherwise), prints how many runs
failed and exits 1 when some did not fail, or none did on the same code; a ``nondet``
line (the remap) or a longer replay line (the topology) is printed beside it.

The B's here fail on chosen calls only (tests/impls/flaky_first_call.py and
topology_flaky.py count their calls in a file): the saved run fails on call 1, and the
replays' calls are 2, 3, ...
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from remap_ab import cli, replays, runtime
from remap_ab.subjects.topology import replay as topology_replay
from remap_ab.subjects.topology.config import TopologyCase

IMPLS = Path(__file__).resolve().parent / "impls"
FLAKY = str(IMPLS / "flaky_first_call.py")
DEVICE = runtime.default_device()
SMALL = ["--tokens", "2", "--topk", "256", "--device", DEVICE]


@pytest.fixture
def counter(tmp_path, monkeypatch):
    """The call counter, at 0; the calls in ``calls`` fail (default: call 1 only)."""
    path = tmp_path / "calls"
    path.write_text("0")
    monkeypatch.setenv("REMAP_AB_FLAKY_COUNTER", str(path))

    def reset(calls: str = "1") -> None:
        path.write_text("0")
        monkeypatch.setenv("REMAP_AB_FLAKY_CALLS", calls)

    reset()
    return reset


@pytest.fixture
def saved_failure(tmp_path, counter, capsys) -> Path:
    """The report folder of a run whose B failed (its first call)."""
    assert cli.main(["run", "--b", FLAKY, *SMALL, "--report", str(tmp_path / "rep")]) == 1
    capsys.readouterr()
    [folder] = [p for p in (tmp_path / "rep").iterdir() if p.is_dir()]
    return folder


def test_a_failure_no_replay_repeats_is_nondeterministic_exit_1(saved_failure, capsys):
    assert cli.main(["replay", str(saved_failure), "--device", DEVICE]) == 1  # calls 2..6: all pass
    out = capsys.readouterr().out
    assert "  runs: PASS, PASS, PASS, PASS, PASS" in out
    assert "NONDETERMINISTIC FAILURE: 0 of 5 replays failed, and the saved run failed on the same code and inputs" in out
    [nondet] = [line.split("nondet: ", 1)[1] for line in out.splitlines() if line.startswith("  nondet: ")]
    words = shlex.split(nondet)
    assert words[:2] == ["remap-ab", "nondet"] and words[words.index("--impls") + 1] == FLAKY
    assert words[words.index("--topk") + 1] == "256" and words[words.index("--tokens") + 1] == "2"
    # The nondet line parses as the command it names.
    args = cli.build_parser("nondet", words[1:]).parse_args(words[1:])
    assert args.impls == FLAKY and args.tokens == "2"


def test_the_nondet_line_runs_and_finds_the_flaky_b(saved_failure, counter, capsys, tmp_path, monkeypatch):
    assert cli.main(["replay", str(saved_failure), "--device", DEVICE, "--repeat", "2"]) == 1
    nondet = next(line.split("nondet: ", 1)[1] for line in capsys.readouterr().out.splitlines()
                  if line.startswith("  nondet: "))
    counter("1")  # the study's first call fails, as the saved run's did
    monkeypatch.chdir(tmp_path)  # its artifacts land under ./reports
    assert cli.main(shlex.split(nondet)[1:]) == 1
    assert "nondet: 1 failure(s) of the rule" in capsys.readouterr().out


def _calls_per_run(saved_failure, counter, capsys) -> int:
    """How many times one replay run calls B: once on the CPU; on a GPU the call checks
    (stream, graph) call it again."""
    counter("")
    cli.main(["replay", str(saved_failure), "--device", DEVICE, "--repeat", "1"])
    capsys.readouterr()
    return int(Path(os.environ["REMAP_AB_FLAKY_COUNTER"]).read_text())


def _failing_runs(runs, k: int) -> str:
    """REMAP_AB_FLAKY_CALLS for every call of the replay runs numbered in ``runs``."""
    return ",".join(str(c) for r in runs for c in range((r - 1) * k + 1, r * k + 1))


def test_some_replays_failing_is_nondeterministic_with_the_count(saved_failure, counter, capsys):
    counter(_failing_runs([2], _calls_per_run(saved_failure, counter, capsys)))  # the second run's calls fail
    assert cli.main(["replay", str(saved_failure), "--device", DEVICE, "--repeat", "3"]) == 1
    out = capsys.readouterr().out
    assert "  runs: PASS, FAIL, PASS (the verdict below is run 2's)" in out
    assert "NONDETERMINISTIC FAILURE: 1 of 3 replays failed" in out and "  nondet: remap-ab nondet" in out
    assert "reproduced: yes, same verdict and first mismatch" in out  # the failing run is the saved failure


def test_a_failure_every_replay_repeats_is_reproduced_not_nondeterministic(saved_failure, counter, capsys):
    counter(_failing_runs(range(1, 6), _calls_per_run(saved_failure, counter, capsys)))
    assert cli.main(["replay", str(saved_failure), "--device", DEVICE]) == 1
    out = capsys.readouterr().out
    assert "  replays: 5 of 5 failed" in out and "reproduced: yes" in out
    assert "NONDETERMINISTIC" not in out and "nondet:" not in out


def test_other_code_that_passes_is_a_pass(saved_failure, capsys):
    assert cli.main(["replay", str(saved_failure), "--device", DEVICE, "--b", "new", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "  replays: 0 of 2 failed" in out and "reproduced: NO" in out and "NONDETERMINISTIC" not in out


def test_a_passing_saved_verdict_replays_once_by_default():
    assert replays.runs_for(None, False) == 1 and replays.runs_for(None, None) == 1
    assert replays.runs_for(None, True) == replays.DEFAULT_AFTER_FAILURE == 5
    assert replays.runs_for(3, True) == 3
    assert replays.Replays(1, 0, False, True).status == 0
    assert replays.Replays(5, 0, True, False).status == 0  # other code passing: fixed, as far as it shows


def test_repeat_takes_a_positive_count(saved_failure, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["replay", str(saved_failure), "--repeat", "0"])
    assert caught.value.code == 2
    assert "--repeat" in capsys.readouterr().err


# ----------------------------------------------------------------- the topology

CASE = TopologyCase(rows=2, topk=8, segments=2, keep=4, max_replacements=4, lens="equal", learned="clustered", seed=1)


def test_the_topology_names_a_nondeterministic_failure(counter, tmp_path, capsys):
    b = str(IMPLS / "topology_flaky.py")
    saved = {"case_id": "-", "status": "fail", "check": "b-vs-oracle", "first_mismatch": "merged differs",
             "a": "a", "b": b, "device": DEVICE}
    target = topology_replay.Target(CASE, f"report folder {tmp_path}", saved)
    counter("3")  # of the calls 1..4 (one B call a run) the third fails
    assert topology_replay.replay(target, None, None, DEVICE, 4, str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "  runs: PASS, PASS, FAIL, PASS (the verdict above is run 3's)" in out
    assert "NONDETERMINISTIC FAILURE: 1 of 4 replays failed" in out
    line = re.search(r"  repeat it: (.*)", out)
    assert line and shlex.split(line[1])[:4] == ["remap-ab", "replay", "--subject", "topology"]
    assert "--repeat 40" in line[1]
    # None of 5 (the default after a failure) failing, on the same code: still exit 1.
    counter("99")
    assert topology_replay.replay(target, None, None, DEVICE, None, str(tmp_path)) == 1
    assert "NONDETERMINISTIC FAILURE: 0 of 5 replays failed" in capsys.readouterr().out
