"""What the commands say, word for word: an error verdict, the run command's lines and
report folder, a finished run's summary, unsplit --memcheck phases, help texts, and a
listing whose reader left early."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from remap_ab import runtime
from remap_ab.cli import build_parser
from remap_ab.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]

RAISER = """
def triton_convert_req_index_to_global_index(*a, **k):
    raise RuntimeError("boom")

def triton_filter_and_convert_dcp_index(*a, **k):
    raise RuntimeError("boom")
"""
COUNT_OFF = """
import kernels_new as _k

def _bump(r):
    out, counts = r
    counts = counts.clone()
    counts[-1] += 1
    return out, counts

def triton_convert_req_index_to_global_index(*a, **k):
    return _bump(_k.triton_convert_req_index_to_global_index(*a, **k))

def triton_filter_and_convert_dcp_index(*a, **k):
    return _bump(_k.triton_filter_and_convert_dcp_index(*a, **k))
"""


@pytest.fixture
def mods(tmp_path, monkeypatch):
    folder = tmp_path / "mods"
    folder.mkdir()
    (folder / "raiser_msg.py").write_text(RAISER)
    (folder / "countoff_msg.py").write_text(COUNT_OFF)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _env(*extra: Path) -> dict:
    """This process's environment with ``extra`` and this checkout first on PYTHONPATH
    (the caller's entries kept behind them: they may hold the installed packages)."""
    entries = (*map(str, extra), str(REPO), os.environ.get("PYTHONPATH", ""))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(e for e in entries if e))


def _cpu(capsys, args: list, *extra: Path) -> tuple[int, list]:
    """``remap-ab ARGS`` (--device cpu) -> (rc, stdout lines). In this process where its
    Triton backend is the CPU's already (no GPU: ``extra`` is on sys.path, the ``mods``
    fixture put it there); on a machine with a GPU in a process of its own, with ``extra``
    on its PYTHONPATH: --device cpu fixes a process's backend, which this one has fixed on cuda."""
    if runtime.default_device() == "cpu":
        capsys.readouterr()
        rc = cli_main(args)
        out, err = capsys.readouterr()
    else:
        r = subprocess.run([sys.executable, "-m", "remap_ab", *args], cwd=REPO, env=_env(*extra), capture_output=True,
                           text=True, timeout=300)
        rc, out, err = r.returncode, r.stdout, r.stderr
    assert "Traceback" not in err, err
    return rc, out.splitlines()


def test_an_error_verdict_says_what_was_raised_and_where_and_nothing_of_rows_lanes_or_order(mods, capsys):
    rc, lines = _cpu(capsys, ["run", "--b", "raiser_msg", "--tokens", "2", "--device", "cpu"], mods)
    assert rc == 1, lines
    assert lines[0] == "case 5c4f80ea0755  (old vs raiser_msg, oracle checked, on cpu)"
    sha = next(n for n, line in enumerate(lines) if line.startswith("  inputs sha256"))
    assert re.fullmatch(r"  inputs sha256 \(first 16 hex digits\): req_id=[0-9a-f]{16}, block_table=[0-9a-f]{16}, "
                        r"token_indices=[0-9a-f]{16}", lines[sha]), lines[sha]
    assert re.fullmatch(r"       old: \d+\.\d ms; order: 16 tiles of 128, atomic slot order", lines[sha + 1]), lines
    assert lines[sha + 2] == "  raiser_msg: raised in triton_filter_and_convert_dcp_index"  # no time, no order
    assert lines[sha + 3:] == [
        "case 5c4f80ea0755: ERROR",
        "  ERROR [error] raiser_msg raised RuntimeError: boom",
        f"run again: PYTHONPATH={mods}${{PYTHONPATH:+:$PYTHONPATH}} remap-ab run --a old --b raiser_msg --tokens 2 "
        "--device cpu",
    ]


def test_run_report_writes_the_folder_of_a_failing_case_and_prints_its_replay(mods, tmp_path, capsys):
    out_dir = tmp_path / "rep"
    rc, lines = _cpu(capsys, ["run", "--b", "countoff_msg", "--tokens", "3", "--device", "cpu", "--report", str(out_dir)], mods)
    assert rc == 1, lines
    case = "3f36bca5787e"
    folder = out_dir / case
    assert lines[-5:] == [
        "case 3f36bca5787e: FAIL",
        "  FAIL [counts] countoff_msg: valid count differs from the oracle at row 2 (old=354, countoff_msg=355, "
        "oracle=354); 1 row whose count differs",
        f"report: {folder / 'diff.html'}",
        f"replay: PYTHONPATH={mods}${{PYTHONPATH:+:$PYTHONPATH}} remap-ab replay {folder.resolve()}",
        f"run again: PYTHONPATH={mods}${{PYTHONPATH:+:$PYTHONPATH}} remap-ab run --a old --b countoff_msg "
        "--tokens 3 --device cpu",
    ]
    for name in ("diff.html", "diff.md", "rows.pt.gz", "replay.sh", "verdict.json", "config.json"):
        assert (folder / name).is_file(), name
    md = (folder / "diff.md").read_text()
    assert "1 row whose count differs" in md and "lane in" not in md
    # A passing case writes nothing, and says so.
    rc, out = _cpu(capsys, ["run", "--tokens", "1", "--topk", "128", "--device", "cpu", "--report", str(tmp_path / "none")])
    assert rc == 0, out
    assert out[-2:] == ["report: none written (the case passed)",
                        "run again: remap-ab run --a old --b new --tokens 1 --topk 128 --device cpu"]
    assert list((tmp_path / "none").iterdir()) == []


def test_a_finished_run_has_no_running_entry_and_unsplit_memcheck_phases_say_so(tmp_path, capsys):
    root = tmp_path / "runs"
    argv = ["sweep", "--filter", "path=convert", "--filter", "k=128", "--filter", "tokens=1", "--filter", "invalid=0",
            "--filter", "oor=off", "-j", "0", "--device", "cpu", "--root", str(root), "--no-progress"]
    rc, lines = _cpu(capsys, [*argv, "--run", "plain"])
    assert rc == 0, lines
    assert json.loads((root / "plain" / "summary.json").read_text())["running"] == ""
    out = "\n".join(lines) + "\n"
    assert re.search(r"; phases summed over workers: gen \d+\.\d\d s, kernels \d+\.\d\d s, compare \d+\.\d\d s, "
                     r"write \d+\.\d\d s\n", out), out
    rc, lines = _cpu(capsys, [*argv, "--run", "checked", "--memcheck"])
    assert rc == 0, lines
    out = "\n".join(lines) + "\n"
    assert json.loads((root / "checked" / "summary.json").read_text())["running"] == ""
    assert re.search(r"; phases not split \(--memcheck on the CPU times each case whole\): \d+\.\d\d s of case time "
                     r"summed over workers\n", out), out
    assert "0.00 s" not in out.split("time:")[1].split("\n")[0]


def _helps(wrapped: bool = False) -> dict:
    """Each command's --help as one line (``wrapped``: only argparse's line breaks joined)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    choices: dict = sub.choices  # type: ignore[assignment]  # a subparsers action's choices map names to parsers
    if wrapped:
        return {name: re.sub(r"\n\s*", " ", p.format_help()) for name, p in choices.items()}
    return {name: " ".join(p.format_help().split()) for name, p in choices.items()}


def test_help_texts_say_what_the_options_do():
    helps = _helps()
    assert ("no vLLM needed) (default the subject's: old for the remap, a for topology; with --resume, the run's own)"
            in helps["sweep"])
    assert "--b IMPL implementation B (default the subject's: new, or b; with --resume, the run's own)" in helps["sweep"]
    assert "--max-tokens MAX_TOKENS largest T drawn (default 16384 on GPU, 16384 on CPU)" in helps["soak"]
    assert "--root DIR folder holding the nondet/ artifacts, beside the sweep's runs (default reports)" in helps["nondet"]
    assert "(default the report's A; without a report the subject's: old for the remap, a for topology)" in helps["replay"]
    assert "130 stopped by SIGINT, 143 by SIGTERM" in helps["sweep"]
    for name, text in _helps(wrapped=True).items():  # the class: no word written twice in a row
        # (an option or METAVAR before its help may be; a table's columns are apart by several spaces)
        doubled = re.search(r"(?<![-\w])([a-z]+) \1\b", text)
        assert doubled is None, f"{name} --help: {doubled.group(0) if doubled else ''!r}"


def test_soak_help_default_is_the_cap_the_soak_uses():
    from remap_ab.subjects.remap.parts import soak

    assert f"(default {soak.GPU_MAX_TOKENS} on GPU, {soak.CPU_MAX_TOKENS} on CPU)" in _helps()["soak"]


def test_resume_refuses_a_device_it_would_ignore(tmp_path, capsys):
    assert cli_main(["sweep", "--resume", "--device", "cpu", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("remap-ab sweep: error: --resume continues a run with its own settings; "
                                       "drop --a/--b/--subject/--device/--filter/--max-tokens/--grid/--memcheck/--reports\n")


def test_list_whose_reader_leaves_exits_141_quietly():
    env = _env()
    p = subprocess.Popen([sys.executable, "-m", "remap_ab", "sweep", "--list"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()  # as `| head -1` does: one line, then gone
    p.stdout.close()
    assert p.wait(timeout=120) == 141
    assert first.startswith(b"4a4bd9116017  path=convert k=128 tokens=1")
    assert p.stderr.read() == b""
