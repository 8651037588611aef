"""``remap-ab replay --subject topology TARGET`` (remap_ab/subjects/topology/replay.py,
replay_command.py): a failing B's report folder replays to the same verdict (exit 1), by
its folder, a file in it or its case ID; a passing case's JSON exits 0; a corrupt folder
or JSON, an unknown ID and --memcheck are one line and exit 2; the replay line every
finding prints parses through the CLI's parser back into its case and implementations;
``python -m remap_ab.subjects.topology`` is an alias of the same replay."""

from __future__ import annotations

import json
import shlex

import pytest

from remap_ab import cli, command_line, runtime
from remap_ab.status import Status
from remap_ab.subject import BatchTimes, JudgeSettings
from remap_ab.subjects.topology import grid, mutants, report
from remap_ab.subjects.topology.__main__ import main as alias_main
from remap_ab.subjects.topology.config import TopologyCase
from remap_ab.subjects.topology.subject import SUBJECT

DEVICE = runtime.current()
# One row, one segment, its one token learned: no witness, nothing uncovered; passes.
PASSING = TopologyCase(rows=1, topk=1, segments=1, keep=0, max_replacements=1, explicit_learned=((0,),),
                       explicit_lens=(1,))


def replay(*words: str) -> int:
    return cli.main(["replay", "--subject", "topology", "--device", DEVICE, *words])


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory):
    """A sweep's report folder of a mutant B (``edge_rounded_down``) failing its witness
    case: (the run folder, the case's folder, its results row, the mutant's file)."""
    folder = tmp_path_factory.mktemp("topology_replay")
    mutant = next(m for m in mutants.mutants() if m.id == "edge_rounded_down")
    path = folder / "edge rounded down's.py"  # a space and a quote: the lines quote it
    path.write_text(mutants.mutated_source(mutant))
    runs = folder / "runs" / "run-1"
    sel = SUBJECT.select(None, [f"case={report.case_id(mutant.witness_case)}"], None, "a", str(path), DEVICE, None)
    settings = JudgeSettings(a=sel.a, b=sel.b, device=DEVICE, folder=str(runs), reports=None)
    [row] = SUBJECT.judge([p.config for p in sel.points], settings, BatchTimes())
    assert (row["status"], row["check"]) == (Status.FAIL, "b-vs-oracle")
    return runs, runs / row["report"], row, path.resolve()


def test_a_failing_bs_folder_replays_to_the_same_verdict(mutant_report, capsys):
    runs, folder, row, path = mutant_report
    saved = json.loads((folder / "verdict.json").read_text())
    assert (saved["status"], saved["check"], saved["first_mismatch"], saved["b"]) == (
        "fail", "b-vs-oracle", row["first_mismatch"], str(path))
    # By the folder (B is the one the folder records), a file in it, and the case ID.
    for words in ([str(folder)], [str(folder / "case.json")], [row["case_id"], "--root", str(runs.parent)]):
        assert replay(*words) == 1, words
        out = capsys.readouterr().out
        assert "MISMATCH b: merged" in out
        assert f"  verdict: FAIL (b-vs-oracle): {row['first_mismatch']}; A a, B {path}, on {DEVICE}" in out
        assert f"  saved verdict: FAIL (b-vs-oracle): {row['first_mismatch']}" in out
        assert "  reproduced: yes, the same verdict and first mismatch" in out
    # The real B on the same folder: no mismatch, so not the saved verdict.
    replay(str(folder), "--b", "b")
    out = capsys.readouterr().out
    assert "MISMATCH" not in out and "reproduced: NO: the verdict differs from the saved one" in out


def test_the_alias_replays_the_same_folder(mutant_report, capsys):
    _, folder, row, _ = mutant_report
    assert alias_main([str(folder)]) == 1
    assert "reproduced: yes, the same verdict and first mismatch" in capsys.readouterr().out


def test_a_passing_case_s_json_exits_0_and_a_grid_id_is_found(capsys):
    assert replay(PASSING.to_json()) == 0
    out = capsys.readouterr().out
    assert "A, B and the oracle agree bit for bit; every property holds" in out and "verdict: PASS;" in out
    assert "saved verdict" not in out
    # A grid case by its ID, without a report under --root: the grid's case.
    case = grid.cpu_cases()[0]
    assert replay(report.case_id(case), "--root", "no-such-root") in (0, 1)
    out = capsys.readouterr().out
    assert out.startswith(f"case {case.key()}") and f"from the grid's case {report.case_id(case)}" in out


def _one_line_exit_2(capsys, *words: str) -> str:
    assert replay(*words) == 2, words
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and captured.out == "", err
    return err


def test_bad_targets_are_one_line_and_exit_2(tmp_path, mutant_report, capsys):
    assert "not JSON" in _one_line_exit_2(capsys, "{oops")
    assert "no topology case" in _one_line_exit_2(capsys, '{"rows": 1}')
    assert "segments must be in 1..64" in _one_line_exit_2(capsys, PASSING.to_json().replace('"segments":1', '"segments":65'))
    assert "no topology report of case abcdefabcdef" in _one_line_exit_2(capsys, "abcdefabcdef", "--root", str(tmp_path))
    assert "neither a topology report folder" in _one_line_exit_2(capsys, str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no case.json" in _one_line_exit_2(capsys, str(empty))
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "case.json").write_text('{"rows": 1, "topk"')
    assert "case.json: not JSON" in _one_line_exit_2(capsys, str(corrupt))
    # A folder whose verdict.json is cut short, or of another case.
    _, folder, _, _ = mutant_report
    for name, text in (("cut", '{"status": "fail"'), ("other", json.dumps({**json.loads((folder / "verdict.json").read_text()),
                                                                         "case_id": "0" * 12}))):
        bad = tmp_path / name
        bad.mkdir()
        (bad / "case.json").write_text((folder / "case.json").read_text())
        (bad / "verdict.json").write_text(text)
        assert "the report is corrupt" in _one_line_exit_2(capsys, str(bad))
    assert "no memory check" in _one_line_exit_2(capsys, PASSING.to_json(), "--memcheck")
    assert "no_such.module" in _one_line_exit_2(capsys, PASSING.to_json(), "--b", "no_such.module")


def _parsed(line: str):
    words = shlex.split(line)
    while "=" in words[0] and not words[0].startswith(command_line.PROGRAM):
        words.pop(0)  # PYTHONPATH=...
    assert words[0] == command_line.PROGRAM
    return cli.build_parser(words[1]).parse_args(words[1:])


def test_every_topology_replay_line_parses_back_into_its_case_and_implementations(mutant_report):
    _, folder, row, path = mutant_report
    case = TopologyCase.from_json((folder / "case.json").read_text())
    awkward = "/tmp/a dir/it's b.py"
    lines = {
        "case": case.replay_command(), "report": report.replay_command(case, "a", awkward),
        "subject": SUBJECT.replay_line(case, {}, str(folder), "a", str(path)),  # the soak's and the plugin's
        "path": case.replay_command("a", str(path), ["/tmp/my mods"]),
    }
    for kind, line in lines.items():
        args = _parsed(line)
        assert (args.command, args.subject) == ("replay", "topology"), kind
        assert TopologyCase.from_json(args.target) == case, kind
    assert (_parsed(lines["case"]).a, _parsed(lines["case"]).b) == (None, None)
    assert _parsed(lines["report"]).b == awkward and _parsed(lines["subject"]).b == str(path)
    assert lines["path"].startswith("PYTHONPATH='/tmp/my mods'") and _parsed(lines["path"]).b == str(path)
    # The report folder's own line is the same line.
    assert report.replay_command(case, "a", str(path)) in (folder / "report.md").read_text()
