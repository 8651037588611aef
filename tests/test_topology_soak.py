"""remap-ab soak --subject topology: the generic soak driver (remap_ab/soak/) running the
topology subject's draws (remap_ab/subjects/topology/soak.py). The draws cover issue 42's
domains and are seeded; a short soak judges its cases; every seeded mutant the
interpreter can show is found by a short soak, with a replay line that reproduces it;
the driver imports no subject."""

from __future__ import annotations

import ast
import itertools
import json
import os
import runpy
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from remap_ab import cli, options, runtime
from remap_ab.soak import run as engine
from remap_ab.subject import JudgeSettings, SoakSettings, soak_random
from remap_ab.subjects.topology import calls, mutants
from remap_ab.subjects.topology import soak as topology_soak
from remap_ab.subjects.topology.config import INT32_MAX, LEARNED_PATTERNS, LENS_PATTERNS

REPO = Path(__file__).resolve().parents[1]
SOAK_PACKAGE = REPO / "remap_ab" / "soak"
# Rows bounded in-process: the test session's device may be a GPU (prefill sizes by default).
ROWS = "16"
# The soak part's options by name -> their flags, as commands/soak.py hands them over.
FLAGS = {"max_size": "--max-tokens", "max_topk": "--max-topk"}


def _plan(device: str, **options):
    return topology_soak.plan(SoakSettings(device, "a", "b", 1, options=options, flags=FLAGS))


def _take(device: str, seed: int, n: int, **options) -> list:
    return list(itertools.islice(_plan(device, **options).draws(soak_random(seed, 0)), n))


def test_the_draws_cover_issue_42s_domains():
    gpu = [d.config for d in _take("cuda", 0, 3000)]
    assert min(c.rows for c in gpu) == 1 and max(c.rows for c in gpu) == 16384  # prefill sizes on a GPU
    assert {1, 2048, 2176} <= {c.topk for c in gpu} and max(c.topk for c in gpu) == 2176
    assert len({c.topk for c in gpu}) > 200  # widths the grid never runs
    assert {c.segments for c in gpu} == set(range(1, 65))
    assert {c.lens for c in gpu} == set(LENS_PATTERNS)  # 0, 1, below, equal, above, far above, mixed
    assert {c.learned for c in gpu} == set(LEARNED_PATTERNS)  # padding, duplicates, entries >= L, ...
    assert any(c.keep == 0 for c in gpu) and any(c.keep == c.topk for c in gpu)
    assert any(c.keep == c.topk - 1 > 0 for c in gpu)
    budgets = Counter("0" if c.budget == 0 else "S" if c.budget == c.segments else "room" if c.budget == c.topk - c.keep
                      else "other" for c in gpu)
    assert min(budgets.values()) > 50, budgets
    assert any(c.max_replacements == INT32_MAX for c in gpu)
    # The CPU interpreter: rows capped (fewer at the model widths), the size cap lifts the cap.
    cpu = [d.config for d in _take("cpu", 0, 1000)]
    assert max(c.rows for c in cpu) == 64 and max(c.rows for c in cpu if c.topk >= 1024) <= 4
    assert {2048, 2176} <= {c.topk for c in cpu}
    assert max(c.rows for c in (d.config for d in _take("cpu", 0, 500, max_size=300))) > 64


def test_the_same_seed_draws_the_same_cases_in_the_same_order(tmp_path):
    first = [d.case_id for d in _take("cpu", 7, 50)]
    assert first == [d.case_id for d in _take("cpu", 7, 50)]
    assert first != [d.case_id for d in _take("cpu", 8, 50)]
    assert len(set(first)) == 50
    # Through the driver's worker: the cases it judges are the stream's first ones, in order
    # (the stream is seeded, as above, so one run pins the worker's order). Rows capped at 4:
    # the order, not the size, is what is checked.
    plan = engine.WorkerPlan(worker=0, settings=JudgeSettings("a", "b", runtime.current(), str(tmp_path)), seed=7,
                             deadline=float("inf"), max_cases=5, subject="topology")
    records: list = []
    engine.run_worker(plan, _plan(runtime.current(), max_size=4), records.append, lambda: False)
    assert [r.case_id for r in records] == [d.case_id for d in _take(runtime.current(), 7, 5, max_size=4)]


def _soak(tmp_path, *extra) -> int:
    return cli.main(["soak", "--subject", "topology", "--minutes", "5", "--device", runtime.current(),
                     "--max-tokens", ROWS, "--root", str(tmp_path / "root"), *extra])


def _soak_json(tmp_path) -> dict:
    (found,) = (tmp_path / "root" / "soak").glob("*/soak.json")
    return json.loads(found.read_text())


def test_a_short_soak_judges_its_cases_and_a_and_b_agree_with_the_oracle(tmp_path, capsys):
    code = _soak(tmp_path, "--seed", "1", "--max-cases", "8")
    out = capsys.readouterr().out
    data = _soak_json(tmp_path)
    assert data["subject"] == "topology" and data["cases"] == 8
    assert sum(data["statuses"].values()) == 8 and sum(data["distribution"]["lens"].values()) == 8
    # Whatever fails is a property the PR states and A and B share, never A or B against the oracle.
    assert not {"a-vs-oracle", "b-vs-oracle", "a-vs-b", "error", "crash"} & set(data["failures_by_check"]), data
    assert code == (1 if data["failures"] else 0)
    assert "repeat with: remap-ab soak --a a --b b" in out and "--subject topology" in out
    # The size cap is repeated under the flag the soak part declared (options.MAX_SIZE's).
    assert f"--subject topology {options.MAX_SIZE.flag} {ROWS}" in out
    assert "8 cases judged" in out and "cases/s" in out


@pytest.fixture(scope="module")
def mutant_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("topology_mutants")
    for m in mutants.mutants():
        (folder / f"{m.module_name}.py").write_text(mutants.mutated_source(m))
    return folder


@pytest.fixture(autouse=True)
def _mutants_from_this_folder():
    """Another test of this process may have loaded a mutant module of the same name
    from its own folder: each test here imports them from ``mutant_folder``."""
    for m in mutants.mutants():
        calls.forget(m.module_name)
    yield
    for m in mutants.mutants():
        calls.forget(m.module_name)


# One mutant through the whole soak (the cheapest to find); every mutant's witness is
# judged in test_topology_mutants.py, and docs/soak-bench-resources.md has the soak's
# figure for each of them.
def test_a_short_soak_finds_a_broken_b_and_prints_its_replay_line(mutant_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(mutant_folder))
    name = "topology_mutant_int32_shift"
    assert _soak(tmp_path, "--seed", "3", "--max-cases", "5", "--b", name) == 1
    data = _soak_json(tmp_path)
    assert data["failures_by_check"].get("b-vs-oracle", 0) >= 1, data["failures_by_check"]
    found = [f for f in data["failures"] if f["check"] == "b-vs-oracle"]
    # The replay line names B and the folder it is imported from.
    assert all(f["replay"].startswith(f"PYTHONPATH={mutant_folder}$") and f"--b {name}" in f["replay"]
               for f in found)
    assert f"replay: {found[0]['replay']}" in capsys.readouterr().out


def test_the_replay_line_of_a_found_mutant_reproduces_it(mutant_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(mutant_folder))
    assert _soak(tmp_path, "--seed", "3", "--max-cases", "1", "--b", "topology_mutant_rank_inclusive") == 1
    (failure,) = _soak_json(tmp_path)["failures"]
    assert failure["check"] == "b-vs-oracle"
    # The line says `python`: this interpreter's, as a person in this environment would have it.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
               PATH=os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", ""))))
    replay = subprocess.run(failure["replay"], shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert replay.returncode == 1, replay
    assert "MISMATCH b: merged" in replay.stdout, replay
    # The rest is about the case, not the process: run in this one, from the line's own words
    # (each subprocess here would be a torch import).
    words = shlex.split(failure["replay"])
    assert words[0].startswith(f"PYTHONPATH={mutant_folder}") and words[1:4] == ["remap-ab", "replay", "--subject"]
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    # The same case through the real B: no mismatch with the oracle.
    real_words = [w for w in words[2:] if w not in ("--b", "topology_mutant_rank_inclusive")]
    assert len(real_words) == len(words) - 4
    code = cli.main(real_words)
    out = capsys.readouterr().out
    assert out.startswith("case ") and "MISMATCH" not in out and code in (0, 1), out
    # The old form is an alias of the same replay: ``python -m remap_ab.subjects.topology ARGS``.
    alias_args = words[words.index("topology") + 1:]
    monkeypatch.setattr(sys, "argv", ["remap_ab.subjects.topology", *alias_args])
    # Run afresh as ``-m`` runs it, whether or not another test has imported it.
    monkeypatch.delitem(sys.modules, "remap_ab.subjects.topology.__main__", raising=False)
    with pytest.raises(SystemExit) as alias:
        runpy.run_module("remap_ab.subjects.topology", run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    assert alias.value.code == 1 and "MISMATCH b: merged" in out, out


def test_the_cli_soaks_the_topology_in_a_process_of_its_own(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-m", "remap_ab", "soak", "--subject", "topology", "--minutes", "1",
                           "--max-cases", "3", "--seed", "2", "--device", "cpu", "--root", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc
    assert proc.stdout.startswith("soak a vs b for 1 min, seed 2: CPU (the Triton interpreter)")
    assert "3 cases judged" in proc.stdout and "Traceback" not in proc.stderr


def test_a_subject_without_a_soak_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "tests"))
    code = cli.main(["soak", "--subject", "sums_subject:SUBJECT", "--minutes", "1", "--device", runtime.current(),
                     "--root", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "has no soak" in err and "Traceback" not in err


def subject_imports(source: str) -> list[str]:
    """The modules of a subject package (``remap_ab.subjects.NAME...``) ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [n for n in names if n.startswith("remap_ab.subjects.")]
        if isinstance(node, ast.ImportFrom) and node.module == "remap_ab.subjects":
            found += [f"remap_ab.subjects.{a.name}" for a in node.names]
    return found


def test_the_soak_driver_imports_no_subject():
    sources = {p.name: p.read_text() for p in SOAK_PACKAGE.glob("*.py")}
    assert {"run.py", "session.py"} <= set(sources)
    assert {name: subject_imports(text) for name, text in sources.items() if subject_imports(text)} == {}
    # Nor does it name one in a string (a "module:function" to import later).
    assert not [name for name, text in sources.items() if "subjects.remap" in text or "subjects.topology" in text]
    # The scan sees an import of a subject, in each form.
    assert subject_imports("from remap_ab.subjects.remap import soak\nimport remap_ab.subjects.topology.grid\n"
                           "from remap_ab.subjects import remap\n") == [
        "remap_ab.subjects.remap", "remap_ab.subjects.topology.grid", "remap_ab.subjects.remap"]
