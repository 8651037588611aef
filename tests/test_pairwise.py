"""The call envelope covered pairwise (issue 60): its dimensions and what a case is on
each, the declared pairs less the impossible ones, the callers grid holding every one
(so a dimension or value added to envelope.toml without its cases fails here), the
soak's draws reaching them on the CPU, a run saying what it exercised, and a broken B
in each hole the grids had, caught by a --filter'd sweep of the callers grid's cases
in that hole."""

import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from remap_ab import runtime
from remap_ab.errors import ConfigError
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.grid import envelope, grid
from remap_ab.subjects.remap.judge import features, registry
from remap_ab.subjects.remap.parts import soak

REPO = Path(__file__).resolve().parents[1]
HOLES = REPO / "tests" / "impls" / "holes"
ENVELOPE_TOML = REPO / "remap_ab" / "subjects" / "remap" / "envelope.toml"


def _classes(configs, plan=None, env=None):
    env = env or envelope.load()
    return [env.classify(c, plan) for c in configs]


# ------------------------------------------------------------------ the dimensions


def test_every_optional_parameter_of_the_wrappers_is_a_dimension():
    names = [d.name for d in envelope.load().dimensions]
    assert {f.name for f in features.FEATURES} <= set(names)  # a new parameter needs its dimension
    assert {"wrapper", "dcp_size", "compaction", "counts", "rows", "zero_rows"} <= set(names)
    dims = {d.name: d.values for d in envelope.load().dimensions}
    assert dims["BLOCK_STRIDE_ROWS"] == ("absent", "dense", "non-dense")
    assert dims["dcp_size"] == ("-", *map(str, envelope.load().dcp_sizes))


def test_the_row_classes_hold_odd_sizes_at_every_scale_up_to_16384():
    env = envelope.load()
    assert max(env.rows) == 16384
    held = {env.row_class(t) for t in range(1, max(env.rows) + 1)}
    assert held == set(dict((d.name, d.values) for d in env.dimensions)["rows"])
    # An odd T is a multiple of no tile width (BLOCK_N) and no block size: one at every scale.
    for t in (3, 65, 1025, 4097, 16383):
        assert env.row_class(t).endswith("/odd") and all(t % w for w in (2, 4, 32, 64, 128, 256))
    assert [env.row_class(t) for t in (1, 1024, 2048, 16384)] == ["1", "65-1024/even", "1025-4096/even",
                                                                   "4097-16384/even"]
    with pytest.raises(ConfigError, match="no \\[\\[row_class\\]\\] holds 16385 rows"):
        env.row_class(16385)


def test_classify_places_a_case_on_each_dimension():
    env = envelope.load()
    c = CaseConfig(mode="dcp", dcp_size=1, tokens=2561, topk=256, block_size=256, block_stride=320,
                   out_buffers=True, counts=True, counts_out=False, invalid_ratio=1.0)
    assert env.classify(c) == {"wrapper": "dcp", "dcp_size": "1", "compaction": "off", "counts": "on",
                               "BLOCK_STRIDE_ROWS": "non-dense", "out": "passed", "valid_counts_out": "absent",
                               "rows": "1025-4096/odd", "zero_rows": "forced"}
    d = CaseConfig(mode="dcp", dcp_size=4, compact=True, tokens=3, block_size=64, block_stride=64, out_buffers=True,
                   counts=True, row_layout="mixed")
    assert env.classify(d) == {"wrapper": "dcp", "dcp_size": "4", "compaction": "on", "counts": "on",
                               "BLOCK_STRIDE_ROWS": "dense", "out": "passed", "valid_counts_out": "passed",
                               "rows": "2-64/odd", "zero_rows": "forced"}
    # The block size passed to two sides that both lack the parameter: the same call without it.
    assert env.classify(d, registry.feature_plan("old", "new"))["BLOCK_STRIDE_ROWS"] == "absent"
    assert env.classify(d, registry.feature_plan("old", "main"))["BLOCK_STRIDE_ROWS"] == "dense"
    assert env.classify(CaseConfig(mode="convert", tokens=2, row_layout="mixed"))["zero_rows"] == "not forced"


def test_the_declared_pairs_are_every_pair_less_the_exclusions():
    env = envelope.load()
    sizes = [len(d.values) for d in env.dimensions]
    every = sum(a * b for a, b in itertools.combinations(sizes, 2))
    excluded = {frozenset(p) for e in env.exclusions for p in e.pairs()}
    assert len(env.pairs) == every - len(excluded) == 341
    assert all(e.why for e in env.exclusions) and all(c.why for c in env.combinations)
    # Impossible by construction: no case of any shipped grid, nor any soak draw, holds one.
    for name in grid.shipped():
        for cls in _classes(p.config for p in grid.load(name).points()):
            assert env.excluded(cls) is None, (name, cls)
    for d in itertools.islice(soak.draws(2, 0, 16384, max_lanes=soak.CPU_MAX_LANES), 600):
        assert env.excluded(env.classify(d.config)) is None, d.config.cli_args()


def test_envelope_files_that_break_the_rules_are_refused(tmp_path):
    text = ENVELOPE_TOML.read_text()
    cases = {
        'name = "zero_rows"': ('name = "zero_rows"', 'name = "colour"', "has no rule placing a case on it"),
        "low = 4097": ("low = 4097", "low = 4099", "4098 rows fall in no class"),
        "never = { valid_counts_out": ('never = { valid_counts_out = ["passed"]', 'never = { valid_counts_out = ["maybe"]',
                                       "names valid_counts_out=maybe"),
    }
    for i, (old, new, message) in enumerate(cases.values()):
        path = tmp_path / f"e{i}.toml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(ConfigError, match=message):
            envelope.load(str(path))


# ------------------------------------------------------------------ the callers grid


def test_the_callers_grid_covers_every_declared_pair_and_combination():
    cov = envelope.coverage_of(p.config for p in grid.load("callers").points())
    assert (cov.exercised, cov.pairs, cov.never, cov.combinations_never) == (341, 341, (), ())
    assert cov.line().startswith("coverage: 341 of 341 declared pairs of the call envelope, 4 of 4 combinations")
    # The other grids do not: their lines name what they never hold.
    pr = envelope.coverage_of(p.config for p in grid.load("pr").points())
    assert pr.exercised < pr.pairs and "never: " in pr.line() and "[out= alone with counts on convert]" in pr.line(400)


def test_the_pairwise_cases_are_what_the_script_writes():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "pairwise_cases.py"), "--check"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_value_added_to_a_dimension_is_a_pair_the_callers_grid_lacks_until_its_cases_come(tmp_path):
    path = tmp_path / "envelope.toml"
    path.write_text(ENVELOPE_TOML.read_text().replace("sizes = [1, 2, 4, 8]", "sizes = [1, 2, 4, 8, 16]", 1))
    wider = envelope.load(str(path))
    configs = [p.config for p in grid.load("callers").points()]
    cov = envelope.coverage_of(configs, env=wider)
    assert cov.pairs > 341 and "wrapper=dcp × dcp_size=16" in cov.never
    # The greedy cover adds the fewest it finds: a case per DCP-16 pair at the widest dimension (9 row classes).
    added = envelope.greedy_cover(_classes(configs, env=wider), wider)
    assert 9 <= len(added) <= 12 and all(wider.excluded(a) is None for a in added)
    assert envelope.pair_coverage(_classes(configs, env=wider) + added, wider).never == ()


def test_a_sweep_says_what_it_exercised_in_its_summary_and_run_json(tmp_path):
    ids = _cheapest(lambda c: c.mode == "convert" and not c.block_stride and not c.out_buffers, "new", 1)
    s = _sweep(tmp_path, "new", ids)
    meta = json.loads((Path(s["folder"]) / "run.json").read_text())
    for got in (s["pairs"], meta["pairs"]):
        assert (got["pairs"], got["exercised"], got["cases"]) == (341, 36, 1)  # one case: 9 dimensions, 36 pairs
        assert len(got["never"]) == 305 and got["line"].startswith("coverage: 36 of 341 declared pairs")
    from remap_ab.sweep.summary import format_summary

    assert "  coverage: 36 of 341 declared pairs of the call envelope, 0 of 4 combinations (1 case); never: " \
        in format_summary(s)


def test_the_soak_draws_reach_every_declared_pair_on_the_cpu_at_a_bounded_cost():
    # A B taking every parameter on both wrappers (main's, with caller buffers on the DCP wrapper).
    plan = registry.feature_plan("old", str(HOLES / "dcp_buffers_zero_rows.py"))
    drawn = [d.config for d in itertools.islice(
        soak.draws(1, 0, soak.CPU_MAX_TOKENS, prefill_share=soak.CPU_PREFILL_SHARE, plan=plan,
                   max_lanes=soak.CPU_MAX_LANES), 300)]
    cov = envelope.coverage_of(drawn, plan)
    assert (cov.never, cov.combinations_never) == ((), ()), cov.line()
    assert max(c.tokens for c in drawn) > 8192 and any(c.tokens > 1024 and c.tokens % 2 for c in drawn)
    # K scaled to T: a case within the budget (K no less than one 32-wide tile), a prefill step within its own.
    steps = set(soak.prefill_steps())
    assert all(c.tokens * c.topk <= max(soak.CPU_MAX_LANES, 32 * c.tokens) for c in drawn if c.tokens not in steps)
    assert all(c.tokens * c.topk <= soak.CPU_LARGE_LANES for c in drawn)


# ------------------------------------------------------------------ the holes' Bs


def _zero(c) -> bool:
    return envelope.load().classify(c)["zero_rows"] == "forced"


# Each hole of issue 60: the B that goes wrong only there, and which calls are in it.
HOLE_CASES = {
    "odd_prefill_rows": lambda c: c.tokens > 1024 and c.tokens % 2 == 1,
    "dcp1_ignores_stride": lambda c: c.mode == "dcp" and c.dcp_size == 1 and c.block_stride not in (0, c.block_size),
    "dcp_buffers_prefill_rows": lambda c: c.compacts and c.out_buffers and c.tokens > 1024,
    "dcp_buffers_zero_rows": lambda c: c.compacts and c.out_buffers and c.tokens > 1024 and _zero(c),
    "out_alone_with_counts": lambda c: c.mode == "convert" and c.out_buffers and c.counts and not c.counts_out,
}


def _cheapest(holds, b: str, n: int) -> list:
    """IDs of the ``n`` cheapest (rows x K) callers cases that ``holds`` and B runs."""
    plan = registry.feature_plan("old", b)
    points = [p for p in grid.load("callers").points() if holds(p.config) and plan.runs(p.config)[1]]
    return [p.case_id for p in sorted(points, key=lambda p: (p.config.tokens * p.config.topk, p.index))[:n]]


def _sweep(tmp_path, b: str, ids: list) -> dict:
    from remap_ab.sweep.run import Sweep, SweepOptions

    sweep = Sweep(SweepOptions(a="old", b=b, device=runtime.current(), filters=(f"case={','.join(ids)}",),
                               workers=0, root=str(tmp_path), grid_file="callers", progress=False))
    sweep.prepare()
    return sweep.run()


@pytest.mark.parametrize("hole", sorted(HOLE_CASES))
def test_the_callers_grid_catches_a_b_broken_only_in_a_hole_the_grids_had(tmp_path, hole):
    b = str(HOLES / f"{hole}.py")
    inside = _cheapest(HOLE_CASES[hole], b, 1)
    # Beside it, the cheapest case of the same wrapper outside the hole: B is right there.
    wrapper = {p.case_id: p.config.mode for p in grid.load("callers").points()}[inside[0]]
    outside = _cheapest(lambda c: c.mode == wrapper and not HOLE_CASES[hole](c), b, 1)
    s = _sweep(tmp_path, b, inside + outside)
    rows = {r["case_id"]: r["status"] for r in _results(s["folder"])}
    assert rows == {inside[0]: "fail", outside[0]: "pass"}, s


def _results(folder) -> list:
    import csv

    with open(Path(folder) / "results.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if not r.get("rejection")]


def test_the_holes_cases_are_in_the_callers_grid_alone():
    for name in ("pr", "models"):
        configs = [p.config for p in grid.load(name).points()]
        assert not any(holds(c) for holds in HOLE_CASES.values() for c in configs), name
    configs = [p.config for p in grid.load("callers").points()]
    assert all(any(holds(c) for c in configs) for holds in HOLE_CASES.values())


def test_out_alone_with_counts_is_a_call_of_its_own():
    c = CaseConfig(mode="convert", tokens=3, out_buffers=True, counts=True, counts_out=False)
    assert features.uses(c) == ("out",) and features.uses(c.replace(counts_out=True)) == ("out", "valid_counts_out")
    assert c.replace(counts=False).counts_out is True  # nothing to leave out: one case, one ID
    assert dataclasses.replace(c, counts_out=True).case_id != c.case_id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_soak_calls_every_hole_within_its_opening_cover(seed):
    # What a one-minute CPU soak judges first (some 15 to 70 cases on 2 shared cores): each
    # hole's B is called in its hole within the stream's opening pairwise cover, for any seed.
    for hole, holds in HOLE_CASES.items():
        plan = registry.feature_plan("old", str(HOLES / f"{hole}.py"))
        drawn = itertools.islice(soak.draws(seed, 0, soak.CPU_MAX_TOKENS, prefill_share=soak.CPU_PREFILL_SHARE,
                                            plan=plan, max_lanes=soak.CPU_MAX_LANES), 45)
        assert any(holds(d.config) and plan.runs(d.config)[1] for d in drawn), (hole, seed)
