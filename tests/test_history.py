"""``remap-ab history`` (remap_ab/history/, docs/history.md) on a git history built here
from vLLM's real wrapper shapes (tests/impls/shapes/) and planted breaking revisions:

    r1  shape (a), vLLM main's wrappers            base
    r2  a comment changed                          PASS
    r3  shape (c): convert takes out= and          PASS, the two parameters reported as added
        valid_counts_out=
    r4  the file made executable (mode only)       skipped: the same bytes
    r5  the file moved (and a comment changed)     PASS, renamed from the old path (followed)
    r6  imports vllm.platforms                     not loadable, why named
    r7  back to shape (a): drops out= and          API change, against r5 (r6 does not load)
        valid_counts_out= that r5 takes
    r8  the DCP wrapper's rank off by one          FAIL, by check, the first case named

Each pair's sweep is tiny (1 token, K 384, two grid cases and a rejection call; in this
process) so the module takes seconds. The table is asserted row by row, then --json's
document, --resume (finished pairs not run again, a cut pair continued), --baseline with
--range, the walk's first-parent and rename handling, and the one-line errors (exit 2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from remap_ab import runtime, sources
from remap_ab.cli import main as cli_main
from remap_ab.history import revisions
from remap_ab.sweep.run_folder import SIZE_KEY

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ROOT / "tests" / "impls" / "shapes"
OLD = "vllm/v1/attention/backends/mla/sparse_utils.py"
NEW = "vllm/v1/attention/ops/sparse_remap.py"
SMALL = ["-j", "0", "--device", runtime.default_device(), "--max-tokens", "1", "--no-progress",
         "--filter", "path=convert-counts,dcp-compact", "--filter", "k=384", "--filter", "invalid=0.3",
         "--filter", "oor=off"]
COMMENT = ("import kernels_main as _main\n", "# the wrappers hand every call to kernels_main\nimport kernels_main as _main\n")
RANK = ("        dcp_rank,\n        cp_kv_cache_interleave_size,\n",
        "        (dcp_rank + 1) % dcp_size,\n        cp_kv_cache_interleave_size,\n")
VLLM = ("import kernels_main as _main\n", "import kernels_main as _main\nfrom vllm.platforms import current_platform  # noqa\n")
ROW = re.compile(r"^([0-9a-f]{12})  (\S+)  (.{34})  (.+?)\s{2,}(\S+)\s{2,}(.*)$")


def git(repo: Path, *args: str, day: int = 1) -> str:
    date = f"2025-03-{day:02d}T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def shape(name: str, *edits: tuple[str, str]) -> str:
    text = (SHAPES / name).read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def build(repo: Path) -> list[str]:
    """The history above; its commits, oldest first."""
    git(repo, "init", "-q", "-b", "main")
    old, new = repo / OLD, repo / NEW
    old.parent.mkdir(parents=True)
    new.parent.mkdir(parents=True)
    steps = [
        ("shape a: vLLM main's wrappers", lambda: old.write_text(shape("a_main.py"))),
        ("docs: say where the calls go", lambda: old.write_text(shape("a_main.py", COMMENT))),
        ("convert takes out= and valid_counts_out=", lambda: old.write_text(shape("c_index_group.py", COMMENT))),
        ("make the file executable", lambda: old.chmod(0o755)),
        ("move the file to ops/", lambda: (git(repo, "mv", OLD, NEW),
                                           new.write_text(shape("c_index_group.py", COMMENT).replace("wrappers hand", "wrappers pass")))),
        ("use vllm.platforms", lambda: new.write_text(shape("c_index_group.py", VLLM))),
        ("revert the caller buffers", lambda: new.write_text(shape("a_main.py"))),
        ("DCP: pass the rank on", lambda: new.write_text(shape("a_main.py", RANK))),
    ]
    commits = []
    for day, (message, change) in enumerate(steps, start=1):
        change()
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message, day=day)
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    return commits


@pytest.fixture(autouse=True)
def _no_repo_variable(monkeypatch):
    monkeypatch.delenv(sources.REPO_VARIABLE, raising=False)  # the CLI sets it; restored after each test


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The repository, its commits, and one history of it: (status, stdout, root)."""
    repo = tmp_path_factory.mktemp("vllm-like")
    commits = build(repo)
    root = tmp_path_factory.mktemp("histories")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(sources.REPO_VARIABLE, raising=False)
        import io
        from contextlib import redirect_stdout

        out = io.StringIO()
        with redirect_stdout(out):
            status = cli_main(["history", "--repo", str(repo), NEW, "--root", str(root), "--run", "h", *SMALL])
    return repo, commits, status, out.getvalue(), root


def _blob(repo: Path, commit: str, path: str) -> str:
    return git(repo, "rev-parse", f"{commit}:{path}").strip()


def rows(stdout: str) -> list[tuple[str, ...]]:
    return [m.groups() for line in stdout.splitlines() if (m := ROW.match(line))]


def test_the_table_row_by_row(history):
    repo, c, status, out, root = history
    table = rows(out)
    assert [r[0] for r in table] == [x[:12] for x in c], out
    assert [r[1] for r in table] == [f"2025-03-{d:02d}" for d in range(1, 9)]
    verdicts = [r[3].strip() for r in table]
    assert verdicts == ["base", "PASS", "PASS", "skipped", "PASS", "not loadable", "API change",
                        "FAIL (prefix_set 1)"], out
    assert [r[4] for r in table] == ["-", "3/3", "3/3", "-", "3/3", "-", "3/3", "3/3"]
    change = {i + 1: r[5] for i, r in enumerate(table)}
    assert change[1].startswith("the first revision that loads")
    assert change[2] == f"vs {c[0][:12]}"  # a comment: nothing to say
    assert change[3] == (f"vs {c[1][:12]}: API triton_convert_req_index_to_global_index adds out, valid_counts_out "
                         "(reported, not failed)")
    assert change[4] == f"the file's bytes are those at {c[2][:12]} (not swept)"
    assert change[5] == f"vs {c[3][:12]}: renamed from {OLD}"  # followed across the move
    assert change[6].startswith(f"vs {c[4][:12]}: {NEW} imports vllm.platforms") or "vllm.platforms" in change[6], change[6]
    # r6 does not load: r7 is compared with r5, the last revision that does.
    assert change[7] == f"vs {c[4][:12]}: triton_convert_req_index_to_global_index drops out, valid_counts_out"
    assert re.match(rf"vs {c[6][:12]}: case [0-9a-f]{{12}} \[prefix_set\] {c[7][:12]}: ", change[8]), change[8]
    assert f"{c[6][:12]}=" in change[8] and "oracle=" in change[8]  # A, B and the oracle's values there
    assert status == 1 and out.splitlines()[-1].startswith("result: FAIL — 3 of 8 revisions did not pass")
    assert "5 pairs swept" in out.splitlines()[-1]

    # Every failing pair keeps its run folder; the behaviour change its case's report.
    folder = root / "h"
    kept = re.findall(r"^ {14}run folder: (\S+?)(?:;|$)", out, re.M)
    assert kept == [str(folder / f"{c[6][:12]}-vs-{c[4][:12]}"), str(folder / f"{c[7][:12]}-vs-{c[6][:12]}")]
    report = re.search(r"first report: (\S+)$", out, re.M)
    assert report and Path(report[1]).is_file() and Path(report[1]).parent.parent == Path(kept[1])
    summary = json.loads((Path(kept[1]) / "summary.json").read_text())
    assert summary["b"] == f"{c[7][:12]}:{NEW}" and summary["a"] == f"{c[6][:12]}:{NEW}"
    # The unchanged-bytes and unloadable revisions were never swept.
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(
        f"{c[i][:12]}-vs-{c[j][:12]}" for i, j in ((1, 0), (2, 1), (4, 3), (6, 4), (7, 6)))


def test_json_and_resume(history, tmp_path, capsys):
    repo, c, _, _, root = history
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    state_file = copy / "h" / "history.json"
    state = json.loads(state_file.read_text())
    cut, lost = f"{c[7][:12]}-vs-{c[6][:12]}", f"{c[6][:12]}-vs-{c[4][:12]}"
    # Each blob was loaded once: r7 holds r1's bytes, r4 r3's.
    assert len(state["loads"]) == 6 and "vllm.platforms" in state["loads"][_blob(repo, c[5], NEW)]["why"]
    # One pair's row lost with its folder (it reruns), one's row lost with its sweep's last case (the sweep resumes).
    del state["rows"][cut], state["rows"][lost]
    state_file.write_text(json.dumps(state))
    shutil.rmtree(copy / "h" / cut)
    results = copy / "h" / lost / "results.csv"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-1]))

    assert cli_main(["history", "--resume", "--root", str(copy), "--json", "-j", "0", "--no-progress"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs_run"] == 2 and doc["pairs_done_before"] == 3
    assert [r["verdict"] for r in doc["rows"]] == ["base", "PASS", "PASS", "skipped", "PASS", "not loadable",
                                                   "API change", "FAIL"]
    resumed = json.loads((copy / "h" / lost / "run.json").read_text())["last_session"]
    assert resumed["cases"] == 1 and json.loads((copy / "h" / lost / "summary.json").read_text())["cases"] == 3
    # --json's shape: the settings, one dict per row, counts, the status.
    assert doc["format"] == 1 and doc["path"] == NEW and doc["repo"] == str(repo) and doc["subject"] == "remap"
    assert doc["revisions"] == 8 and doc["complete"] and not doc["passed"] and doc["exit_status"] == 1
    assert doc["counts"] == {"base": 1, "PASS": 3, "skipped": 1, "not loadable": 1, "API change": 1, "FAIL": 1}
    assert doc[SIZE_KEY] == 1 and doc["baseline"] is None and doc["seconds_per_pair"] > 0
    row = doc["rows"][7]
    assert set(row) >= {"revision", "date", "subject", "path", "renamed_from", "verdict", "verdict_text", "against",
                        "checks", "cases", "selected", "change", "folder", "report", "seconds", "same_as"}
    assert row["revision"] == c[7] and row["against"] == c[6] and row["checks"] == {"prefix_set": 1}
    assert row["date"] == "2025-03-08T12:00:00+00:00" and row["subject"] == "DCP: pass the rank on"
    assert doc["rows"][4]["renamed_from"] == OLD and doc["rows"][4]["path"] == NEW
    assert "vllm.platforms" in doc["rows"][5]["change"]

    # Everything finished: a second resume runs nothing.
    assert cli_main(["history", "--resume", "--run", "h", "--root", str(copy), "--json", "--no-progress"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["pairs_run"] == 0 and again["pairs_done_before"] == 5 and again["rows"] == doc["rows"]
    # Its settings are the history's own.
    assert cli_main(["history", "--resume", "--root", str(copy), "--filter", "k=128"]) == 2
    assert "--resume continues a history with its own settings; drop --filter" in capsys.readouterr().err


def test_an_interrupted_pair_is_resumed(history, tmp_path, monkeypatch, capsys):
    import signal

    from remap_ab.host.interrupts import Interrupted
    from remap_ab.sweep.run import Sweep

    repo, c, _, _, _ = history
    judge = Sweep._run_inline

    def stopped_at_r7(self):
        if self.settings.b.startswith(c[6][:12]):
            raise Interrupted(signal.SIGTERM)  # what the sweep's handler raises on SIGTERM
        judge(self)

    monkeypatch.setattr(Sweep, "_run_inline", stopped_at_r7)
    argv = ["history", "--repo", str(repo), NEW, "--root", str(tmp_path), "--run", "cut", *SMALL]
    assert cli_main(argv) == 143
    out = capsys.readouterr().out
    assert [r[3].strip() for r in rows(out)][-1] == "INCOMPLETE" and len(rows(out)) == 7
    assert out.splitlines()[-1].startswith("result: INCOMPLETE — 7 of 8 revisions done")
    assert out.splitlines()[-1].endswith(f"resume with: remap-ab history --resume --run cut --root {tmp_path}")
    monkeypatch.setattr(Sweep, "_run_inline", judge)
    assert cli_main(["history", "--resume", "--run", "cut", "--root", str(tmp_path), "--json", "-j", "0"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs_run"] == 2 and doc["pairs_done_before"] == 3 and doc["complete"]
    assert [r["verdict"] for r in doc["rows"]][-2:] == ["API change", "FAIL"]


def test_baseline_within_a_range(history, tmp_path, capsys):
    repo, c, _, _, _ = history
    status = cli_main(["history", "--repo", str(repo), NEW, "--baseline", c[0], "--range", f"{c[1]}..",
                       "--root", str(tmp_path), "--run", "b", "--json", *SMALL, "-j", "1"])  # a worker per pair's sweep
    doc = json.loads(capsys.readouterr().out)
    got = [(r["revision"], r["verdict"], r["against"], r["same_as"]) for r in doc["rows"]]
    assert got == [
        (c[1], "PASS", c[0], ""),  # the range's start: compared, not walked
        (c[2], "PASS", c[0], ""),
        (c[3], "PASS", c[0], c[2]),  # the same two files as r3's pair: its verdict, not swept again
        (c[4], "PASS", c[0], ""),
        (c[5], "not loadable", c[0], ""),
        (c[6], "skipped", c[0], ""),  # the baseline's bytes again
        (c[7], "FAIL", c[0], ""),
    ], doc["rows"]
    assert status == 1 and doc["pairs_run"] == 4 and doc["baseline"] == c[0]
    last = json.loads((Path(doc["rows"][-1]["folder"]) / "run.json").read_text())["last_session"]
    assert last["workers"] == 1 and last["cases"] == 3  # the pool's worker read the revisions from --repo


def test_the_walk_follows_the_first_parent_and_renames(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f.py").write_text("one = 1\n" * 20)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "f.py").write_text("one = 1\n" * 20 + "two = 2\n")
    git(repo, "commit", "-q", "-am", "side change", day=2)
    git(repo, "checkout", "-q", "main")
    git(repo, "mv", "f.py", "g.py")
    git(repo, "commit", "-q", "-m", "rename", day=3)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side", day=4)
    first = revisions.walk(str(repo), "g.py")
    assert [(r.subject, r.path, r.change, r.renamed_from) for r in first.revisions] == [
        ("add", "f.py", "A", ""), ("rename", "g.py", "R", "f.py"), ("merge side", "g.py", "M", "")]
    every = revisions.walk(str(repo), "g.py", all_parents=True)
    assert "side change" in [r.subject for r in every.revisions]
    assert first.revisions[1].blob == first.revisions[0].blob != first.revisions[2].blob  # a pure rename: same bytes


def test_bad_input_is_one_line_exit_2(history, tmp_path, capsys):
    repo, c, _, _, _ = history

    def error(*argv, small=True) -> str:
        # The tiny grid each time: a check that let bad input through must not sweep the whole grid.
        assert cli_main(["history", "--root", str(tmp_path), *argv, *(SMALL if small else [])]) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    plain = tmp_path / "plain"
    plain.mkdir()
    assert "not inside a git repository" in error("--repo", str(plain), NEW)
    assert "no revision in the history of HEAD" in error("--repo", str(repo), "vllm/never_there.py")
    assert "revision 'nope' does not exist" in error("--repo", str(repo), NEW, "--range", "nope..")
    assert "does not exist" in error("--repo", str(repo), NEW, "--range", f"{c[0]}..nope")
    assert "give the revision the range starts after" in error("--repo", str(repo), NEW, "--range", "..HEAD")
    assert "revision 'nope' does not exist" in error("--repo", str(repo), NEW, "--baseline", "nope")
    assert f"--baseline {c[5]}: the file does not load at {c[5][:12]}: {NEW} (line" in error(
        "--repo", str(repo), NEW, "--baseline", c[5])
    assert "give PATH" in error("--repo", str(repo))
    (tmp_path / "a-file").write_text("")
    assert "is a file, not a folder" in error("--repo", str(repo), NEW, "--root", str(tmp_path / "a-file"))
    assert "vllm/v1/attention/ops: a folder at" in error("--repo", str(repo), "vllm/v1/attention/ops")
    assert "no history folder under --root" in error("--resume", small=False)
    assert not any(tmp_path.glob("*/history.json"))  # nothing written for bad input


def test_another_subject(tmp_path, capsys):
    """--subject topology: the same walk over the topology subject's file (its smallest case)."""
    repo = tmp_path / "topo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    text = (ROOT / "kernels_topology" / "fused.py").read_text()
    for day, (message, body) in enumerate((("the kernel", text), ("a comment", "# the fused merge\n" + text),
                                           ("raise on import", text + "raise RuntimeError('planted')\n")), start=1):
        (repo / "witness.py").write_text(body)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message, day=day)
    status = cli_main(["history", "--subject", "topology", "--repo", str(repo), "witness.py", "--root", str(tmp_path),
                       "--json", "-j", "0", "--max-tokens", "1", "--device", runtime.default_device()])
    doc = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in doc["rows"]] == ["base", "PASS", "not loadable"] and status == 1
    assert doc["subject"] == "topology" and doc["rows"][1]["cases"] >= 1
    assert "RuntimeError: planted" in doc["rows"][2]["change"]


def test_the_settings_are_one_object_kept_in_history_json(history, tmp_path, capsys):
    """history.json keeps the pairs' sweep settings as run.json does (HistoryOptions.stored);
    a history.json of format 1 (those settings beside the walk's) still resumes, and a
    damaged setting is one line, exit 2."""
    from remap_ab.cli import build_parser
    from remap_ab.history.run import HistoryOptions

    repo, c, _, _, root = history
    asked = HistoryOptions.from_args(build_parser("history").parse_args(
        ["history", "--repo", str(repo), NEW, "--root", str(tmp_path), "--run", "x", *SMALL]))
    assert asked.sweep.filters == ("path=convert-counts,dcp-compact", "k=384", "invalid=0.3", "oor=off")
    assert (asked.sweep.root, asked.sweep.run, asked.sweep.resume, asked.sweep.progress) == (str(tmp_path), "x", False, False)
    pair = asked.pair("A", "B", tmp_path / "x", "b-vs-a", resume=True)
    assert (pair.a, pair.b, pair.root, pair.run, pair.resume, pair.filters) == (
        "A", "B", str(tmp_path / "x"), "b-vs-a", True, asked.sweep.filters)

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    state_file = copy / "h" / "history.json"
    state = json.loads(state_file.read_text())
    settings = state["settings"]
    assert state["format"] == 2 and settings["sweep"][SIZE_KEY] == 1 and "a" not in settings["sweep"]
    old = {k: v for k, v in settings.items() if k != "sweep"}
    old.update({k: v for k, v in settings["sweep"].items() if k not in ("memcheck", "call_checks")})
    cut = f"{c[7][:12]}-vs-{c[6][:12]}"
    del state["rows"][cut]
    shutil.rmtree(copy / "h" / cut)
    state_file.write_text(json.dumps({**state, "format": 1, "settings": old}))
    assert cli_main(["history", "--resume", "--root", str(copy), "--json", "-j", "0", "--no-progress"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs_run"] == 1 and doc["pairs_done_before"] == 4 and doc["rows"][-1]["verdict"] == "FAIL"
    assert doc["filters"] == list(asked.sweep.filters) and doc[SIZE_KEY] == 1 and doc["reports"] is None
    again = json.loads(state_file.read_text())
    assert again["format"] == 2 and cut in again["rows"]  # rewritten as format 2, the missing fields still absent
    assert again["settings"]["sweep"] == {k: v for k, v in settings["sweep"].items() if k in old}

    again["settings"]["sweep"]["filters"] = "k=384"
    state_file.write_text(json.dumps(again))
    assert cli_main(["history", "--resume", "--root", str(copy), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "history.json: settings field 'sweep.filters' is str 'k=384'" in err, err
    assert "start a new history without --resume" in err
