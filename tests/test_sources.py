"""Implementations from a .py file and from REV:PATH in a git repository (sources.py,
vllm_shim.py): sweep, run, replay, the pytest plugin and git bisect on a temporary
repository holding a vLLM-style copy of the project's kernel, and the one-line errors.

The repository's history (tags):

    good      the kernel, with vLLM's import line ``from vllm.triton_utils import tl, triton``
    doc       a comment changed (still good)
    vllm-dep  imports vllm.platforms: does not load without vLLM (bisect: skip)
    undo      that import removed (good)
    broken    a global position off by one (the first bad commit)
    more      a comment changed (still bad)
    fixed     the bug fixed (good)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from remap_ab import runtime, sources
from remap_ab.cli import main as cli_main
from remap_ab.subjects.remap.grid import grid as gridmod
from remap_ab.subjects.remap.judge import registry
from remap_ab.subjects.remap.parts.mutants.generate import kernel_source

ROOT = Path(__file__).resolve().parent.parent
FILE = "vllm/v1/attention/backends/mla/sparse_utils.py"
# The machine's device: a pytest worker on a GPU machine runs its kernels on CUDA, and
# the backend is fixed once per process, so an in-process CPU run there is refused.
DEVICE = runtime.default_device()
SMALL = ["--tokens", "2", "--topk", "256", "--device", DEVICE]
BUG = ("val = base * BLOCK_SIZE + off\n", "val = base * BLOCK_SIZE + off + 1\n")
VLLM_IMPORT = "from vllm.triton_utils import tl, triton\n"


def vllm_style_source() -> str:
    """kernels_new's kernel file as vLLM ships it: one vLLM import, nothing else."""
    text = kernel_source("new")
    plain = "import triton\nimport triton.language as tl\n"
    assert plain in text
    return text.replace(plain, VLLM_IMPORT)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("vllm-like")
    git(repo, "init", "-q", "-b", "main")
    target = repo / FILE
    target.parent.mkdir(parents=True)
    good = vllm_style_source()
    assert BUG[0] in good
    steps = [
        ("good", good),
        ("doc", good.replace('"""Post-#50365', '"""The post-#50365', 1)),
        ("vllm-dep", good.replace(VLLM_IMPORT, VLLM_IMPORT + "from vllm.platforms import current_platform\n")),
        ("undo", good),
        ("broken", good.replace(*BUG)),
        ("more", good.replace(*BUG).replace("# §3.7", "# SPEC §3.7")),
        ("fixed", good),
    ]
    for tag, text in steps:
        target.write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", tag)
        git(repo, "tag", tag)
    return repo


@pytest.fixture(autouse=True)
def _no_repo_variable(monkeypatch):
    monkeypatch.delenv(sources.REPO_VARIABLE, raising=False)  # the CLI sets it; restored after each test


def commit(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", f"{rev}^{{commit}}").strip()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------- loading


def test_a_revision_loads_without_vllm_and_leaves_no_fake_vllm(repo):
    impl = registry.get(f"fixed:{FILE}", repo=str(repo))
    sha = commit(repo, "fixed")
    assert impl.name == f"fixed@{sha[:12]}:{FILE}"
    assert impl.source.kind == "git" and impl.source.commit == sha and impl.source.repo == str(repo)
    import hashlib

    assert impl.source.sha256 == hashlib.sha256((repo / FILE).read_bytes()).hexdigest()
    assert callable(impl.module.triton_convert_req_index_to_global_index)
    assert impl.module.triton.__name__ == "triton" and impl.module.tl.__name__ == "triton.language"
    assert not any(m == "vllm" or m.startswith("vllm.") for m in sys.modules)
    # The canonical name loads the same implementation; a bare commit id is named by it.
    assert registry.get(impl.name, repo=str(repo)) is impl
    assert registry.resolve(f"{sha}:{FILE}", repo=str(repo)) == f"{sha[:12]}:{FILE}"


def test_a_file_loads_as_its_own_module(tmp_path):
    path = tmp_path / "sparse_utils.py"
    path.write_text(vllm_style_source())
    impl = registry.get(str(path))
    assert impl.name == str(path.resolve()) and impl.source.kind == "file"
    assert impl.module.__name__.startswith("_remap_ab_impl_") and impl.module.__file__ == str(path.resolve())
    assert impl.module is not registry.get("new").module


# ----------------------------------------------------------------- run, sweep, replay


def test_run_passes_on_the_fixed_revision_and_fails_on_the_broken_one(repo, capsys):
    assert cli_main(["run", "--repo", str(repo), "--a", f"fixed:{FILE}", "--b", "new", *SMALL]) == 0
    out = capsys.readouterr().out
    assert f"A loaded: {FILE} at commit {commit(repo, 'fixed')} (fixed) of {repo}, sha256 " in out
    assert cli_main(["run", "--repo", str(repo), "--a", f"broken:{FILE}", "--b", "new", *SMALL]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"FAIL \[\w+\] broken@{commit(repo, 'broken')[:12]}:{FILE}", out)


def test_run_takes_a_file(repo, tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text(vllm_style_source().replace(*BUG))
    assert cli_main(["run", "--a", "new", "--b", str(broken), *SMALL]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"FAIL \[\w+\] {re.escape(str(broken))}", out) and f"B loaded: {broken}, sha256 " in out


def _sweep(repo, root, a, b, *extra) -> int:
    return cli_main(["sweep", "--repo", str(repo), "--a", a, "--b", b, "--root", str(root), "--no-progress",
                     "--filter", "path=convert-counts,dcp-compact", "--filter", "k=384", "--max-tokens", "1",
                     "--filter", "invalid=0.3", *extra])


def test_sweep_and_replay_of_two_revisions(repo, tmp_path, capsys, monkeypatch):
    # A branch that moves after the sweep: the replay must still read the commit swept.
    git(repo, "branch", "-f", "feature", "broken")
    assert _sweep(repo, tmp_path / "ok", f"undo:{FILE}", f"fixed:{FILE}", "-j", "1") == 0
    assert _sweep(repo, tmp_path / "bad", f"fixed:{FILE}", f"feature:{FILE}", "-j", "0") == 1
    out = capsys.readouterr().out
    sha = commit(repo, "broken")
    assert f"B loaded: {FILE} at commit {sha} (feature) of {repo}, sha256 " in out
    run = next((tmp_path / "bad").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["implementations"]["b"]["commit"] == sha
    assert json.loads((run / "run.json").read_text())["b"] == f"feature@{sha[:12]}:{FILE}"
    from remap_ab.report_cap import SLOTS_FOLDER

    reports = [p for p in sorted(run.iterdir()) if p.is_dir() and p.name != SLOTS_FOLDER]
    assert reports and not [p for p in reports if p.name.startswith(".")]  # every report written whole
    report = reports[0]
    meta = json.loads((report / "verdict.json").read_text())
    assert meta["b"]["source"]["commit"] == sha and meta["verdict"]["failures"][0]["impl"] == meta["b"]["name"]
    diff = (report / "diff.md").read_text()
    assert f"B loaded: {FILE} at commit {sha} (feature)" in diff
    script = (report / "replay.sh").read_text()
    assert f"--b feature@{sha}:{FILE}" in script and f"--repo {repo}" in script

    git(repo, "branch", "-f", "feature", "fixed")
    command = script.splitlines()[-1].replace(' "$@"', "").split()[1:]  # drop "remap-ab"
    from shlex import split

    argv = split(" ".join(command))
    monkeypatch.chdir(tmp_path)  # anywhere: the replay names its repository
    assert cli_main(argv) == 1
    out = capsys.readouterr().out
    assert "reproduced: yes" in out
    # Without the pins, replay reads what the report recorded too.
    assert cli_main(["replay", str(report)]) == 1
    assert "reproduced: yes" in capsys.readouterr().out


# ----------------------------------------------------------------- the one-line errors


def test_errors_are_one_line(repo, tmp_path, capsys):
    def error(*argv, status=2) -> str:
        assert cli_main(["run", "--repo", str(repo), *argv, *SMALL]) == status
        return one_error_line(capsys)

    missing = tmp_path / "nowhere" / "sparse_utils.py"
    assert "implementation file" in error("--a", str(missing)) and "does not exist" in error("--a", str(missing))
    line = error("--a", f"no-such-rev:{FILE}")
    assert "revision 'no-such-rev' does not exist in the git repository" in line
    line = error("--a", "good:vllm/no_such_file.py")
    assert "vllm/no_such_file.py does not exist at revision good (commit" in line
    line = error("--a", f"vllm-dep:{FILE}")
    at = git(repo, "show", f"vllm-dep:{FILE}").splitlines().index("from vllm.platforms import current_platform") + 1
    assert f"sparse_utils.py (line {at}) imports vllm.platforms, which needs vLLM itself" in line
    assert "install vLLM and use the dotted module path (--a/--b vllm.v1.attention.backends.mla.sparse_utils)" in line
    empty = tmp_path / "empty.py"
    empty.write_text("import torch\nx = 1\n")
    line = error("--a", str(empty))
    assert "lacks triton_convert_req_index_to_global_index, triton_filter_and_convert_dcp_index" in line
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def f(:\n")
    assert "does not parse (line 1" in error("--a", str(syntax))
    assert "is not inside a git repository" in error("--a", f"main:{FILE}", "--repo", str(tmp_path))


def test_bisect_statuses(repo, tmp_path, capsys):
    def status(*argv, keep=False) -> int:
        code = cli_main(["run", "--bisect", "--repo", str(repo), "--a", "new", *argv, *SMALL])
        if not keep:
            capsys.readouterr()
        return code

    assert status("--b", f"good:{FILE}") == 0
    assert status("--b", f"broken:{FILE}") == 1
    assert status("--b", f"vllm-dep:{FILE}", keep=True) == 125  # does not load at that revision: skip it
    assert one_error_line(capsys).endswith("(git bisect: skip this revision)")  # as git bisect run's log shows it
    assert status("--b", "good:no_such.py") == 125
    assert status("--b", f"no-such-rev:{FILE}") == 128  # a wrong revision is the user's: stop the bisect
    assert status("--b", f"good:{FILE}", "--block-n", "3") == 128  # bad input stops the bisect too
    assert cli_main(["run", "--bisect", "--no-such-option"]) == 128  # even argparse's


def test_git_bisect_run_finds_the_first_bad_commit(repo, tmp_path):
    # From doc (good) to more (bad), git runs the command in a process of its own twice:
    # at undo (exit 0: good) and at broken (exit 1: bad), each a torch import. The skip
    # status (125, vllm-dep) and the errors that stop a bisect are test_bisect_statuses'.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "bisect", "start", "more", "doc")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    test = [sys.executable, "-m", "remap_ab", "run", "--bisect", "--a", "new", "--b", f"HEAD:{FILE}", *SMALL]
    done = subprocess.run(["git", "-C", str(clone), "bisect", "run", *test], capture_output=True, text=True, env=env,
                          timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    first_bad = commit(repo, "broken")
    assert f"{first_bad} is the first bad commit" in log
    bisect_log = git(clone, "bisect", "log")
    assert f"# good: [{commit(repo, 'undo')}] undo" in bisect_log and f"# bad: [{first_bad}] broken" in bisect_log


# ----------------------------------------------------------------- the pytest plugin


def _plugin(repo, a: str, b: str, pytester, monkeypatch):
    """The property suite's convert test through the plugin, A and B from ``repo``: a
    pytest session in this process (pytester), 3 examples. The suite's modules are
    imported afresh for it (their Hypothesis settings are fixed at import, from the
    session's profile), and pytester drops them again afterwards: so Triton, whose C
    extension cannot be imported twice in one process, is imported before (kernels_new)."""
    registry.get("new")
    assert "triton._C.libtriton" in sys.modules
    monkeypatch.setenv("REMAP_AB_EXAMPLES", "3")
    monkeypatch.setenv("REMAP_AB_REPORT_DIR", str(pytester.path / "reports"))  # a failing example's report
    for name in [n for n in sys.modules if n.startswith("remap_ab.subjects.remap.parts.properties.")]:
        monkeypatch.delitem(sys.modules, name)
    return pytester.runpytest_inprocess(
        "-p", "remap_ab.pytest.plugin", "--pyargs", "remap_ab.subjects.remap.parts.properties", "-q", "-x",
        "-p", "no:cacheprovider", "-p", "no:xdist", "-k", "test_convert_wrapper_matches_oracle",
        "--remap-repo", str(repo), "--remap-a", a, "--remap-b", b)


def test_plugin_compares_two_revisions(repo, pytester, monkeypatch):
    ok = _plugin(repo, f"undo:{FILE}", f"fixed:{FILE}", pytester, monkeypatch)
    assert ok.ret == 0 and ok.parseoutcomes()["passed"] == 1, ok.stdout.str()[-2000:]
    bad = _plugin(repo, f"fixed:{FILE}", f"broken:{FILE}", pytester, monkeypatch)
    assert bad.ret == 1, bad.stdout.str()[-2000:]
    sha = commit(repo, "broken")
    out = bad.stdout.str()
    assert re.search(rf"FAIL: \[\w+\] broken@{sha[:12]}:{FILE}", out)
    assert re.search(rf"replay: remap-ab run --a \S+ --b broken@{sha}:{FILE} --repo {re.escape(str(repo))}", out)


def test_plugin_refuses_a_revision_that_does_not_exist(repo, pytester):
    # A usage error stops the session before any test runs: in this process (pytester).
    missing = pytester.runpytest_inprocess("-p", "remap_ab.pytest.plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           "--remap-repo", str(repo), "--remap-a", f"no-such-rev:{FILE}", "--remap-b",
                                           "new")
    assert missing.ret == 4 and "revision 'no-such-rev' does not exist" in missing.stderr.str()


# ----------------------------------------------------------------- the models grid


def test_models_grid_is_shipped_by_name(capsys):
    g = gridmod.load("models")
    assert set(gridmod.shipped()) >= {"pr", "models"}
    # 3987 of its own, and 22 holding the call envelope's values none of those holds (envelope.toml).
    own = [p for p in g.points() if p.label(gridmod.ENVELOPE_AXIS) == "-"]
    assert len(own) == 3987 and len(g.points()) == 4009 and len({p.config for p in g.points()}) == 4009
    assert len([p for p in own if p.config.tokens <= 1024]) == 3888  # the decode grid; prefill steps beyond
    pairs = {(p.config.topk, p.config.block_n) for p in g.points()}
    assert pairs == {(1024, 128), (1024, 1024), (2048, 128), (2048, 256), (2048, 1024), (2176, 128), (2051, 1),
                     (4096, 128), (4096, 1024)}
    assert {p.config.dcp_size for p in g.points() if p.config.is_dcp} == {2, 4, 8}
    assert [w.k for w in gridmod.model_widths()] == [1024, 2048, 2176, 2051, 4096]
    assert gridmod.load("pr") is not g and len(gridmod.load("pr").points()) == 1728
    assert cli_main(["sweep", "--list", "--grid", "models", "--filter", "topk=2176", "--max-tokens", "1"]) == 0
    out, err = capsys.readouterr()
    from remap_ab.subjects.remap.judge import rejections
    listed = out.splitlines()
    assert len([line for line in listed if "rejection=" not in line]) == 9 * 4 * 2
    # The rejection calls the filter keeps: rejections.toml's and the grid's 36 expected ones
    # whose base case is K = 2176.
    assert len(g.rejections()) == 36
    calls = [line for line in listed if "rejection=" in line]
    assert calls and all(":2176/" in line for line in calls) and len(calls) < len(rejections.load()) + 36
    assert cli_main(["sweep", "--list", "--grid", "nosuch"]) == 2
    assert "no shipped grid of that name" in one_error_line(capsys)


def test_models_grid_rejections_are_rejected_by_both_kernels():
    """Each declared rejection is a valid case whose call override both wrappers refuse
    (with the same exception type); the base case itself runs."""
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    rejections = gridmod.load("models").rejections()
    assert {dict(r.call)["BLOCK_N"] for r in rejections} == {128, 256, 1024}
    assert len({r.case_id for r in rejections}) == len(rejections) == 36
    for r in [r for r in rejections if r.labels[0][1] in ("convert-counts", "dcp-compact")]:
        config, block_n = r.config, dict(r.call)["BLOCK_N"]
        assert config.topk % block_n != 0
        kinds = []
        for name in ("old", "new"):
            module = registry.get(name).module  # fixes this process's backend
            inputs = generate_inputs(config, device=runtime.current())
            if config.block_n >= 128:  # the base case is accepted (at BLOCK_N = 1 a row is 2051 interpreted programs)
                _call(module, config, inputs, config.block_n)
            with pytest.raises(Exception) as caught:
                _call(module, config, inputs, block_n)
            kinds.append(type(caught.value))
        assert kinds[0] is kinds[1] is AssertionError


def test_models_grid_rejections_convert_to_rejection_cases():
    """The hand-over to rejections.py (SPEC §6 calls as data): each of the grid's
    rejections is the same base case and call there."""
    rejections = pytest.importorskip("remap_ab.subjects.remap.judge.rejections")
    found = gridmod.load("models").rejections()
    assert len({r.id for r in found}) == len(found)
    for r in found:
        case = rejections.rejection_from_fields(r.fields, id=r.id)
        assert case.base == r.config and dict(case.args) == dict(r.call)


def _call(module, config, x, block_n):
    """The SPEC §1 call of ``config`` with BLOCK_N replaced (what rejections.py will own)."""
    common = dict(BLOCK_SIZE=config.block_size, NUM_TOPK_TOKENS=config.topk, BLOCK_N=block_n,
                  return_valid_counts=config.counts)
    if config.mode == "convert":
        return module.triton_convert_req_index_to_global_index(
            x.req_id, x.block_table, x.token_indices, HAS_PREFILL_WORKSPACE=config.has_prefill,
            prefill_workspace_request_ids=x.prefill_request_ids, prefill_workspace_starts=x.prefill_starts, **common)
    return module.triton_filter_and_convert_dcp_index(
        x.req_id, x.block_table, x.token_indices, config.dcp_size, config.dcp_rank,
        cp_kv_cache_interleave_size=config.interleave, compact_valid_to_front=config.compact, **common)
