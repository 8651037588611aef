"""The run folder defended (issue 60, item 4): every results.csv row is checked
(schema.ResultRow: status a verdict, index and worker numbers, a case ID; the header's
number of fields) by ``report`` and ``--resume``; a row that is not valid is one line,
exit 2, naming the file, the row and the field and saying how to repair, with the folder
left byte for byte; ``--resume --repair`` re-runs exactly those rows' cases and keeps
every valid row as it was. ``--run`` is a name under ``--root``: a path is one line,
exit 2, and nothing is written anywhere. A killed writer leaves whole rows and whole
files. Each bad input below is data: what is done to the table, what the line names."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from remap_ab import command_line
from remap_ab.cli import main as cli_main
from remap_ab.sweep import run_folder

SUMS = ["sweep", "--subject", "sums_subject:SUBJECT", "-j", "0", "--no-progress"]  # 12 cases, no kernel
TOTAL = 12


def _sweep(root: Path, *more: str) -> int:
    return cli_main([*SUMS, "--root", str(root), *more])


@pytest.fixture
def run(tmp_path, capsys) -> Path:
    """A finished run of the sums subject, every case passing: runs/r."""
    assert _sweep(tmp_path / "runs", "--run", "r") == 0
    capsys.readouterr()
    return tmp_path / "runs" / "r"


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "run.lock"}  # the lock: who holds it


def _lines(folder: Path) -> list[str]:
    return (folder / "results.csv").read_text().splitlines(keepends=True)


def _set_field(line: str, header: list[str], field: str, value: str) -> str:
    cells = line.rstrip("\r\n").split(",")
    cells[header.index(field)] = value
    return ",".join(cells) + "\r\n"


# (id, what is done to data row 2, the words the line must hold). Row 2: the second under the header.
DAMAGE = [
    ("status-not-a-verdict", lambda line, h: _set_field(line, h, "status", "pas"),
     "field 'status' is str 'pas', expected one of pass, fail, error, crash, timeout"),
    ("status-empty", lambda line, h: _set_field(line, h, "status", ""), "field 'status' is str ''"),
    ("index-not-a-number", lambda line, h: _set_field(line, h, "index", "x1"), "field 'index' is str 'x1', expected a whole number"),
    ("case-id-empty", lambda line, h: _set_field(line, h, "case_id", ""), "field 'case_id' is str '', expected a case ID"),
    ("worker-not-a-number", lambda line, h: _set_field(line, h, "worker", "w"), "field 'worker' is str 'w'"),
    ("a-field-too-many", lambda line, h: line.rstrip("\r\n") + ",extra\r\n", "has {n} fields, the header {h}"),
    ("a-half-row-with-newline", lambda line, h: line[: len(line) // 2] + "\r\n", "fields, the header"),
    ("a-case-not-selected", lambda line, h: _set_field(line, h, "case_id", "ffffffffffff"),
     "is case 'ffffffffffff', which this run does not select"),
    ("a-case-twice", lambda line, h: _set_field(line, h, "case_id", _first_case(h)),
     "field 'case_id' names the case of row 1 again"),
]


def _meta(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())


def _first_case(header: list[str]) -> str:
    """Filled in by _damage: the case ID of row 1 (a row 2 naming it names a case twice)."""
    return _FIRST[0]


_FIRST: list[str] = []


def _damage(folder: Path, how) -> tuple[list[str], list[str]]:
    """Row 2 of results.csv damaged by ``how``; (the lines before, the lines now)."""
    before = _lines(folder)
    header = before[0].rstrip("\r\n").split(",")
    _FIRST[:] = [before[1].split(",")[header.index("case_id")]]
    after = list(before)
    after[2] = how(before[2], header)
    (folder / "results.csv").write_text("".join(after), newline="")
    return before, after


@pytest.mark.parametrize("case", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_row_that_is_not_valid_is_one_line_and_repair_reruns_only_it(run, capsys, case):
    _, how, words = case
    before, after = _damage(run, how)
    header = before[0].rstrip("\r\n").split(",")
    words = words.format(n=len(after[2].rstrip("\r\n").split(",")), h=len(header))
    frozen = _snapshot(run)
    repair = f"remap-ab sweep --resume --repair --run r --root {run.parent}"

    # report and --resume: exit 2, one line naming the file, the row, the field; the repair line.
    for argv, name in ((["report", "r", "--root", str(run.parent)], "report"),
                       ([*SUMS[:1], "--resume", "--run", "r", "--root", str(run.parent), "--no-progress"], "sweep")):
        assert cli_main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith(f"remap-ab {name}: error: {run / 'results.csv'}"), err
        assert "row 2" in err and words in err, err
        assert f"repair with: {command_line.python_path(_meta(run)['python_path'])}{repair} (re-runs" in err, err
        assert _snapshot(run) == frozen  # refused before anything was written

    # --resume --repair: the damaged row goes, its case runs again, every other row stays byte for byte.
    assert cli_main(repair.split()[1:] + ["--no-progress", "-j", "0"]) == 0
    out, err = capsys.readouterr()
    assert "repairing: " in err and "row 2" in err and "1 to run" in err, err
    now = _lines(run)
    assert now[0] == before[0] and len(now) == TOTAL + 1
    kept = [line for i, line in enumerate(before) if i not in (0, 2)]
    assert now[1:TOTAL] == kept  # the good rows, in their order, unchanged
    assert now[-1].split(",")[1] == before[2].split(",")[1] or "ffffffffffff" in after[2]  # the case run again
    assert cli_main(["report", "r", "--root", str(run.parent)]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_run_whose_every_row_is_valid_resumes_without_repair_and_repair_changes_nothing(run, capsys):
    frozen = _snapshot(run)["results.csv"]
    assert cli_main([*SUMS[:1], "--resume", "--repair", "--run", "r", "--root", str(run.parent), "--no-progress"]) == 0
    assert "repairing" not in capsys.readouterr().err
    assert _snapshot(run)["results.csv"] == frozen


def test_repair_is_for_a_resume(tmp_path, capsys):
    assert _sweep(tmp_path / "runs", "--repair") == 2
    err = capsys.readouterr().err
    assert err == "remap-ab sweep: error: --repair mends a run folder that --resume continues; add --resume (and --run NAME)\n"
    assert not (tmp_path / "runs").exists()


# --run is a name: each of these would land outside --root, or be no folder of it.
NOT_NAMES = ["../x", "{tmp}/abs", "a/b", ".", "..", "x/../../y"]


@pytest.mark.parametrize("name", NOT_NAMES)
@pytest.mark.parametrize("resume", [False, True], ids=["new", "resume"])
def test_run_is_a_name_not_a_path(tmp_path, capsys, name, resume):
    name = name.format(tmp=tmp_path)
    root = tmp_path / "root" / "runs"
    root.mkdir(parents=True)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    argv = ["sweep", "--resume", "--root", str(root), "--run", name] if resume else [*SUMS, "--root", str(root), "--run", name]
    assert cli_main(argv) == 2
    out, err = capsys.readouterr()
    assert err == (f"remap-ab sweep: error: --run {name!r}: a run is the name of a folder under --root, not a path; "
                   "give the folder with --root and the name alone with --run\n"), err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written, inside or out


def test_a_run_name_that_is_a_link_out_of_root_is_refused(tmp_path, capsys):
    root, outside = tmp_path / "runs", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    (root / "r").symlink_to(outside)
    assert _sweep(root, "--run", "r") == 2
    err = capsys.readouterr().err
    assert err.startswith("remap-ab sweep: error: --run 'r': ") and "leads outside --root" in err, err
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------- atomic writes


def test_rows_are_written_whole_in_one_write_and_flushed_to_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(run_folder.ResultsWriter, "SYNC_SECONDS", 0.0)  # every write synced
    writes, syncs = [], []
    real_write, real_fsync = os.write, os.fsync
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(bytes(data)) or real_write(fd, data))
    monkeypatch.setattr(os, "fsync", lambda fd: syncs.append(fd) or real_fsync(fd))
    table = run_folder.ResultsWriter(tmp_path, ["index", "case_id", "status"])
    table.write([{"index": 0, "case_id": "a" * 12, "status": "pass"}, {"index": 1, "case_id": "b" * 12, "status": "fail"}])
    assert len(syncs) == 2
    table.close()
    # The header, then the batch's two rows in one write; each write ends a line and is fsynced, and the close too.
    assert writes == [b"index,case_id,status\r\n", b"0,aaaaaaaaaaaa,pass\r\n1,bbbbbbbbbbbb,fail\r\n"]
    assert len(syncs) == 3


def test_a_row_cut_by_a_kill_is_ignored_then_dropped_and_run_again(run, capsys):
    lines = _lines(run)
    cut = "".join(lines[:-1]) + lines[-1][:20]  # the last row half-written, no newline: a kill mid-write
    (run / "results.csv").write_text(cut, newline="")
    assert cli_main(["report", "r", "--root", str(run.parent)]) == 1  # incomplete, not an invalid row
    out = capsys.readouterr().out
    assert "a half-written last row was ignored" in out and "1 of 12 selected cases not run" in out
    assert cli_main([*SUMS[:1], "--resume", "--run", "r", "--root", str(run.parent), "--no-progress"]) == 0
    assert _lines(run)[:-1] == lines[:-1] and len(_lines(run)) == TOTAL + 1


def test_a_whole_file_write_killed_before_its_rename_leaves_the_old_file(tmp_path, monkeypatch):
    run_folder.write_run_json(tmp_path, {"run": "old"})
    old = (tmp_path / "run.json").read_bytes()

    def killed(fd):
        raise OSError("killed")  # the writer stopped after writing, before the rename

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(OSError):
        run_folder.write_run_json(tmp_path, {"run": "new"})
    assert (tmp_path / "run.json").read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


def test_a_run_that_exists_already_says_the_line_that_continues_it(run, capsys):
    assert _sweep(run.parent, "--run", "r") == 2
    err = capsys.readouterr().err
    line = err.split("continue it with: ")[1].strip()
    assert err.startswith(f"remap-ab sweep: error: run folder {run} already exists; give another --run") and line.endswith(
        f"remap-ab sweep --resume --run r --root {run.parent}"), err
    assert cli_main(line.split("remap-ab ", 1)[1].split() + ["--no-progress"]) == 0  # nothing left: the summary again
