"""vLLM's real wrapper shapes (issue 40), each a stand-in module under tests/impls/shapes/
with exactly that shape's signatures and kernels_main's values, judged against the #50365
file (kernels_new) per parameter × wrapper (remap_ab/subjects/remap/judge/features.py):

    (a) vLLM main 02a26fa06df2: BLOCK_STRIDE_ROWS on convert only
    (b) DCP takes BLOCK_STRIDE_ROWS too
    (c) convert takes BLOCK_STRIDE_ROWS, out=, valid_counts_out=
    (d) DCP takes out= and valid_counts=; convert takes output= with valid_counts_out=
    (e) convert folds DCP in (dcp_size, dcp_rank, cp_kv_cache_interleave_size,
        prefill_workspace_rank_stride: no meaning in SPEC, so "not exercised")

Each is loaded as a .py file and as REV:PATH from a temporary git repository. Each
shows its parameters exercised, and a copy that drops one parameter on one wrapper
that takes it fails, with a line naming the parameter and the wrapper.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git

from remap_ab import runtime, sources
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.grid import grid
from remap_ab.subjects.remap.judge import features, registry
from remap_ab.subjects.remap.judge.batch import run_batch
from remap_ab.subjects.remap.parts.mutants.generate import kernel_source

ROOT = Path(__file__).resolve().parent.parent
SHAPES_DIR = ROOT / "tests" / "impls" / "shapes"
FILE = "vllm/v1/attention/backends/mla/sparse_utils.py"
SHAPES = {"a": "a_main.py", "b": "b_dcp_stride.py", "c": "c_index_group.py", "d": "d_named_buffers.py",
          "e": "e_folded_dcp.py"}
CV, DCP = features.CONVERT, features.DCP

# Small calls of both wrappers passing each optional parameter (tokens 2, K 128 / 384:
# the single tile and the tiled path), a dense stride (the value its absence means) and
# the DCP wrapper at dcp_size 1 (which delegates to convert).
CASES = (
    CaseConfig(mode="convert", tokens=2, topk=128, counts=True, block_stride=4096),
    CaseConfig(mode="convert", tokens=2, topk=384, block_size=256, blocks_per_req=4, block_stride=320),
    CaseConfig(mode="convert", tokens=2, topk=128, counts=True, block_stride=64),
    CaseConfig(mode="convert", tokens=2, topk=384, counts=True, out_buffers=True),
    CaseConfig(mode="convert", tokens=1, topk=128, counts=False, out_buffers=True),
    CaseConfig(mode="dcp", tokens=2, topk=384, counts=True, dcp_size=2, dcp_rank=1, block_stride=4096),
    CaseConfig(mode="dcp", tokens=2, topk=128, counts=True, dcp_size=1, block_stride=4096),
    CaseConfig(mode="dcp", tokens=2, topk=128, counts=True, dcp_size=2, dcp_rank=0, block_stride=64),
    CaseConfig(mode="dcp", tokens=2, topk=128, counts=True, dcp_size=2, dcp_rank=0, out_buffers=True),
    CaseConfig(mode="dcp", tokens=2, topk=384, counts=True, dcp_size=4, dcp_rank=3, interleave=8, compact=False,
               out_buffers=True),
    CaseConfig(mode="dcp", tokens=2, topk=128, counts=True, dcp_size=1, out_buffers=True),
    CaseConfig(mode="dcp", tokens=2, topk=128, counts=False, dcp_size=2, dcp_rank=1, out_buffers=True),
)

# Who takes each parameter on each wrapper (A is kernels_new: nothing), as data.
B = "B only"
NO = "neither"
TAKES = {
    "a": {("BLOCK_STRIDE_ROWS", CV): B},
    "b": {("BLOCK_STRIDE_ROWS", CV): B, ("BLOCK_STRIDE_ROWS", DCP): B},
    "c": {("BLOCK_STRIDE_ROWS", CV): B, ("out", CV): B, ("valid_counts_out", CV): B},
    "d": {("BLOCK_STRIDE_ROWS", CV): B, ("out", CV): B, ("valid_counts_out", CV): B, ("out", DCP): B,
          ("valid_counts_out", DCP): B},
    "e": {("BLOCK_STRIDE_ROWS", CV): B},
}
KEYWORDS = {("d", "out", CV): "output", ("d", "valid_counts_out", DCP): "valid_counts"}
UNKNOWN = {"e": ("dcp_size", "dcp_rank", "cp_kv_cache_interleave_size", "prefill_workspace_rank_stride")}

# The copies: (shape, parameter, wrapper, the line of the stand-in that hands it on, what
# the copy has there instead). The line is looked for in that wrapper's function only.
DROPS = (
    ("a", "BLOCK_STRIDE_ROWS", CV, "BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS if BLOCK_STRIDE_ROWS is not None else BLOCK_SIZE,",
     "BLOCK_STRIDE_ROWS=BLOCK_SIZE,"),
    ("b", "BLOCK_STRIDE_ROWS", DCP, "BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS,", "BLOCK_STRIDE_ROWS=None,"),
    ("c", "out", CV, "out=out,", "out=None,"),
    ("c", "valid_counts_out", CV, "valid_counts_out=valid_counts_out,", "valid_counts_out=None,"),
    ("d", "out", CV, "out=output,", "out=None,"),
    ("d", "valid_counts_out", DCP, "given = valid_counts if return_valid_counts else None", "given = None"),
    ("e", "BLOCK_STRIDE_ROWS", CV, "BLOCK_STRIDE_ROWS=BLOCK_STRIDE_ROWS,", "BLOCK_STRIDE_ROWS=None,"),
)


def dropped_source(shape: str, function: str, old: str, new: str) -> str:
    """The stand-in with ``old`` replaced in ``function``'s body (exactly once there)."""
    text = (SHAPES_DIR / SHAPES[shape]).read_text()
    head, sep, dcp = text.partition(f"def {DCP}(")
    part = head if function == CV else dcp
    assert part.count(old) == 1, f"{SHAPES[shape]}: {old!r} must appear once in {function}: update DROPS"
    part = part.replace(old, new)
    return part + sep + dcp if function == CV else head + sep + part


def drop_id(drop) -> str:
    shape, name, function = drop[:3]
    return f"{shape}-{name}-{features.WRAPPER[function]}"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A git repository whose FILE is the #50365 file (tag base), then each shape (tag
    shape-X), then each dropped-parameter copy (tag drop-...)."""
    repo = tmp_path_factory.mktemp("vllm-shapes")
    git(repo, "init", "-q", "-b", "main")
    target = repo / FILE
    target.parent.mkdir(parents=True)
    steps = [("base", kernel_source("new"))]
    steps += [(f"shape-{s}", (SHAPES_DIR / f).read_text()) for s, f in SHAPES.items()]
    steps += [(f"drop-{drop_id(d)}", dropped_source(d[0], d[2], d[3], d[4])) for d in DROPS]
    for tag, text in steps:
        target.write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", tag)
        git(repo, "tag", tag)
    return repo


@pytest.fixture
def at_repo(repo, monkeypatch):
    monkeypatch.setenv(sources.REPO_VARIABLE, str(repo))
    return repo


def load(how: str, shape: str, tmp_path, drop=None) -> str:
    """The implementation's canonical name: the stand-in (or its copy) as a .py file or
    as REV:PATH (the repository from ``at_repo``)."""
    if how == "rev":
        name = f"{'drop-' + drop_id(drop) if drop else 'shape-' + shape}:{FILE}"
    elif drop:
        path = tmp_path / f"{drop_id(drop)}.py"
        path.write_text(dropped_source(drop[0], drop[2], drop[3], drop[4]))
        name = str(path)
    else:
        name = str(SHAPES_DIR / SHAPES[shape])
    impl = registry.get(name)
    assert impl.source is not None and impl.source.kind == ("git" if how == "rev" else "file")
    return impl.name


def expected_lines(shape: str) -> list[str]:
    """The per-parameter × wrapper lines this shape must give against kernels_new on CASES."""
    want = []
    for f in features.FEATURES:
        for fn in f.functions:
            w = features.WRAPPER[fn]
            kw = KEYWORDS.get((shape, f.name, fn))
            head = f"feature {f.name} on {w}" + (f" (B's keyword: {kw})" if kw else "") + ", "
            who = TAKES[shape].get((f.name, fn), NO)
            want.append(head + ("B only: " if who == B else f"neither A's nor B's {w} wrapper takes it: "))
    for name in UNKNOWN.get(shape, ()):
        want.append(f"not exercised: {name} on convert (B's {CV} takes it;")
    return want


def runnable_outcomes(a: str, b: str) -> tuple[features.Plan, list]:
    plan = registry.feature_plan(a, b)
    configs = [c for c in CASES if plan.runnable(c)]
    return plan, run_batch(configs, a, b, runtime.current())


@pytest.mark.parametrize("how", ["file", "rev"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_is_judged_per_wrapper_and_passes(shape, how, tmp_path, at_repo):
    b = load(how, shape, tmp_path)
    plan, outcomes = runnable_outcomes("new", b)
    lines = features.lines(plan, list(CASES))
    want = expected_lines(shape)
    assert len(lines) == len(want) and all(got.startswith(w) for got, w in zip(lines, want)), "\n".join(lines)
    # Every call passing a parameter B's wrapper takes ran B (against the oracle); the
    # rest ran only where that wrapper's default means the same call.
    for c in CASES:
        needed = {(n, features.wrapper(c)) for n in features.uses(c) if not features.BY_NAME[n].absent_is_same(c)}
        b_takes = all(TAKES[shape].get(k) == B for k in needed)
        assert plan.runs(c) == (not needed, b_takes), c
    assert outcomes and all(o.verdict.passed for o in outcomes), [o.verdict.first_line() for o in outcomes]


@pytest.mark.parametrize("how", ["file", "rev"])
@pytest.mark.parametrize("drop", DROPS, ids=drop_id)
def test_a_copy_dropping_one_parameter_on_one_wrapper_fails_naming_both(drop, how, tmp_path, at_repo):
    shape, name, function = drop[:3]
    b = load(how, shape, tmp_path, drop)
    _, outcomes = runnable_outcomes("new", b)
    failed = [o for o in outcomes if not o.verdict.passed]
    ran = [o.config for o in outcomes]
    assert failed, f"{drop_id(drop)} passed every call"
    # Every failure is a call passing that parameter to that wrapper (or to the DCP
    # wrapper at dcp_size 1, which hands it on to convert) ...
    wrapper = features.WRAPPER[function]
    delegated = function == CV and drop[0] == "d"  # (d)'s DCP hands its out= on as convert's output=
    assert all(name in features.uses(o.config)
               and (o.config.mode == wrapper or (delegated and o.config.mode == "dcp" and o.config.dcp_size == 1))
               for o in failed), [o.config for o in failed]
    # ... and the line that points at it names both.
    lines = features.failure_lines([o.config for o in failed], ran)
    assert any(line.startswith(f"feature {name} on {wrapper}: ") for line in lines), lines
    # A buffer dropped: the verdict names it.
    if name != "BLOCK_STRIDE_ROWS":
        buffer = "out" if name == "out" else "valid_counts"
        assert any(f"returned {buffer} that is not the caller's buffer" in o.verdict.first_line() for o in failed)


# ----------------------------------------------------------------- vLLM main's file against #50365, as the issue ran it


def _sweep(tmp_path, a: str, b: str, ids: list) -> dict:
    from remap_ab.sweep.run import Sweep, SweepOptions

    sweep = Sweep(SweepOptions(a=a, b=b, device=runtime.current(), filters=("case=" + ",".join(ids),), workers=0,
                               root=str(tmp_path), grid_file="callers", progress=False))
    sweep.prepare()
    return sweep.run()


def _callers_sample() -> dict:
    """A few one-row calls of the callers grid: the convert and DCP wrappers, each with
    a stride other than its block size and with none (or the block size)."""
    picked: dict = {}
    for p in grid.load("callers").points():
        c = p.config
        if c.tokens != 1 or c.out_buffers:
            continue
        key = (c.mode, c.block_stride not in (0, c.block_size))
        if len(picked.setdefault(key, [])) < 2:
            picked[key].append(p.case_id)
    assert len(picked) == 4, picked
    return picked


def test_main_s_file_against_50365_runs_every_strided_convert_call_and_a_stride_ignoring_copy_fails(tmp_path,
                                                                                                    at_repo):
    picked = _callers_sample()
    ids = [i for group in picked.values() for i in group]
    strided_convert, strided_dcp = picked[("convert", True)], picked[("dcp", True)]
    s = _sweep(tmp_path / "a", f"base:{FILE}", f"shape-a:{FILE}", ids)
    assert s["passed"], s["failures"]
    text = "\n".join(s["features"])
    assert f"feature BLOCK_STRIDE_ROWS on convert, B only: {len(strided_convert)} calls judged against the oracle" \
        in text, text
    assert "neither A's nor B's convert" not in text
    assert f"feature BLOCK_STRIDE_ROWS on dcp, neither A's nor B's dcp wrapper takes it: {len(strided_dcp)} calls " \
           f"not run" in text, text
    assert s["cases"] == len(ids) - len(strided_dcp)
    # main's file with the convert launch ignoring the stride: exactly those calls fail.
    bad = _sweep(tmp_path / "drop", f"base:{FILE}", f"drop-{drop_id(DROPS[0])}:{FILE}", ids)
    assert not bad["passed"]
    assert sorted(f["case_id"] for f in bad["failures"]) == sorted(strided_convert)
    n = len(strided_convert)
    assert f"feature BLOCK_STRIDE_ROWS on convert: {n} of {n} calls passing it failed" in bad["features"], bad["features"]


def test_sweep_list_keeps_what_one_side_s_wrapper_takes(capsys):
    from remap_ab.cli import main as cli_main

    b = str(SHAPES_DIR / SHAPES["a"])
    assert cli_main(["sweep", "--list", "--grid", "callers", "--device", "cpu", "--a", "new", "--b", b,
                     "--max-tokens", "1"]) == 0
    out, err = capsys.readouterr()
    listed = {line.split()[0] for line in out.splitlines() if "rejection=" not in line}
    one_row = [p for p in grid.load("callers").points() if p.config.tokens == 1]
    strided = {p.case_id: p.config for p in one_row if p.config.block_stride not in (0, p.config.block_size)}
    # main's convert takes the stride: listed (unless it also passes a buffer nobody takes) ...
    assert {i for i, c in strided.items() if c.mode == "convert" and not c.out_buffers} <= listed
    # ... its DCP wrapper does not, nor does #50365's: not listed, and said so per wrapper.
    assert not {i for i, c in strided.items() if c.mode == "dcp"} & listed
    assert "takes on the wrapper they call" in err
