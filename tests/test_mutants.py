"""The mutant catalogue stays in step with the kernels, every mutant is observable, the
kill checks can kill, and the command says only what was checked.

These are the cheap guarantees (seconds): each edit still matches the kernel source
exactly once, each generated package imports under its own name and really is the
mutated code, each ordinary mutant's witness case changes an output of the real
kernel on the device the kernels run on, the declared-equivalent and memcheck-only
ones change nothing there, and the race mutants are invisible to the CPU's program
orders (and killed by the race check on a GPU). Whether the suite *kills* every
mutant is `remap-ab mutants` (run by CI), not this file.
"""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from conftest import by_id, importable_mutants

from remap_ab import runtime
from remap_ab.mutants import properties
from remap_ab.mutants.results import CheckResult
from remap_ab.mutants.session import MutantResult, MutantSettings
from remap_ab.mutants.session import plan as plan_of
from remap_ab.status import Check, Outcome
from remap_ab.subjects.remap.parts import mutants as M
from remap_ab.subjects.remap.parts.mutants import catalogue as catalogue_module
from remap_ab.subjects.remap.parts.mutants import checks
from remap_ab.subjects.remap.parts.mutants import properties as remap_properties

CATALOGUE = M.select()
DEVICE = runtime.current()


@pytest.fixture(scope="module")
def mutant_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mutants")
    with importable_mutants(root, CATALOGUE):
        yield root


# --------------------------------------------------------------------------- the catalogue as data

def test_catalogue_is_large_covers_both_kernels_and_ids_are_unique():
    live = [m for m in CATALOGUE if not m.equivalent]
    assert len(live) >= 25
    assert {m.target for m in live} == {"old", "new"}
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    assert sum(1 for m in live if m.needs_gpu) >= 4
    assert [m.id for m in live if m.observable == "memcheck"] == ["block_table_read_past_end"]
    for m in CATALOGUE:
        assert m.id.isidentifier() and m.description and m.edits, m.id


def _entry(**over):
    entry = {"id": "x", "target": "new", "area": "§1", "description": "d", "witness": {"base": "convert"},
             "edit": [{"old": "a", "new": "b"}]}
    entry.update(over)
    return entry


def _doc(*entries):
    return {"version": 1, "bases": {"convert": {"mode": "convert", "tokens": 1}}, "mutant": list(entries)}


@pytest.mark.parametrize(
    "doc, message",
    [
        (_doc(_entry(colour="red")), "mutant x field 'colour' is not a known field"),
        (_doc(_entry(target="newer")), "field 'target' is str 'newer', expected one of old, new"),
        (_doc(_entry(id="not an id")), r"mutant #1 field 'id' is str 'not an id', expected a Python identifier"),
        (_doc(_entry(), _entry()), "appears twice"),
        (_doc(_entry(edit=[])), "field 'edit' is list \\[\\], expected at least 1 item"),
        (_doc(_entry(edit=[{"old": "a"}])), r"field 'edit\[0\].new' is missing"),
        (_doc(_entry(witness={"base": "nope"})), "witness base 'nope'"),
        (_doc(_entry(witness={"base": "convert", "tokens": "three"})), "witness is not a valid case"),
        (_doc(_entry(observable="eyes")), "field 'observable' is str 'eyes', expected one of output, memcheck"),
        (_doc(_entry(needs_gpu="")), "field 'needs_gpu' is str '', expected a non-empty string"),
        ({"version": 2, "mutant": [_entry()]}, "catalogue.toml field 'version' is int 2, expected one of 1"),
    ],
)
def test_a_malformed_catalogue_entry_is_named(doc, message):
    with pytest.raises(M.MutantError, match=message):
        catalogue_module.parse(doc)


def test_witness_base_is_merged_with_overrides():
    (m,) = catalogue_module.parse(_doc(_entry(witness={"base": "convert", "topk": 384, "block_n": 128})))
    assert m.witness_config().mode == "convert" and m.witness_config().tokens == 1
    assert m.witness_config().topk == 384


@pytest.mark.parametrize("m", CATALOGUE, ids=by_id)
def test_every_edit_matches_the_kernel_exactly_once(m):
    src = M.kernel_source(m.target)
    for old, _ in m.edits:
        assert src.count(old) == 1, f"{m.id}: {old.strip()[:60]!r} matches {src.count(old)} times"
    assert M.mutated_source(m) != src


def test_an_edit_that_no_longer_matches_fails_loudly():
    m = M.get("blk_le_w")
    with pytest.raises(M.MutantError, match="exactly once but matches 0 times"):
        M.mutated_source(m, source=M.kernel_source("old").replace("blk < max_num_blocks_per_req", "blk < W"))
    with pytest.raises(M.MutantError, match="unknown mutant"):
        M.select(["no_such_mutant"])


@pytest.mark.parametrize("m", CATALOGUE, ids=by_id)
def test_generated_package_is_the_mutated_kernel_under_its_own_name(m, mutant_root):
    mod = importlib.import_module(m.package)
    impl = importlib.import_module(f"{m.package}._remap")
    assert impl.__file__.startswith(str(mutant_root))
    assert mod.triton_convert_req_index_to_global_index.__module__ == f"{m.package}._remap"
    text = open(impl.__file__).read()
    assert f"kernels_{m.target}" not in text.split('"""', 2)[-1]  # no import of the real package
    for _, new in m.edits:
        assert new in text


# --------------------------------------------------------------------------- witnesses

@pytest.mark.parametrize("m", CATALOGUE, ids=by_id)
def test_mutant_changes_an_output_on_its_witness_case(m, mutant_root):
    # On the device the kernels run on (issue 11: inputs on CUDA when the kernels are).
    if m.needs_gpu and DEVICE == "cpu":
        pytest.skip("needs a GPU: test_race_mutants_are_invisible_to_every_cpu_program_order shows the CPU side")
    # A race on a GPU may need more than the declared case: the race cases come next.
    w, _ = M.find_witness(m, DEVICE, declared_only=not (m.needs_gpu and DEVICE == "cuda"))
    if m.equivalent:
        assert w is None, f"{m.id} is declared equivalent but changes an output: {w.line()}"
    elif m.observable in ("memcheck", "call", "speed"):
        assert w is None, f"{m.id} must change no output (only a memory, call or speed check may see it): {w.line()}"
    else:
        assert w is not None, f"{m.id}: its witness case shows no difference from the real kernel"


def test_witness_inputs_are_made_on_the_device_the_kernels_run_on(monkeypatch):
    # The GPU failure of issue 11: inputs made on the CPU for kernels on CUDA.
    from remap_ab.subjects.remap.parts.mutants import witness

    seen = []

    def spy(config, device="cpu"):
        seen.append(device)
        raise RuntimeError("stop here")

    monkeypatch.setattr(witness, "generate_inputs", spy)  # where the witness makes its inputs
    monkeypatch.setattr(runtime, "current", lambda: "cuda")
    with pytest.raises(RuntimeError, match="stop here"):
        M.compare_to_original(M.get("blk_le_w"), M.get("blk_le_w").witness_config())
    assert seen == ["cuda"]


# --------------------------------------------------------------------------- the race check

# The call-check mutants also need a GPU, but no race shows them: the call checks kill them.
RACY = [m for m in CATALOGUE if m.needs_gpu and m.observable == "output"]


@pytest.mark.parametrize("m", RACY, ids=by_id)
def test_race_mutants_are_invisible_to_every_cpu_program_order_and_killed_on_a_gpu(m, mutant_root):
    # On the CPU: the witness case and the multi-tile cases under every adversarial
    # program order still pass, which is why the catalogue labels them needs_gpu.
    # On a GPU: the race check (quiet and contended runs) kills each of them.
    result = checks.run_race(m, DEVICE)
    expected = Outcome.KILLED if DEVICE == "cuda" else Outcome.SURVIVED
    assert result.status == expected, f"{m.id} on {DEVICE}: {result.status} {result.detail}"
    assert result.examples_total or result.examples


def test_the_race_check_kills_a_mutant_that_breaks_the_contract(mutant_root):
    # The check can fail: a tiled count that keeps only the last tile's is wrong in
    # any order, and the race check says so on the witness case.
    result = checks.run_race(M.get("tiled_count_store"), DEVICE)
    assert result.status == Outcome.KILLED, result.detail
    assert "break the SPEC" in result.detail or "counts varied" in result.detail


def test_a_check_result_keeps_the_first_kill_and_lists_every_killer():
    res = CheckResult("race", Outcome.SURVIVED)
    res.kill("c1", "first", 2, entry="c1:quiet", how="quiet")
    res.kill("c2", "second", 5, how="contended")
    assert (res.status, res.killer, res.detail, res.how, res.examples) == (Outcome.KILLED, "c1", "first", "quiet", 2)
    assert res.killers == ["c1:quiet", "c2"] and res.done(0.0, 9).examples_total == 2 and res.seconds > 0
    survived = CheckResult("sweep", Outcome.SURVIVED).done(0.0, 9)
    assert (survived.status, survived.examples_total, survived.killers) == (Outcome.SURVIVED, 9, [])


# --------------------------------------------------------------------------- the memcheck check

def _fake_memcheck_run_case(failing_impl):
    from types import SimpleNamespace

    from remap_ab.subjects.remap.judge.compare import Mismatch

    def run_case(config, a="old", b="new", *, device=None, inputs=None, schedule=None, memcheck=False):
        assert memcheck is True
        failures = [Mismatch(Check.MEMCHECK.value, failing_impl, 0, 3, {}, 1, 1, "load past block_table")]
        return SimpleNamespace(verdict=SimpleNamespace(failures=failures))

    return run_case


def test_memcheck_check_kills_on_a_finding_of_the_mutant_and_breaks_on_the_real_kernel(monkeypatch):
    from remap_ab.subjects.remap.judge import runner
    m = M.get("block_table_read_past_end")
    monkeypatch.setattr(runner, "run_case", _fake_memcheck_run_case(m.package))
    killed = checks.run_memcheck(m, "cpu")
    assert killed.status == Outcome.KILLED and killed.killers == [killed.killer] == [m.witness_config().case_id]
    assert (killed.examples, killed.examples_total) == (1, 1) and "load past block_table" in killed.detail
    monkeypatch.setattr(runner, "run_case", _fake_memcheck_run_case("old"))
    assert checks.run_memcheck(m, "cpu").status == Outcome.BROKEN


# --------------------------------------------------------------------------- plans and verdicts

def plan(m, device, **settings):
    return plan_of(m, MutantSettings(device, **settings))


def test_plan_runs_what_can_kill_and_says_why_the_rest_does_not():
    racy, oob, plain = M.get("tiled_count_plain_rmw"), M.get("block_table_read_past_end"), M.get("blk_le_w")
    cpu = plan(racy, "cpu")
    assert cpu.run == ("race",) and "needs a GPU" in cpu.skipped["properties"]
    assert plan(racy, "cuda").run == ("race", "sweep", "properties")
    assert plan(racy, "cpu", full=True).run == ("race", "call", "memcheck", "rejects", "speed", "sweep", "properties")
    slow = plan(M.get("launched_eight_times"), "cpu")
    assert slow.run == ("speed",) and "only the speed gate" in slow.skipped["race"]
    unchecked = plan(M.get("req_id_length_unchecked"), "cpu")
    assert unchecked.run == ("rejects",) and "only a call SPEC §6 rejects" in unchecked.skipped["sweep"]
    assert plan(oob, "cpu").run == ("memcheck",) and "outputs unchanged" in plan(oob, "cpu").skipped["sweep"]
    assert plan(plain, "cpu").run == ("sweep", "properties")
    assert plan(plain, "cpu", props=False).skipped["properties"] == "skipped (--no-props)"
    assert plan(M.get("floor_division"), "cpu").run == ()


def _result(m, device, witness=True, **statuses):
    res = MutantResult(m.id, m.target, m.area, m.description, m.equivalent, m.needs_gpu, m.observable, device,
                       {"case_id": "x"} if witness else None, 1, {}, 0.0)
    for check, status in statuses.items():
        res.checks[check] = {"check": check, "status": status.value}
    return res


def test_verdicts_never_count_a_check_that_did_not_run():
    racy, oob, plain = M.get("tiled_count_plain_rmw"), M.get("block_table_read_past_end"), M.get("blk_le_w")
    S, K, N = Outcome.SURVIVED, Outcome.KILLED, Outcome.NOT_RUN
    assert _result(racy, "cpu", witness=False, race=S, sweep=N, properties=N).verdict == Outcome.NEEDS_GPU
    assert _result(racy, "cuda", witness=False, race=S, sweep=S, properties=S).verdict == Outcome.NO_WITNESS
    assert _result(racy, "cuda", witness=True, race=S, sweep=S, properties=S).verdict == Outcome.SURVIVED
    assert _result(racy, "cuda", witness=False, race=K, sweep=S, properties=S).verdict == Outcome.KILLED
    assert _result(oob, "cpu", witness=False, memcheck=N, sweep=N).verdict == Outcome.NOT_RUN
    assert _result(oob, "cpu", witness=False, memcheck=K, sweep=N).verdict == Outcome.KILLED
    assert _result(oob, "cpu", witness=True, memcheck=K).verdict == Outcome.BROKEN  # it changed an output
    assert _result(plain, "cpu", sweep=N, properties=N).verdict == Outcome.NOT_RUN
    assert _result(plain, "cpu", sweep=S, properties=S).verdict == Outcome.SURVIVED
    assert _result(plain, "cpu", sweep=S, properties=Outcome.TIMEOUT).verdict == Outcome.BROKEN
    assert _result(M.get("floor_division"), "cpu", witness=True).verdict == Outcome.BROKEN
    unchecked = M.get("req_id_length_unchecked")
    assert _result(unchecked, "cpu", rejects=K, sweep=N).verdict == Outcome.KILLED
    assert _result(unchecked, "cpu", witness=False, rejects=K).verdict == Outcome.NO_WITNESS
    assert _result(unchecked, "cpu", rejects=S).verdict == Outcome.SURVIVED
    slow = M.get("launched_eight_times")
    assert _result(slow, "cpu", witness=False, speed=N).verdict == Outcome.NEEDS_GPU
    assert _result(slow, "cuda", witness=False, speed=K).verdict == Outcome.KILLED
    assert _result(slow, "cuda", witness=False, speed=S).verdict == Outcome.SURVIVED
    assert _result(slow, "cuda", witness=True, speed=K).verdict == Outcome.BROKEN  # it changed an output


# ------------------------------------------------------ the layout, large-batch sync and speed mutants

# (mutant, the check that kills it, what its kill line says)
ISSUE_33 = [("out_column_major", "call", "[layout] mutant_out_column_major: out comes back with strides (1, 4)"),
            ("large_dcp_batch_read_back", "call", "[sync] mutant_large_dcp_batch_read_back"),
            ("launched_eight_times", "speed", ": SLOWER, the whole interval above 1.05")]


@pytest.mark.parametrize("mid, check, said", ISSUE_33, ids=[x[0] for x in ISSUE_33])
def test_the_new_checks_mutants_are_killed_where_they_can_show_and_labelled_where_not(mid, check, said, mutant_root):
    m = M.get(mid)
    result = checks.run_speed(m, DEVICE) if check == "speed" else checks.run_call(m, DEVICE)
    if m.needs_gpu and DEVICE == "cpu":
        # The catalogue says why a CPU cannot show it; the run reports "needs a GPU", never a kill.
        assert result.status in (Outcome.SURVIVED, Outcome.NOT_RUN) and m.needs_gpu, result.detail
        if check == "speed":
            assert "speed is not judged on the CPU" in result.detail
    else:
        assert result.status == Outcome.KILLED and said in result.detail, result.detail


# --------------------------------------------------------------------------- the rejects check

def test_the_rejects_check_kills_a_dropped_precondition_and_passes_the_real_kernel(mutant_root):
    m = M.get("req_id_length_unchecked")
    result = checks.run_rejects(m, DEVICE)
    assert result.status == Outcome.KILLED and result.killer == "req-id-longer", result.detail
    assert f"[rejects] {m.package}: accepts a call new rejects" in result.detail
    # The check can survive: an unmutated kernel on the mutant's side rejects every call.
    from types import SimpleNamespace

    faithful = checks.run_rejects(SimpleNamespace(original="new", package="old"), DEVICE)
    from remap_ab.subjects.remap.judge.rejections import load

    assert faithful.status == Outcome.SURVIVED and faithful.examples_total == len(load())


# --------------------------------------------------------------------------- the property suite

def test_the_property_suite_is_the_installed_package_not_the_checkouts_tests():
    suite = properties.suite_dir(M.SUITE_PACKAGE)
    assert suite.parent.name == "parts" and suite.name == "properties"
    tests = properties.property_tests(properties.property_files(M.SUITE_PACKAGE))
    assert len(tests) >= 9 and all("/tests/" not in t for t in tests)
    assert all(t.split("::")[0].startswith(str(suite)) for t in tests)


def test_the_property_modules_are_no_test_files_yet_each_is_found(tmp_path):
    suite = properties.suite_dir(M.SUITE_PACKAGE)
    files = properties.property_files(M.SUITE_PACKAGE)
    assert {f.name for f in files} == {"callers.py", "convert.py", "dcp.py", "order.py", "rejections.py",
                                       "schedule.py", "speed.py"}
    assert not properties.is_property_module(suite / "support.py")  # no test function
    assert not properties.is_property_module(suite / "__init__.py")
    outside = tmp_path / "properties" / "order.py"  # the same text outside a subject's package
    outside.parent.mkdir()
    outside.write_text((suite / "order.py").read_text())
    assert not properties.is_property_module(outside)


def test_test_order_puts_the_witness_path_first():
    tests = [
        "/x/remap_ab/subjects/remap/parts/properties/convert.py::test_convert_wrapper_matches_oracle",
        "/x/remap_ab/subjects/remap/parts/properties/dcp.py::test_dcp_in_place_matches_oracle",
        "/x/remap_ab/subjects/remap/parts/properties/dcp.py::test_dcp_compacted_matches_oracle",
    ]
    assert remap_properties.order_for(M.get("slot_base_dropped"), tests)[0].endswith("compacted_matches_oracle")
    assert remap_properties.order_for(M.get("remote_kept"), tests)[0].endswith("in_place_matches_oracle")
    assert remap_properties.order_for(M.get("blk_le_w"), tests) == tests


def _probe(tmp_path, records):
    p = tmp_path / "probe.jsonl"
    p.write_text("".join(json.dumps(dict(r, seq=i)) + "\n" for i, r in enumerate(records, 1)))
    return p


def test_probe_summary_counts_examples_to_the_first_failure(tmp_path):
    a, b = "t.py::test_a", "t.py::test_b"
    p = _probe(tmp_path, [
        {"kind": "start", "nodeid": a},
        *[{"kind": "example", "nodeid": a, "status": "passed", "how": "during generate phase"}] * 3,
        {"kind": "test", "nodeid": a, "outcome": "passed"},
        {"kind": "start", "nodeid": b},
        {"kind": "example", "nodeid": b, "status": "passed", "how": "explicit example"},
        {"kind": "example", "nodeid": b, "status": "gave_up", "how": "during generate phase"},
        {"kind": "example", "nodeid": b, "status": "passed", "how": "during generate phase"},
        {"kind": "example", "nodeid": b, "status": "failed", "how": "during generate phase"},
        {"kind": "test", "nodeid": b, "outcome": "failed", "message": "AssertionError: FAIL"},
    ])
    r = properties.summarize_probe(p, 1, "")
    assert (r.status, r.killer, r.examples, r.examples_total, r.how) == (Outcome.KILLED, b, 3, 6, "generated")


def test_probe_summary_failing_regression_example_and_crash(tmp_path):
    a = "t.py::test_a"
    p = _probe(tmp_path, [
        {"kind": "start", "nodeid": a},
        {"kind": "example", "nodeid": a, "status": "gave_up", "how": "explicit example"},
        {"kind": "test", "nodeid": a, "outcome": "failed", "message": "boom"},
    ])
    r = properties.summarize_probe(p, 1, "")
    assert (r.status, r.examples, r.how) == (Outcome.KILLED, 1, "regression @example")
    crash = properties.summarize_probe(_probe(tmp_path, [{"kind": "start", "nodeid": a}]), -11, "Segmentation fault")
    assert (crash.status, crash.killer) == (Outcome.KILLED, a) and "signal 11" in crash.detail
    survived = properties.summarize_probe(_probe(tmp_path, [{"kind": "test", "nodeid": a, "outcome": "passed"}]), 0, "")
    assert survived.status == Outcome.SURVIVED


# --------------------------------------------------------------------------- the command line

def test_the_remaps_mutants_are_its_part_reached_as_every_subjects_are():
    from remap_ab.commands.common import subject_part

    part = subject_part("remap", "mutants", ("select",))
    assert part is M and part.WORKER  # run in worker processes, by the kill-matrix driver
    assert not getattr(subject_part("topology", "mutants", ("select", "kill")), "WORKER", False)  # judged in-process


def test_list_command(capsys):
    from remap_ab.cli import main

    assert main(["mutants", "--list", "--only", "blk_le_w,tiled_count_plain_rmw", "-v"]) == 0
    out = capsys.readouterr().out
    assert "blk_le_w" in out and "+    valid_block = (blk >= 0) & (blk <= max_num_blocks_per_req)" in out
    assert "[needs a GPU]" in out and "needs a GPU: a non-atomic read-modify-write" in out


def _usage_error(capsys, argv):
    from remap_ab.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--timeout", "-1"], "must be a positive finite number"),
        (["--timeout", "nan"], "must be a positive finite number"),
        (["-j", "-1"], "must be at least 1"),
        (["-j", "0"], "must be at least 1"),
        (["--only", ","], "names no mutant id"),
        (["--only", " , "], "names no mutant id"),
        (["--no-props", "--no-sweep"], "--no-props with --no-sweep leaves none of the suite's checks"),
        (["--only", "nope"], "unknown mutant id(s) nope"),
    ],
)
def test_bad_options_are_one_line_usage_errors(capsys, argv, message):
    line = _usage_error(capsys, ["mutants"] + argv)
    assert message in line


def test_output_locations_that_cannot_be_written_are_usage_errors(capsys, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    only = ["mutants", "--only", "blk_le_w"]
    assert "is a folder" in _usage_error(capsys, only + ["--json", str(tmp_path)])
    assert "does not exist" in _usage_error(capsys, only + ["--json", str(tmp_path / "no" / "r.json")])
    assert "is a file" in _usage_error(capsys, only + ["--keep", str(a_file)])
    assert "is a file" in _usage_error(capsys, only + ["--keep", str(a_file / "sub")])
    assert a_file.read_text() == "x"


def test_side_by_side_prints_each_runs_verdict(capsys, tmp_path):
    from remap_ab.cli import main

    def write(name, device, verdict, killer):
        checks_ = {"race": {"check": "race", "status": killer}}
        payload = {"device": device, "mutants": [{"id": "m1", "verdict": verdict, "checks": checks_}]}
        (tmp_path / name).write_text(json.dumps(payload))
        return str(tmp_path / name)

    cpu = write("cpu.json", "cpu", "needs a GPU", "survived")
    gpu = write("gpu.json", "cuda", "killed", "killed")
    assert main(["mutants", "--side-by-side", cpu, gpu]) == 0
    out = capsys.readouterr().out
    assert "NEEDS A GPU" in out and "KILLED by race" in out
    (tmp_path / "bad.json").write_text("{}")
    line = _usage_error(capsys, ["mutants", "--side-by-side", str(tmp_path / "bad.json")])
    assert "not a `remap-ab mutants --json` file" in line


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU's honest-green contract; on a GPU these mutants must be killed")
def test_cpu_run_stays_green_and_says_what_it_did_not_kill(capsys):
    # End to end through the worker processes: the race mutant is "needs a GPU" with
    # its reason, the memcheck-only one is killed by memcheck where run_case has it and
    # "not run" where it has not; neither is a survivor, so the exit status is 0.
    from remap_ab.cli import main

    code = main(["mutants", "--only", "tiled_count_plain_rmw,block_table_read_past_end", "-j", "2", "--timeout", "600"])
    out = capsys.readouterr().out
    assert code == 0, out
    racy = next(line for line in out.splitlines() if line.startswith("tiled_count_plain_rmw "))
    assert racy.rstrip().endswith("NEEDS A GPU") and "SURVIVED" in racy  # the race check ran and saw nothing
    assert "needs a GPU (not killed on the CPU" in out and M.get("tiled_count_plain_rmw").needs_gpu in out
    oob = next(line for line in out.splitlines() if line.startswith("block_table_read_past_end "))
    assert oob.rstrip().endswith("KILLED"), out


@pytest.mark.skipif(DEVICE != "cpu", reason="runs the worker in this process on the CPU backend")
def test_worker_leaves_out_the_suite_checks_of_a_racy_mutant_once_the_race_check_killed_it(tmp_path, monkeypatch):
    # The GPU fast path, shown on the CPU with a mutant the race check kills there:
    # labelled needs_gpu, it gets race first and the suite's checks are "not run".
    import dataclasses

    from remap_ab.mutants import worker

    m = dataclasses.replace(M.get("tiled_count_store"), needs_gpu="stand-in label for this test")
    monkeypatch.setattr(M, "get", lambda mutant_id: m)  # where the worker looks its mutant up
    M.materialize(m, tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    out = tmp_path / "w.json"
    assert worker.main([m.id, str(tmp_path), str(out), "--part", M.__name__, "--device", "cpu",
                        "--checks", "race,sweep,properties"]) == 0
    data = json.loads(out.read_text())
    assert data["phase"] == "done" and data["race"]["status"] == "killed"
    for check in ("sweep", "properties"):
        assert data[check]["status"] == "not run" and "killed by an earlier check" in data[check]["detail"]
    assert "props_rc" not in data
