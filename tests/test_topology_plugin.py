"""``pytest --remap-grid --remap-subject topology``: the topology subject's grid cases as
pytest items, through the Subject protocol. Each session runs in this process
(pytester) on a two-case subset of the grid, on the CPU's interpreter: a correct B
passes, a seeded mutant of the fused kernel (mutants.toml) and a small broken module
fail their items, each message naming the case, the failing side and the replay line."""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from remap_ab import runtime
from remap_ab.subjects.topology import calls, grid, mutants, report

ROOT = Path(__file__).resolve().parents[1]
# 2 CPU cases: the mixed and the clustered learned rows of R=3, topk 8, S 2, L = S (every
# segment one token, so even the PR's uncovered-run bound holds and A and B pass both);
# rank_inclusive's witness is the clustered one.
GRID = ["--remap-grid", "--remap-subject=topology", "--remap-grid-filter=topk=8", "--remap-grid-filter=segments=2",
        "--remap-grid-filter=lens=equal"]
MUTANT = next(m for m in mutants.mutants() if m.id == "rank_inclusive")
WITNESS = MUTANT.witness_case

# B off by one in the last column of row 0 (the torch pair underneath): every case fails on B's side.
OFF_BY_ONE = """
from kernels_topology import torch_pair

def fused_topology_witness_merge(learned, context_lens, num_segments, learned_keep, max_replacements):
    out = torch_pair.fused_topology_witness_merge(learned, context_lens, num_segments, learned_keep, max_replacements)
    out = out.clone()
    out[0, -1] += 1
    return out
"""


@pytest.fixture(scope="module", autouse=True)
def _triton_imported():
    """B's module, and Triton with it, imported before any session: pytester puts
    sys.modules back after each, and Triton's compiled extension does not import twice.
    On the session's device: a GPU worker's backend is CUDA already, and fixed."""
    runtime.select(runtime.current())
    calls.resolve("b", "b")


def _run(pytester, *args: str):
    return pytester.runpytest_inprocess("-p", "remap_ab.pytest.plugin", "-p", "no:xdist", "-p", "no:cacheprovider",
                                        "-p", "no:randomly", *GRID, f"--remap-grid-reports={pytester.path / 'reports'}",
                                        f"--junitxml={pytester.path / 'grid.xml'}", *args)


def _failures(pytester) -> dict:
    """case ID -> the failure message of each failing item of the JUnit file."""
    root = ET.parse(pytester.path / "grid.xml").getroot()
    failures = {str(c.get("name")).split("[")[0]: c.find("failure") for c in root.iter("testcase")}
    return {case: failure.get("message") for case, failure in failures.items() if failure is not None}


def test_the_subset_is_the_witness_and_one_more():
    picked = [c for c in grid.cpu_cases() if (c.topk, c.segments, c.lens) == (8, 2, "equal")]
    assert len(picked) == 2 and WITNESS in picked


def test_a_correct_b_passes_every_item(pytester):
    r = _run(pytester)
    r.assert_outcomes(passed=2)
    assert "remap-ab grid: 2 topology cases of topology's grid.toml" in r.stdout.str()


def test_a_seeded_mutant_fails_its_witness_naming_the_case_side_and_replay(pytester, tmp_path):
    path = tmp_path / f"{MUTANT.module_name}.py"
    path.write_text(mutants.mutated_source(MUTANT))
    r = _run(pytester, f"--remap-b={path}")
    assert r.ret == 1
    failing = _failures(pytester)
    cid = report.case_id(WITNESS)
    assert cid in failing
    lines = failing[cid].splitlines()
    assert lines[0].startswith("FAIL [b-vs-oracle] B merged["), lines
    assert lines[1] == f"report: {pytester.path / 'reports' / cid / 'report.md'}"
    assert lines[2] == f"replay: {report.replay_command(WITNESS, 'a', str(path))}"
    assert lines[3].startswith(f"run it alone: pytest --remap-grid --remap-subject=topology --remap-a=a "
                               f"--remap-b={path} -k {cid}  (or: remap-ab sweep ")
    assert lines[3].endswith(f" --subject topology --filter case={cid} --reports all)")
    assert (pytester.path / "reports" / cid / "report.md").read_text().startswith(f"# topology case {cid}: FAIL")


def test_a_broken_module_fails_every_item_with_reports_capped_and_k_runs_one(pytester, broken_impl):
    b = broken_impl(OFF_BY_ONE)
    r = _run(pytester, f"--remap-b={b}", "--remap-grid-report-cases=1")
    r.assert_outcomes(failed=2)
    failing = _failures(pytester)
    assert len(failing) == 2
    for cid, message in failing.items():
        lines = message.splitlines()
        assert lines[0].startswith("FAIL [b-vs-oracle] B merged[0, 7]: B "), lines
        assert any(line.startswith("replay: ") and " remap-ab replay --subject topology '" in line and line.endswith(f" --b {b}")
                   for line in lines)
        assert lines[-1].startswith(f"run it alone: pytest --remap-grid --remap-subject=topology --remap-a=a "
                                    f"--remap-b={b} -k {cid}")
    # One report folder for the failure class (the check): the other case says how to get its own.
    folders = {p.name for p in (pytester.path / "reports").iterdir() if not p.name.startswith(".")}
    assert len(folders) == 1 and folders < set(failing)
    told = [m for m in failing.values() if "\nno report folder: the first 1 failing cases" in m]
    assert len(told) == 1
    one = sorted(failing)[0]
    again = _run(pytester, f"--remap-b={b}", "-k", one)
    again.assert_outcomes(failed=1)
    assert set(_failures(pytester)) == {one}


@pytest.mark.parametrize(("args", "message"), [
    (["--remap-grid-filter=nope=1"], "ERROR: --remap-grid: --filter 'nope=1': the topology grid has no axis 'nope'"),
    (["--remap-b=no_such_topology_module"], "--b no_such_topology_module: cannot import it"),
    (["--remap-subject=nonesuch"], "--remap-subject 'nonesuch': no such subject"),
])
def test_bad_input_is_a_usage_error(pytester, args, message):
    r = _run(pytester, *args)
    assert r.ret == 4
    assert message in r.stderr.str()


def test_the_plugin_imports_no_module_of_the_remap():
    # What is the remap's reaches the plugin through its SUBJECT (and its pytest_hooks).
    for path in sorted((ROOT / "remap_ab" / "pytest").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if isinstance(node, ast.ImportFrom) and node.module == "remap_ab.subjects":
                names = [f"remap_ab.subjects.{a.name}" for a in node.names]
            assert not any(n.startswith("remap_ab.subjects.remap") for n in names), f"{path.name}:{node.lineno}"
