"""The run's own state must be true (issue 10): an incomplete run is never PASS, a
resume refuses a table it was not written for (leaving it byte-identical), one process
at a time holds a run folder, a hanging case times out and the sweep goes on, bad grid
files, run.json fields and --root are one-line errors (exit 2), progress keeps talking
to a log and its ETA is not fooled by the first cases, --list says what it lists, and
the summary groups failures by every dimension value and by the rows' valid lanes."""

import io
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pandas as pd
import pytest

from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.subjects.remap.judge.rejections import load as rejection_calls

REPO = Path(__file__).resolve().parents[1]
CALLS = len(rejection_calls())  # a sweep also makes SPEC §6's violating calls that its filters keep: rows of their own
TWO_CALLS = 0  # TWO's tokens=1 keeps no rejection call (their base cases have 4 token rows)

TWO = ["--filter", "tokens=1", "--filter", "k=128", "--filter", "oor=off", "--filter", "invalid=0",
       "--filter", "path=convert,convert-counts"]

HANGING = '''
"""kernels_old, but the plain convert never returns (a kernel that hangs) once it has
accepted a call: the sweep's rejection calls are rejected as old rejects them."""
import time
from kernels_old import triton_convert_req_index_to_global_index as _checked
from kernels_old import triton_filter_and_convert_dcp_index  # noqa: F401


def triton_convert_req_index_to_global_index(*args, **kwargs):
    _checked(*args, **kwargs)
    time.sleep(600)
'''


def _one_line_error(code, capsys, status=2):
    out, err = capsys.readouterr()
    assert code == status, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def done_run(tmp_path_factory):
    """A finished two-case run (old vs new, on the session's device, -j 0 in this process,
    as the tests below resume theirs; a process of its own would import torch again for
    two cases): its folder."""
    root = tmp_path_factory.mktemp("state")
    assert cli_main(["sweep", *TWO, "-j", "0", "--root", str(root), "--run", "two", "--no-progress"]) == 0
    return root / "two"


def _copy(run: Path, tmp_path: Path, name="copy") -> Path:
    import shutil

    dest = tmp_path / name
    shutil.copytree(run, dest)
    (dest / "run.lock").unlink(missing_ok=True)
    return dest


# ------------------------------------------------------------------ incomplete runs


def test_report_of_an_incomplete_run_is_never_pass(done_run, tmp_path, capsys):
    run = _copy(done_run, tmp_path)
    table = run / "results.csv"
    lines = table.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 2 + TWO_CALLS
    # Every row but the last, and that one half-written (no newline): it is not a case.
    table.write_text("".join(lines[:-1]) + lines[-1][:30])
    assert cli_main(["report", str(run)]) == 1
    out = capsys.readouterr().out
    result = [line for line in out.splitlines() if "result:" in line][0]
    assert "PASS" not in result and f"INCOMPLETE — 1 of {2 + TWO_CALLS} selected cases not run" in result
    assert "half-written last row was ignored" in out
    command = result.split("resume with: ")[1]
    assert command == f"remap-ab sweep --resume --run copy --root {shlex.quote(str(tmp_path))}"
    # The printed command really resumes it: afterwards the run is complete and passes.
    # (In this process: the run is of this session's device, as the tests below resume theirs.)
    assert cli_main([*shlex.split(command)[1:], "--no-progress"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert cli_main(["report", str(run), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["complete"] and s["missing"] == 0 and s["cases"] == 2 + TWO_CALLS and s["passed"]


def test_report_of_a_run_with_no_finished_case(done_run, tmp_path, capsys):
    run = _copy(done_run, tmp_path)
    (run / "results.csv").write_text((run / "results.csv").read_text().splitlines(keepends=True)[0])
    assert cli_main(["report", str(run)]) == 1
    assert f"INCOMPLETE — {2 + TWO_CALLS} of {2 + TWO_CALLS} selected cases not run" in capsys.readouterr().out


# ------------------------------------------------------------------ resume refusals


def _mangle_header(t: Path):
    head, rest = t.read_text().split("\n", 1)
    t.write_text(",".join(head.split(",")[:-1]) + "\n" + rest)


def _foreign_rows(t: Path):
    lines = t.read_text().splitlines(keepends=True)
    t.write_text(lines[0] + lines[1].replace(lines[1].split(",")[1], "0123456789ab", 1))


def _selection_changed(run: Path):
    meta = json.loads((run / "run.json").read_text())
    meta["selection"] = "0" * 16
    (run / "run.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("damage, words", [
    (lambda run: _mangle_header(run / "results.csv"), "columns"),
    (lambda run: _foreign_rows(run / "results.csv"), "does not select"),
    (_selection_changed, "selection changed"),
])
def test_resume_refuses_a_table_it_was_not_written_for(done_run, tmp_path, capsys, damage, words):
    run = _copy(done_run, tmp_path)
    table = run / "results.csv"
    table.write_text("".join(table.read_text().splitlines(keepends=True)[:2]))  # one case left to run
    damage(run)
    before = table.read_bytes()
    err = _one_line_error(cli_main(["sweep", "--resume", "--run", "copy", "--root", str(tmp_path), "--no-progress"]), capsys)
    assert words in err
    assert table.read_bytes() == before


# ------------------------------------------------------------------ the run lock


def _hold_lock(lock_class, run: Path, tell) -> None:
    lock = lock_class(run).acquire()
    tell.send("held")
    time.sleep(120)
    lock.release()


def test_a_second_process_cannot_use_a_run_folder_while_the_first_lives(done_run, tmp_path, capsys):
    run = _copy(done_run, tmp_path)
    table = run / "results.csv"
    table.write_text("".join(table.read_text().splitlines(keepends=True)[:2]))
    # The holder: a process forked from this one (no interpreter start, no torch import;
    # it imports nothing, so no lock another thread held at the fork can stop it).
    from remap_ab.sweep.run_folder import RunLock

    said, tell = multiprocessing.Pipe(duplex=False)
    holder = multiprocessing.get_context("fork").Process(target=_hold_lock, args=(RunLock, run, tell), daemon=True)
    holder.start()
    try:
        assert said.poll(60) and said.recv() == "held"
        before = table.read_bytes()
        # -j 0: the lock is taken before any worker would start (a resume's workers are
        # test_report_of_an_incomplete_run_is_never_pass's).
        resume = ["sweep", "--resume", "--run", "copy", "--root", str(tmp_path), "--no-progress", "-j", "0"]
        err = _one_line_error(cli_main(resume), capsys)
        assert "in use by another remap-ab process" in err and f"pid {holder.pid}" in err
        assert table.read_bytes() == before
        # report reads without the lock, and says the run is still going.
        assert cli_main(["report", str(run)]) == 1
        assert f"a sweep is running it: pid {holder.pid}" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.join()
    # The holder died without a goodbye: its lock file stays, naming a dead pid; no block.
    assert f"pid {holder.pid}" in (run / "run.lock").read_text()
    assert cli_main(resume) == 0
    assert len(pd.read_csv(table)) == 2 + TWO_CALLS


def test_the_lock_is_per_open_not_per_process(tmp_path):
    from remap_ab.errors import UsageError
    from remap_ab.sweep.run_folder import RunLock

    with RunLock(tmp_path):
        assert RunLock.holder(tmp_path).startswith(f"pid {os.getpid()}")
        with pytest.raises(UsageError):
            RunLock(tmp_path).acquire()
    assert RunLock.holder(tmp_path) is None
    RunLock(tmp_path).acquire().release()


# ------------------------------------------------------------------ case timeout


def test_a_hanging_case_times_out_and_the_sweep_goes_on(tmp_path, capsys, monkeypatch):
    # The sweep in this process: what hangs is its worker, a process of its own (given the
    # implementation's folder on PYTHONPATH as well as on sys.path). The timeout's clock
    # starts once the worker is ready; the passing case takes well under 1 s of it on the CPU.
    (tmp_path / "hangimpl.py").write_text(HANGING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    status = cli_main(["sweep", "--b", "hangimpl", *TWO[:-1], "path=convert,dcp-inplace", "-j", "1", "--case-timeout",
                       "4", "--root", "reports", "--run", "h", "--no-progress"])
    r = capsys.readouterr()
    assert status == 1, r.err
    assert time.monotonic() - started < 120  # not the 600 s the implementation sleeps
    df = pd.read_csv(tmp_path / "reports" / "h" / "results.csv", keep_default_na=False)
    cases = df[df.rejection == ""]
    assert dict(zip(cases.path, cases.status)) == {"convert": "timeout", "dcp-inplace": "pass"}
    row = df[df.status == "timeout"].iloc[0]
    assert row.check == "timeout" and "--case-timeout 4 s" in row.first_mismatch
    assert set(df.worker) == {0}  # the replacement worker took the next case
    verdict = json.loads((tmp_path / "reports" / "h" / row.report / "verdict.json").read_text())
    assert verdict["status"] == "timeout"
    assert "timeout 1" in r.out and "result: FAIL" in r.out


def test_case_timeout_needs_workers(capsys, tmp_path):
    err = _one_line_error(cli_main(["sweep", *TWO, "-j", "0", "--case-timeout", "5", "--root", str(tmp_path)]), capsys)
    assert "--case-timeout" in err and "-j 0" in err


def test_a_worker_that_keeps_dying_before_its_first_case_is_an_internal_error(tmp_path, monkeypatch):
    from remap_ab.errors import InternalError
    from remap_ab.processes import pool
    from remap_ab.subject import JudgeSettings
    from remap_ab.subjects.remap.grid import grid

    monkeypatch.setattr(pool, "STARTUP_RETRIES", 0)
    point = grid.load().points()[0]
    p = pool.Pool(pool.Job(JudgeSettings("old", "new", "no-such-device", str(tmp_path))), [{}], 60.0,
                  on_rows=lambda *a: None, on_lost=lambda *a: None)
    with pytest.raises(InternalError, match="keeps dying before its first case"):
        p.run(deque([[point]]))


# ------------------------------------------------------------------ grid files


GRID_HEAD = 'version = 1\n'
K_DIM = '[[dimension]]\nname = "k"\nfield = "topk"\nvalues = [128]\n'


@pytest.mark.parametrize("text, words", [
    ('version = "abc"\n' + K_DIM, "field 'version' is str 'abc', expected an integer"),
    (GRID_HEAD + '[[dimension]]\nname = "k"\nfield = "topk"\nvalues = 5\n', "dimension 'k' field 'values' is int 5, expected a list"),
    (GRID_HEAD + 'dimension = 5\n', "field 'dimension' is int 5, expected a list"),
    (GRID_HEAD + 'dimension = [5]\n', "field 'dimension[0]' is int 5, expected an object"),
    (GRID_HEAD + 'defaults = "x"\n' + K_DIM, "field 'defaults' is str 'x', expected an object"),
    (GRID_HEAD + '[defaults]\ndcp_size = 0\n' + K_DIM
     + '[[rotate]]\nname = "rank"\nover = ["k"]\nfield = "dcp_rank"\nvalues = [0, 1]\nmodulo = "dcp_size"\n',
     "rotate 'rank': `modulo` field dcp_size is 0"),
    (GRID_HEAD + '[[dimension]]\nname = "k"\nfield = "topk"\nvalues = ["abc"]\n', "topk='abc'"),
    (GRID_HEAD + '[[dimension]]\nname = "k"\nfield = "invalid_ratio"\nvalues = ["abc"]\n', "invalid_ratio"),
    (GRID_HEAD + '[[dimension]]\nname = 3\nvalues = [1]\n', "[[dimension]] #1 field 'name' is int 3, expected a string"),
    (GRID_HEAD + '[[dimension]]\nname = "k"\nfeild = "topk"\nvalues = [1]\n', "dimension 'k' field 'feild' is not a known field"),
    (GRID_HEAD + '[[dimension]]\nname = "k"\nfield = "topk"\nvalues = []\n', "field 'values' is list [], expected at least 1 item"),
    (GRID_HEAD + '[defaults]\ntokenz = 3\n' + K_DIM, "unknown default field(s) tokenz"),
])
def test_wrong_typed_grid_files_are_one_line_errors(tmp_path, capsys, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    for args in (["sweep", "--list", "--grid", str(path)],
                 ["sweep", "--grid", str(path), "-j", "0", "--root", str(tmp_path / "r"), "--no-progress"]):
        err = _one_line_error(cli_main(args), capsys)
        assert str(path) in err and words in err, err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


# ------------------------------------------------------------------ run.json


@pytest.mark.parametrize("field, value", [
    ("selected", "many"), ("filters", "k=128"), ("max_tokens", "3"), ("device", 5), ("a", None),
    ("grid_version", True), ("phase_seconds", {"gen": "x"}),
])
def test_wrong_typed_run_json_fields_are_one_line_errors(done_run, tmp_path, capsys, field, value):
    run = _copy(done_run, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta[field] = value
    (run / "run.json").write_text(json.dumps(meta))
    for args in (["report", str(run)], ["sweep", "--resume", "--run", "copy", "--root", str(tmp_path), "--no-progress"]):
        err = _one_line_error(cli_main(args), capsys)
        assert "run.json field '" + field in err and "the run folder is corrupt" in err  # the field, or its entry


def test_run_json_that_is_not_an_object(done_run, tmp_path, capsys):
    run = _copy(done_run, tmp_path)
    (run / "run.json").write_text("[1, 2]")
    assert "run.json is list [1, 2], expected an object" in _one_line_error(cli_main(["report", str(run)]), capsys)


# ------------------------------------------------------------------ --root


def test_root_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    err = _one_line_error(cli_main(["sweep", *TWO, "-j", "0", "--root", str(f), "--no-progress"]), capsys)
    assert "--root" in err and "is a file" in err
    err = _one_line_error(cli_main(["report", "--root", str(f)]), capsys)
    assert "--root" in err and "is a file" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_root_that_is_read_only(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        err = _one_line_error(cli_main(["sweep", *TWO, "-j", "0", "--root", str(ro), "--no-progress"]), capsys)
        assert "--root" in err and "not writable" in err
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------ progress


def test_progress_talks_to_a_log_at_least_every_heartbeat():
    from remap_ab.sweep.progress import Progress

    log = io.StringIO()
    p = Progress(100, stream=log, heartbeat=0.2)
    p.update(["pass"])  # 1%: the first tenth's line
    time.sleep(0.9)  # one slow case: nothing finishes, the log still hears from us
    p.close()
    lines = log.getvalue().splitlines()
    assert len(lines) >= 4, lines
    assert all("\r" not in line and "1/100" in line for line in lines)


def _true_seconds(lanes: int) -> float:
    return 0.05 + 2e-5 * lanes  # a per-case overhead plus a per-lane cost


def test_eta_prices_the_cases_left_by_their_size_not_their_count():
    from remap_ab.sweep.progress import CostModel

    small, big = 1 * 128, 1024 * 2048  # the grid's extremes: 16384x apart in lanes
    # Grid order runs the small ones first: a count-based ETA then thinks the big rest is cheap.
    sizes = [small] * 50 + [big] * 50 + [small, big] * 10
    now = [0.0]
    model = CostModel(clock=lambda: now[0])
    now[0] = 30.0  # start-up and compiles before the first result: excluded
    model.add(1, sizes[0])
    done_lanes = sizes[0]
    checked = 0
    for i, lanes in enumerate(sizes[1:], start=2):
        now[0] += _true_seconds(lanes)
        done_lanes += lanes
        model.add(i, done_lanes)
        left = sizes[i:]
        true_left = sum(_true_seconds(x) for x in left)
        if i >= 53 and left:  # a few big cases seen: the estimate must be right
            eta = model.remaining(len(left), sum(left))
            assert eta == pytest.approx(true_left, rel=0.02), (i, eta, true_left)
            checked += 1
        if i == 53:
            by_count = len(left) / model.rate()  # what a count-based ETA would say
            assert by_count < 0.2 * true_left  # ... 5x too optimistic, which is the bug
    assert checked == len(sizes) - 53
    a, b = model.coefficients()
    assert a == pytest.approx(0.05, rel=0.01) and b == pytest.approx(2e-5, rel=0.01)


def test_eta_with_cases_of_one_size_is_per_case():
    from remap_ab.sweep.progress import CostModel

    now = [0.0]
    model = CostModel(clock=lambda: now[0])
    model.add(1, 512)
    for i in range(2, 12):
        now[0] += 0.5
        model.add(i, 512 * i)
    assert model.remaining(10, 5120) == pytest.approx(5.0)
    assert model.rate() == pytest.approx(2.0)
    assert CostModel().remaining(3, 3) is None  # nothing to fit: no estimate, not zero


def test_progress_line_eta_follows_the_cost_of_what_is_left():
    from remap_ab.sweep import progress

    now = [0.0]
    costs = [100] * 10 + [10000] * 10
    p = progress.Progress(20, stream=io.StringIO(), heartbeat=3600, clock=lambda: now[0], costs=costs)
    for c in costs[:12]:
        now[0] += 0.01 + 1e-4 * c
        p.update(["pass"], [c])
    p.close()
    # 8 cases of 10000 lanes left at 1.01 s each: 8 s, not the 1.6 s a count at 5 cases/s says.
    assert "<00:08," in p.line() and "5.00case/s" in p.line(), p.line()


def test_progress_line_shows_the_recent_eta():
    from remap_ab.sweep import progress

    now = [0.0]
    p = progress.Progress(101, stream=io.StringIO(), heartbeat=3600, clock=lambda: now[0])
    now[0] = 60.0
    p.update(["pass"])
    for _ in range(10):
        now[0] += 1.0
        p.update(["pass"])
    p.close()
    assert "01:30" in p.line() and "1.00case/s" in p.line()  # 90 cases left at 1/s, not at 11/70 s


# ------------------------------------------------------------------ --list


def test_list_says_what_it_lists(capsys):
    assert cli_main(["sweep", "--list", "--device", "cpu"]) == 0  # the CPU runs the whole grid too
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1728 + CALLS and "every one the filters select (1728" in err and "runs on cpu" in err
    assert f"and {CALLS} rejection calls (rejections.toml)" in err
    assert cli_main(["sweep", "--list", "--device", "cpu", "--max-tokens", "3"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 576 + CALLS
    assert "what `sweep` runs on cpu" in err and "--max-tokens: tokens <= 3" in err and "--max-tokens 1024" in err


# ------------------------------------------------------------------ summary groupings


def test_failures_by_dimension_list_every_value_and_the_valid_lanes(tmp_path):
    from remap_ab.subjects.remap.grid import grid
    from remap_ab.subjects.remap.subject import COLUMNS
    from remap_ab.sweep.run_folder import result_columns, write_run_json
    from remap_ab.sweep.summary import format_summary, summarise

    g = grid.load()
    pts = g.select(grid.parse_filters(g, ["tokens=3", "k=512", "oor=off", "invalid=0", "path=convert,dcp-compact"]))
    assert len(pts) == 2
    write_run_json(tmp_path, {"run": "x", "a": "old", "b": "new", "device": "cpu", "filters": [], "max_tokens": 3,
                              "selected": 2})
    rows = []
    for p, status, valid in zip(pts, ["pass", "fail"], [7, 150]):
        row = {"index": p.index, "case_id": p.case_id, **dict(p.labels), **{f: "" for f in COLUMNS}}
        row.update(status=status, max_row_valid=valid)
        rows.append(row)
    pd.DataFrame(rows, columns=result_columns([a.name for a in g.axes], COLUMNS)).to_csv(tmp_path / "results.csv", index=False)
    s = summarise(tmp_path, g)
    by = s["failures_by_dimension"]
    assert by["valid lanes"] == {"0": [0, 0], "1-16": [0, 1], "17-100": [0, 0], "101-512": [1, 1], ">512": [0, 0]}
    assert list(by["path"]) == [v.label for v in g.dimensions[0].values] and by["path"]["dcp-compact"] == [1, 1]
    assert by["path"]["convert-counts"] == [0, 0]
    assert by["tokens"]["1024"] == [0, 0]
    text = format_summary(s)
    assert "valid lanes: 0 0/0, 1-16 0/1, 17-100 0/0, 101-512 1/1, >512 0/0" in text


def test_results_table_records_each_cases_valid_lanes(done_run):
    df = pd.read_csv(done_run / "results.csv")
    df = df[df.rejection.isna()].astype({"max_row_valid": int})  # a rejection call's row has none
    assert df.max_row_valid.dtype.kind == "i" and (df.max_row_valid > 0).all()  # invalid=0: every lane valid


# ------------------------------------------------------------------ memcheck


def test_memcheck_runs_every_case_through_its_device_check(monkeypatch):
    """CPU: each case through ``run_case(..., memcheck=True)``; GPU: the batch's A and B
    each replayed under compute-sanitizer in one child."""
    from remap_ab.sanitizer import compute as sanitizer
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.judge import batch, runner

    calls = []
    configs = [CaseConfig(tokens=1, topk=128), CaseConfig(tokens=1, topk=128, mode="dcp", dcp_size=2)]
    device = runtime.current()  # the session's device: the backend is fixed per process
    if device == "cuda":
        real_check = sanitizer.check_cases

        def check_spy(name, cases, inputs, *args, **kwargs):
            calls.append((name, [c.case_id for c in cases]))
            return real_check(name, cases, inputs, *args, **kwargs)

        monkeypatch.setattr(sanitizer, "check_cases", check_spy)
        want = [(impl, [c.case_id for c in configs]) for impl in ("old", "new")]
    else:
        real = runner.run_case

        def spy(config, a, b, **kwargs):
            calls.append((kwargs["memcheck"], kwargs["device"]))
            return real(config, a, b, **kwargs)

        monkeypatch.setattr(batch, "run_case", spy)
        want = [(True, device)] * 2
    outcomes = batch.run_batch(configs, "old", "new", device, memcheck=True)
    assert calls == want
    assert [o.verdict.status for o in outcomes] == ["pass", "pass"]
    assert all(any(line.startswith("memcheck old") and "clean" in line for line in o.verdict.info) for o in outcomes)
    assert all(o.inputs_sha256 and o.max_row_valid > 0 and o.result is None for o in outcomes)


def test_sweep_memcheck_end_to_end(tmp_path, capsys):
    assert cli_main(["sweep", *TWO, "--memcheck", "-j", "0", "--root", str(tmp_path), "--run", "m", "--no-progress"]) == 0
    assert json.loads((tmp_path / "m" / "run.json").read_text())["memcheck"] is True
    assert "memcheck: every case run had its loads and stores checked" in capsys.readouterr().out


# ------------------------------------------------------------------ one-way flow


def test_report_reads_the_run_without_the_sweep_and_the_batch_writes_no_report(done_run):
    code = (
        "import sys\n"
        "from remap_ab.cli import main\n"
        f"assert main(['report', {str(done_run)!r}]) == 0\n"
        "print(sorted(m for m in ('remap_ab.sweep.run', 'remap_ab.processes.pool', 'remap_ab.subjects.remap.judge.batch',"
        " 'remap_ab.sweep.progress', 'remap_ab.subjects.remap.report.recording') if m in sys.modules))\n"
        "import remap_ab.subjects.remap.judge.batch\n"
        "print(sorted(m for m in ('remap_ab.subjects.remap.report.report', 'remap_ab.subjects.remap.report.recording',"
        " 'remap_ab.sweep.run') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == ["[]", "[]"]
