"""Hostile inputs, declared as data (in the manner of PyTorch OpInfo's error inputs).

Each row is one bad input to one command (or to the Python API) and what remap-ab must
do with it: the exit status, and a fragment of the one line it prints. Every row also
asserts what holds for all of them: no traceback, and for a refusal (exit 2) or an
internal error (exit 3) exactly one line on stderr. A failing implementation is a
verdict, not an error: exit 1, the verdict (on stdout) says what went wrong.

Rows run in this process through ``remap_ab.cli.main``, each stopped at its timeout (a
command that would run for minutes if it failed to refuse fails the row there), and in a
subprocess where they must: a row whose failure would be a crash of the process (the
segfault class), or a closed stdout.

``owner`` names the helper whose fix the row checks (see the project brief); a row
owned elsewhere may fail on a branch without that fix.

Placeholders in argv: ``{tmp}`` a fresh folder (holding ``afile``, a plain file);
``{impl:NAME}`` a module written from IMPLS[NAME] (the ``broken_impl`` fixture);
``{inputs:NAME}`` a tensor file made by INPUTS[NAME] from the generated inputs of
INPUT_CASE; ``{file:NAME}`` a file with FILES[NAME]'s content.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from remap_ab import runtime


@dataclass(frozen=True)
class Hostile:
    id: str
    argv: tuple[str, ...]  # remap-ab's arguments, or ("api", NAME) for API_CALLS[NAME]
    status: int  # exit status (API: the raised error's exit_code, 0 if nothing raised)
    fragment: str  # in stderr for 2 and 3, in stdout for 0 and 1
    owner: str = "edges"
    how: str = "inproc"  # inproc | subprocess | closed-stdout
    needs: str = ""  # "" | "cpu" (no CUDA) | "gpu" | "non-root"
    timeout: float = 180.0  # seconds until the row fails: the command did not refuse


def row(id, argv, status, fragment, **kw) -> Hostile:
    return Hostile(id, tuple(argv.split()) if isinstance(argv, str) else tuple(argv), status, fragment, **kw)


SMALL = "--topk 128 --tokens 1"
INPUT_FIELDS: dict = dict(mode="convert", topk=128, tokens=2, prefill_fraction=0.5)
INPUT_CASE = "--mode convert --tokens 2 --topk 128 --prefill-fraction 0.5"

ROWS = [
    # --- run: case options --------------------------------------------------------
    row("run-tokens-word", f"run {SMALL} --tokens many", 2, "tokens='many' is not a valid int"),
    row("run-tokens-zero", "run --topk 128 --tokens 0", 2, "at least one token"),
    row("run-tokens-fraction", "run --topk 128 --tokens 1.5", 2, "is not a valid int"),
    row("run-tokens-beyond-cap", "run --topk 128 --tokens 2000000", 2, "beyond the supported"),
    row("run-topk-not-multiple", "run --tokens 1 --topk 300", 2, "not a multiple of block_n"),
    row("run-block-n-not-pow2", "run --tokens 1 --topk 384 --block-n 96", 2, "power of two"),
    row("run-dcp-rank-too-big", f"run {SMALL} --dcp-size 4 --dcp-rank 4", 2, "dcp_rank=4"),
    row("run-dcp-size-zero", f"run {SMALL} --dcp-size 0", 2, "dcp_size=0"),
    row("run-interleave-not-divisor", f"run {SMALL} --interleave 48", 2, "does not divide block_size"),
    row("run-invalid-ratio-above-1", f"run {SMALL} --invalid-ratio 1.5", 2, "invalid_ratio=1.5"),
    row("run-invalid-ratio-nan", f"run {SMALL} --invalid-ratio nan", 2, "is not a valid float"),
    row("run-ratios-sum-above-1", f"run {SMALL} --invalid-ratio 0.8 --out-of-range 0.5", 2, "exceeds 1"),
    row("run-mode-unknown", f"run {SMALL} --mode prefill", 2, "mode='prefill' is not one of"),
    row("run-negatives-unknown", f"run {SMALL} --negatives sometimes", 2, "negatives='sometimes'"),
    row("run-table-unknown", f"run {SMALL} --table weird", 2, "table='weird'"),
    row("run-layout-unknown", f"run {SMALL} --row-layout diagonal", 2, "row_layout='diagonal'"),
    row("run-prefill-in-dcp-mode", f"run {SMALL} --prefill-fraction 0.5", 2, "needs mode=convert"),
    row("run-seed-negative", f"run {SMALL} --seed -1", 2, "seed=-1"),
    row("run-flag-with-value", f"run {SMALL} --compact=no", 2, "ignored explicit argument"),
    row("run-unknown-option", f"run {SMALL} --frobnicate", 2, "unrecognized arguments"),
    row("run-device-unknown", f"run {SMALL} --device tpu", 2, "invalid choice"),
    row("run-device-cuda-without-gpu", f"run {SMALL} --device cuda", 2, "no CUDA device", needs="cpu"),
    row("run-unknown-command", "frobnicate", 2, "invalid choice"),
    # --- run: sizes beyond memory or int32 --------------------------------------------
    row("run-num-reqs-1e8", f"run {SMALL} --num-reqs 100000000", 2, "needs about"),
    row("run-blocks-per-req-2e9", "run --mode convert --block-size 1 --topk 128 --tokens 1 --blocks-per-req 2000000000",
        2, "needs about"),
    row("run-blocks-per-req-int32", f"run {SMALL} --blocks-per-req 2000000000", 2, "overflows int32"),
    row("run-lanes-int32", "run --tokens 1048576 --topk 4096", 2, "overflows the kernels' int32 offsets"),
    row("run-lanes-beyond-memory", "run --tokens 1048576 --topk 1024", 2, "needs about"),
    # --- run: implementations that cannot be imported (exit 2) ------------------------
    row("impl-raises-at-import", f"run {SMALL} --b {{impl:raises}}", 2, "RuntimeError: boom at import"),
    row("impl-syntax-error", f"run {SMALL} --b {{impl:syntax}}", 2, "SyntaxError"),
    row("impl-exits-at-import", f"run {SMALL} --b {{impl:exits}}", 2, "SystemExit"),
    row("impl-empty-name", ["run", *SMALL.split(), "--b", ""], 2, "is not old, new, oracle or a dotted module path"),
    row("impl-relative-name", f"run {SMALL} --b .kernels_new", 2, "is not old, new, oracle or a dotted module path"),
    row("impl-name-with-space", ["run", *SMALL.split(), "--b", "kernels new"], 2, "is not old, new, oracle"),
    row("impl-missing-module", f"run {SMALL} --b no_such_module_remap_ab", 2, "cannot import implementation"),
    row("impl-lacks-the-api", f"run {SMALL} --a json", 2, "lacks triton_convert_req_index_to_global_index"),
    # --- run: implementations that return the wrong thing (a failing verdict, exit 1) --
    row("impl-returns-none", f"run {SMALL} --b {{impl:returns_none}}", 1, "returned None"),
    row("impl-returns-list", f"run {SMALL} --b {{impl:returns_list}}", 1, "returned a 2-element list"),
    row("impl-returns-3-tuple", f"run {SMALL} --b {{impl:returns_three}}", 1, "returned a 3-element tuple"),
    row("impl-returns-numpy", f"run {SMALL} --no-counts --b {{impl:returns_numpy}}", 1, "returned an object of type ndarray"),
    row("impl-returns-int", f"run {SMALL} --no-counts --b {{impl:returns_int}}", 1, "returned an object of type int"),
    row("impl-returns-wrong-device", f"run {SMALL} --b {{impl:returns_meta}}", 1, "on meta"),
    row("impl-raises-when-called", f"run {SMALL} --b {{impl:raises_at_call}}", 1, "ValueError: kernel exploded"),
    # --- run --inputs: saved tensors against the contract's preconditions ----------------
    row("inputs-req-id-beyond-table", f"run {INPUT_CASE} --inputs {{inputs:req_id_beyond}}", 2, "req_id[1] = 5"),
    row("inputs-req-id-negative", f"run {INPUT_CASE} --inputs {{inputs:req_id_negative}}", 2, "req_id[0] = -1"),
    row("inputs-prefill-id-beyond", f"run {INPUT_CASE} --inputs {{inputs:prefill_id_beyond}}", 2,
        "prefill_request_ids[1] = 2"),
    row("inputs-empty-prefill-starts", f"run {INPUT_CASE} --inputs {{inputs:empty_prefill_starts}}", 2,
        "prefill_starts is empty", how="subprocess"),  # a segfault (exit 139) before the check
    row("inputs-prefill-missing", f"run {INPUT_CASE} --inputs {{inputs:prefill_missing}}", 2,
        "prefill_request_ids or prefill_starts is missing"),
    row("inputs-int64", f"run {INPUT_CASE} --inputs {{inputs:int64}}", 2, "req_id has dtype torch.int64"),
    row("inputs-float", f"run {INPUT_CASE} --inputs {{inputs:float}}", 2, "token_indices has dtype torch.float32"),
    row("inputs-table-1d", f"run {INPUT_CASE} --inputs {{inputs:table_1d}}", 2, "block_table is 1-D"),
    row("inputs-table-wrong-width", f"run {INPUT_CASE} --inputs {{inputs:table_narrow}}", 2, "block_table has shape (2, 8)"),
    row("inputs-token-rows-mismatch", f"run {INPUT_CASE} --inputs {{inputs:token_rows}}", 2,
        "req_id has 2 rows but token_indices has 3"),
    row("inputs-missing-tensor", f"run {INPUT_CASE} --inputs {{inputs:no_block_table}}", 2, "missing block_table"),
    row("inputs-unknown-tensor", f"run {INPUT_CASE} --inputs {{inputs:extra}}", 2, "must hold tensors named"),
    row("inputs-not-a-dict", f"run {INPUT_CASE} --inputs {{inputs:bare_tensor}}", 2, "holds a Tensor"),
    row("inputs-list-not-tensor", f"run {INPUT_CASE} --inputs {{inputs:list_value}}", 2, "is a list, not a torch.Tensor"),
    row("inputs-junk-file", f"run {INPUT_CASE} --inputs {{file:junk}}", 2, "cannot read input file"),
    row("inputs-missing-file", f"run {INPUT_CASE} --inputs {{tmp}}/missing.pt", 2, "does not exist"),
    row("inputs-a-folder", f"run {INPUT_CASE} --inputs {{tmp}}", 2, "cannot read input file"),
    row("inputs-non-contiguous-is-fine", f"run {INPUT_CASE} --inputs {{inputs:non_contiguous}}", 0, ": PASS"),
    # --- run --schedule ------------------------------------------------------------------
    row("schedule-unknown", f"run {SMALL} --schedule sideways", 2, "--schedule 'sideways' is not one of", needs="cpu"),
    row("schedule-seed-word", f"run {SMALL} --schedule random:x", 2, "seed 'x' is not an integer", needs="cpu"),
    row("schedule-is-said", f"run {SMALL} --schedule tiles_reversed", 0, "schedule: tiles_reversed:0", needs="cpu"),
    # --- nondet ----------------------------------------------------------------------------
    row("nondet-dcp-size-1", "nondet --dcp-size 1 --root {tmp}", 2, "needs 2 or more ranks"),
    row("nondet-runs-0", "nondet --runs 0 --root {tmp}", 2, "0 must be at least 1"),
    row("nondet-tokens-words", "nondet --tokens a,b --root {tmp}", 2, "must be comma-separated integers"),
    row("nondet-tokens-empty", "nondet --tokens , --root {tmp}", 2, "is empty"),
    row("nondet-topk-not-multiple", "nondet --topk 300 --tokens 1 --root {tmp}", 2, "not a multiple of block_n"),
    row("nondet-topk-beyond-memory", "nondet --topk 1073741824 --tokens 1 --root {tmp}", 2, "needs about"),
    row("nondet-invalid-ratio-2", "nondet --invalid-ratio 2 --tokens 1 --root {tmp}", 2, "invalid_ratio=2.0"),
    row("nondet-seed-negative", "nondet --seed -1 --root {tmp}", 2, "-1 must be 0 or more"),
    row("nondet-impls-empty", "nondet --impls , --root {tmp}", 2, "names no implementation"),
    row("nondet-impl-raises", "nondet --impls {impl:raises} --tokens 1 --topk 128 --root {tmp}", 2, "boom at import"),
    row("nondet-conditions-empty", "nondet --conditions , --root {tmp}", 2, "names no condition"),
    row("nondet-gpu-condition-on-cpu", "nondet --conditions contended --tokens 1 --topk 128 --root {tmp}", 2,
        "do not exist on cpu", needs="cpu"),
    row("nondet-out-is-a-file", "nondet --tokens 1 --topk 128 --out {tmp}/afile", 2, "is a file, not a folder"),
    row("nondet-out-under-a-file", "nondet --tokens 1 --topk 128 --out {tmp}/afile/sub", 2, "is a file, not a folder"),
    row("nondet-out-cannot-create", "nondet --tokens 1 --topk 128 --out /proc/self/remap_ab_out", 2, "cannot create it"),
    row("nondet-root-read-only", "nondet --tokens 1 --topk 128 --root {tmp}/readonly", 2, "not writable",
        needs="non-root"),
    # --- sweep -------------------------------------------------------------------------------
    row("sweep-impl-raises", "sweep --b {impl:raises} --root {tmp} -j 0 --no-progress", 2, "boom at import"),
    row("sweep-impl-syntax", "sweep --a {impl:syntax} --root {tmp} -j 0 --no-progress", 2, "SyntaxError"),
    row("sweep-list-closed-stdout", "sweep --list", 141, "", how="closed-stdout"),
    row("sweep-workers-negative", "sweep -j -1 --filter k=128 --max-tokens 1 --root {tmp} --no-progress", 2, "-j",
        owner="sweep", timeout=60),
    row("sweep-grid-missing", "sweep --list --grid {tmp}/nope.toml", 2, "nope.toml", owner="sweep"),
    row("sweep-grid-version-word", "sweep --list --grid {file:grid_version_word}", 2, "version", owner="sweep"),
    row("sweep-grid-values-not-list", "sweep --list --grid {file:grid_values_int}", 2, "values", owner="sweep"),
    row("sweep-grid-not-toml", "sweep --list --grid {file:junk}", 2, "junk", owner="sweep"),
    row("sweep-root-is-a-file", "sweep --filter k=128 --max-tokens 1 -j 0 --root {tmp}/afile --no-progress", 2,
        "is a file", owner="sweep", timeout=120),
    row("sweep-filter-unknown", "sweep --list --filter bogus=1", 2, "bogus", owner="sweep"),
    row("sweep-resume-with-options", "sweep --resume --a old --root {tmp}", 2, "--resume continues a run", owner="sweep"),
    # --- report and replay -------------------------------------------------------------------
    row("report-run-missing", "report nope --root {tmp}", 2, "nope", owner="sweep"),
    row("report-corrupt-table", "report bad --root {tmp}/runs", 2, "bad", owner="sweep"),
    row("report-show-negative", "report --show -1 --root {tmp}", 2, "--show", owner="sweep"),
    row("replay-not-an-id", "replay zzz --root {tmp}", 2, "neither a report folder nor a case ID", owner="report"),
    row("replay-unknown-id", "replay 000000000000 --root {tmp}", 2, "not a case of the grid", owner="report"),
    row("replay-empty-folder", "replay {tmp}/emptyreport", 2, "emptyreport", owner="report"),
    row("replay-config-wrong-type", "replay {tmp}/badreport", 2, "field 'config.tokens' is str", owner="report"),
    row("replay-verdict-wrong-type", "replay {tmp}/badverdict", 2, "verdict.json", owner="report"),
    row("run-rejection-report-is-a-file", "run --rejection req-id-longer --report {tmp}/afile", 2, "is a file",
        owner="report"),
    row("replay-rejection-corrupt", "replay {tmp}/badcall", 2, "field 'rejection' holds no valid rejection call",
        owner="report"),
    # --- mutants (stopped at the timeout if it starts running instead of refusing: a run takes
    # minutes; a refusal's start-up on a loaded GPU host can take tens of seconds) ----------------
    row("mutants-timeout-negative", "mutants --timeout -1", 2, "--timeout", owner="mutants", timeout=120),
    row("mutants-jobs-negative", "mutants -j -1", 2, "-j", owner="mutants", timeout=120),
    row("mutants-only-empty", "mutants --only ,", 2, "--only", owner="mutants", timeout=120),
    row("mutants-nothing-to-run", "mutants --no-props --no-sweep", 2, "--no-props", owner="mutants", timeout=120),
    # --- bench -----------------------------------------------------------------------------------
    row("bench-without-gpu", "bench", 2, "CUDA", needs="cpu"),
    row("bench-fail-slower-word", "bench --fail-slower five", 2, "--fail-slower 'five'", owner="bench"),
    row("bench-calls-zero", "bench --calls 0 --out {tmp}/b", 2, "--calls", owner="bench", needs="gpu"),
    row("bench-out-is-a-file", "bench --report {tmp}/afile", 2, "is a file", owner="bench", needs="gpu"),
    # --- the Python API ------------------------------------------------------------------------
    row("api-tokens-str", ("api", "tokens_str"), 2, "tokens='3' is a str, not an int"),
    row("api-tokens-bool", ("api", "tokens_bool"), 2, "tokens=True is a bool, not an int"),
    row("api-compact-str", ("api", "compact_str"), 2, "compact='no' is a str, not a bool"),
    row("api-ratio-bool", ("api", "ratio_bool"), 2, "invalid_ratio=True is a bool"),
    row("api-seed-float", ("api", "seed_float"), 2, "seed=1.5 is a float, not an int"),
    row("api-mode-none", ("api", "mode_none"), 2, "mode=None is a NoneType"),
    row("api-ratio-int-is-fine", ("api", "ratio_int"), 0, ""),
    row("api-from-dict-word", ("api", "from_dict_word"), 2, "tokens='x' is not a valid int"),
    row("api-from-dict-fraction", ("api", "from_dict_fraction"), 2, "tokens=2.5 is not a valid int"),
    row("api-from-dict-unknown-field", ("api", "from_dict_unknown"), 2, "unknown configuration field(s) tokenz"),
    row("api-from-dict-bool-word", ("api", "from_dict_bool_word"), 2, "compact='maybe' is not a valid bool"),
    row("api-run-case-empty-impl", ("api", "run_case_empty_impl"), 2, "is not old, new, oracle"),
    row("api-run-case-bad-inputs", ("api", "run_case_bad_inputs"), 2, "req_id[0] = 9"),
]

IMPLS = {
    "raises": "raise RuntimeError('boom at import')\n",
    "syntax": "def broken(:\n    pass\n",
    "exits": "import sys\nsys.exit(3)\n",
    "returns_none": """
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return None
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "returns_list": """
        import torch
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return [torch.zeros(1), torch.zeros(1)]
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "returns_three": """
        import torch
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return torch.zeros(1), torch.zeros(1), torch.zeros(1)
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "returns_numpy": """
        import numpy
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return numpy.zeros(3)
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "returns_int": """
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return 7
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "returns_meta": """
        import torch
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            return torch.empty(1, 128, device="meta"), torch.empty(1, device="meta")
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
    "raises_at_call": """
        def triton_convert_req_index_to_global_index(*args, **kwargs):
            raise ValueError("kernel exploded")
        triton_filter_and_convert_dcp_index = triton_convert_req_index_to_global_index
    """,
}


def _inputs_builders():
    import torch

    def edit(name, value):
        return lambda x: {**x, name: value(x)}

    def without(*names):
        return lambda x: {k: v for k, v in x.items() if k not in names}

    i32 = torch.int32
    return {
        "req_id_beyond": edit("req_id", lambda x: torch.tensor([0, 5], dtype=i32)),
        "req_id_negative": edit("req_id", lambda x: torch.tensor([-1, 0], dtype=i32)),
        "prefill_id_beyond": edit("prefill_request_ids", lambda x: torch.tensor([-1, 2], dtype=i32)),
        "empty_prefill_starts": edit("prefill_starts", lambda x: torch.zeros(0, dtype=i32)),
        "prefill_missing": without("prefill_request_ids", "prefill_starts"),
        "int64": edit("req_id", lambda x: x["req_id"].long()),
        "float": edit("token_indices", lambda x: x["token_indices"].float()),
        "table_1d": edit("block_table", lambda x: x["block_table"].reshape(-1)),
        "table_narrow": edit("block_table", lambda x: x["block_table"][:, :8].contiguous()),
        "token_rows": edit("token_indices", lambda x: torch.cat([x["token_indices"], x["token_indices"][:1]])),
        "no_block_table": without("block_table"),
        "extra": edit("bonus", lambda x: torch.zeros(1, dtype=i32)),
        "bare_tensor": lambda x: x["req_id"],
        "list_value": edit("req_id", lambda x: x["req_id"].tolist()),
        "non_contiguous": edit("token_indices", lambda x: x["token_indices"].t().contiguous().t()),
    }


FILES = {
    "junk": b"this is not a torch file nor a toml grid = = =\n",
    "grid_version_word": b'version = "abc"\n',
    "grid_values_int": b"version = 1\n[dimensions.k]\nvalues = 5\n",
}


def _resolve(argv, tmp: Path, broken_impl) -> list[str]:
    """argv with its placeholders replaced by files made for this row."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    def one(arg: str) -> str:
        arg = arg.replace("{tmp}", str(tmp))
        m = re.fullmatch(r"\{(impl|inputs|file):(\w+)\}", arg)
        if not m:
            return arg
        kind, name = m.groups()
        if kind == "impl":
            return broken_impl(IMPLS[name])
        path = tmp / f"{name}.{'pt' if kind == 'inputs' else 'dat'}"
        if kind == "file":
            path.write_bytes(FILES[name])
        else:
            import torch

            config = CaseConfig(**INPUT_FIELDS)
            assert config.cli_args() == INPUT_CASE
            torch.save(_inputs_builders()[name](generate_inputs(config).tensors()), path)
        return str(path)

    return [one(a) for a in argv]


def _world(tmp: Path) -> None:
    """Files every row may name: a plain file, a corrupt run, report folders."""
    (tmp / "afile").write_text("a file, not a folder\n")
    (tmp / "readonly").mkdir()
    (tmp / "readonly").chmod(0o500)
    bad = tmp / "runs" / "bad"
    bad.mkdir(parents=True)
    (bad / "results.csv").write_text("case_id,status\n\x00\x01garbage,\"unterminated\n")
    (bad / "run.json").write_text("{not json")
    (tmp / "emptyreport").mkdir()
    report = tmp / "badreport"
    report.mkdir()
    (report / "config.json").write_text('{"config": {"tokens": "abc"}, "case_id": "000000000000"}')
    (report / "verdict.json").write_text('{"status": 5}')
    (report / "inputs.pt").write_bytes(b"only the config is looked at first")
    _report_with_bad_verdict(tmp / "badverdict")
    _report_with_bad_call(tmp / "badcall")


def _report_with_bad_call(folder: Path) -> None:
    """A rejection call's report whose config.json names a call that is none."""
    import json

    _report_with_bad_verdict(folder)
    data = json.loads((folder / "config.json").read_text())
    data["rejection"] = {"id": "x", "precondition": "p", "base": data["config"]}  # changes nothing
    (folder / "config.json").write_text(json.dumps(data))


def _report_with_bad_verdict(folder: Path) -> None:
    """A report whose config and inputs are sound and whose verdict.json has wrong types."""
    import json

    import torch

    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    config = CaseConfig(topk=128, tokens=1)
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"config": config.to_dict(), "case_id": config.case_id}))
    (folder / "verdict.json").write_text(json.dumps({"verdict": {"status": 5, "failures": "many"},
                                                      "a": {"name": 1}, "b": {"name": ["new"]}}))
    torch.save(generate_inputs(config).tensors(), folder / "inputs.pt")


API_CALLS = {
    "tokens_str": lambda api: api.CaseConfig(tokens="3"),
    "tokens_bool": lambda api: api.CaseConfig(tokens=True),
    "compact_str": lambda api: api.CaseConfig(compact="no"),
    "ratio_bool": lambda api: api.CaseConfig(invalid_ratio=True),
    "seed_float": lambda api: api.CaseConfig(seed=1.5),
    "mode_none": lambda api: api.CaseConfig(mode=None),
    "ratio_int": lambda api: _same(api.CaseConfig(invalid_ratio=0), api.CaseConfig(invalid_ratio=0.0)),
    "from_dict_word": lambda api: api.CaseConfig.from_dict({"tokens": "x"}),
    "from_dict_fraction": lambda api: api.CaseConfig.from_dict({"tokens": 2.5}),
    "from_dict_unknown": lambda api: api.CaseConfig.from_dict({"tokenz": 1}),
    "from_dict_bool_word": lambda api: api.CaseConfig.from_dict({"compact": "maybe"}),
    "run_case_empty_impl": lambda api: api.run_case(api.CaseConfig(topk=128, tokens=1), "old", ""),
    "run_case_bad_inputs": lambda api: _run_with_bad_req_id(api),
}


def _same(a, b):
    assert a == b and a.case_id == b.case_id and isinstance(a.invalid_ratio, float)


def _run_with_bad_req_id(api):
    import torch

    config = api.CaseConfig(topk=128, tokens=2)
    inputs = api.generate_inputs(config)
    inputs.req_id = torch.tensor([9, 0], dtype=torch.int32)
    api.run_case(config, inputs=inputs)


def _needs(r: Hostile):
    if r.needs == "cpu" and runtime.cuda_available():
        pytest.skip("a CPU-only refusal: this machine has CUDA")
    if r.needs == "gpu" and not runtime.cuda_available():
        pytest.skip("needs a CUDA device")
    if r.needs == "non-root" and hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")


class _StillRunning(BaseException):
    """Raised by the row's timer: no ``except Exception`` of the command catches it."""


def _run_inproc(argv, capsys, timeout) -> tuple[int, str, str]:
    from remap_ab import cli

    def stop(signum, frame):
        raise _StillRunning

    timed = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    if timed:
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse's own exits
        status = exc.code if isinstance(exc.code, int) else 1
    except _StillRunning:
        pytest.fail(f"still running after {timeout:.0f} s: the command did not refuse the input")
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return status, out, err


def _run_subprocess(argv, env, timeout, closed_stdout=False) -> tuple[int, str, str]:
    stdout: int = subprocess.PIPE
    if closed_stdout:
        # A pipe whose reader is gone before the first byte (`| head` at its quickest).
        read_end, stdout = os.pipe()
        os.close(read_end)
    # A new session, so a command that starts workers is killed with all of them.
    proc = subprocess.Popen([sys.executable, "-m", "remap_ab", *argv], stdout=stdout, stderr=subprocess.PIPE,
                            env=env, text=True, start_new_session=True)
    if closed_stdout:
        os.close(stdout)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"still running after {timeout:.0f} s: the command did not refuse the input")
    return proc.returncode, out or "", err


@pytest.mark.parametrize("r", ROWS, ids=[r.id for r in ROWS])
def test_hostile_input(r: Hostile, tmp_path, broken_impl, capsys):
    _needs(r)
    if r.argv[0] == "api":
        _check_api(r)
        return
    _world(tmp_path)
    try:
        argv = _resolve(r.argv, tmp_path, broken_impl)
        env = broken_impl.env()
        if r.how == "inproc":
            status, out, err = _run_inproc(argv, capsys, r.timeout)
        else:
            status, out, err = _run_subprocess(argv, env, r.timeout, closed_stdout=r.how == "closed-stdout")
    finally:
        (tmp_path / "readonly").chmod(0o700)
    where = f"[owner: {r.owner}] remap-ab {' '.join(argv)}"
    assert "Traceback" not in err, f"{where}: traceback\n{err}"
    assert status == r.status, f"{where}: exit {status}, expected {r.status}\nstderr: {err}\nstdout: {out[-2000:]}"
    if r.status in (2, 3):
        assert err.count("\n") == 1 and err.endswith("\n"), f"{where}: stderr is not one line:\n{err}"
        assert r.fragment in err, f"{where}: {r.fragment!r} not in {err!r}"
    elif r.status == 141:
        assert err == "", f"{where}: a closed stdout must end quietly, got {err!r}"
    else:
        assert r.fragment in out, f"{where}: {r.fragment!r} not in stdout:\n{out[-2000:]}"


def _check_api(r: Hostile) -> None:
    import remap_ab as api
    from remap_ab.errors import RemapABError

    call = API_CALLS[r.argv[1]]
    if r.status == 0:
        call(api)
        return
    with pytest.raises(RemapABError) as info:
        call(api)
    message = str(info.value)
    assert info.value.exit_code == r.status
    assert "\n" not in message and r.fragment in message, message


def test_the_table_is_large_and_unambiguous():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 60
    assert {r.owner for r in ROWS} <= {"edges", "sweep", "report", "mutants", "bench"}
    assert all(r.how in ("inproc", "subprocess", "closed-stdout") for r in ROWS)
