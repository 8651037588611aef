"""API compatibility (SPEC §1): B must accept every call A accepts. Small modules that
add, drop or re-default a parameter of the wrappers, each delegating to kernels_new,
checked by signature, in run's header and exit status, and in the sweep's summary."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import kernels_new
import kernels_old
from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.subjects.remap.grid import api_compat
from remap_ab.subjects.remap.judge import registry

DEVICE = runtime.current()
CONVERT = ("req_id, block_table, token_indices, BLOCK_SIZE=64, NUM_TOPK_TOKENS=2048, BLOCK_N=128, "
           "HAS_PREFILL_WORKSPACE=False, prefill_workspace_request_ids=None, prefill_workspace_starts=None, "
           "return_valid_counts=False")
DCP = ("req_id, block_table, token_indices, dcp_size, dcp_rank, cp_kv_cache_interleave_size=1, BLOCK_SIZE=64, "
       "NUM_TOPK_TOKENS=2048, BLOCK_N=128, return_valid_counts=False, compact_valid_to_front=True")
VARIANTS = {
    "api_added": (CONVERT + ", BLOCK_STRIDE_ROWS=None", DCP + ", BLOCK_STRIDE_ROWS=None"),
    "api_dropped": (CONVERT.replace("HAS_PREFILL_WORKSPACE=False, ", ""), DCP),
    "api_redefaulted": (CONVERT.replace("BLOCK_N=128", "BLOCK_N=256"), DCP),
    "api_added_required": (CONVERT + ", *, BLOCK_STRIDE_ROWS", DCP),
    "api_moved": (CONVERT, DCP.replace("dcp_size, dcp_rank", "dcp_rank, dcp_size")),
}


def _module_text(convert: str, dcp: str) -> str:
    # Each wrapper hands its arguments, by name, to kernels_new's (which ignores nothing
    # it does not know: extra names are dropped here).
    return textwrap.dedent(f'''
        import inspect
        import kernels_new

        def _forward(fn, scope):
            names = inspect.signature(fn).parameters
            return fn(**{{k: v for k, v in scope.items() if k in names}})

        def triton_convert_req_index_to_global_index({convert}):
            return _forward(kernels_new.triton_convert_req_index_to_global_index, dict(locals()))

        def triton_filter_and_convert_dcp_index({dcp}):
            return _forward(kernels_new.triton_filter_and_convert_dcp_index, dict(locals()))
    ''')


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    for name, (convert, dcp) in VARIANTS.items():
        (root / f"{name}.py").write_text(_module_text(convert, dcp))
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for name in VARIANTS:
        registry.forget(name)
        sys.modules.pop(name, None)


def _lines(name):
    return api_compat.summary_lines(api_compat.check("old", name), "old", name)


def test_the_vendored_kernels_have_identical_signatures():
    assert api_compat.check_modules(kernels_old, kernels_new) == []
    assert _lines("new") == ["api: identical — new's SPEC §1 signatures are old's"]


def test_an_added_parameter_with_a_default_is_reported_not_failed(variants):
    diffs = api_compat.check("old", "api_added")
    assert not api_compat.fails(diffs) and [d.what for d in diffs] == ["added", "added"]
    assert _lines("api_added") == [
        "api: compatible — api_added accepts every call old accepts; differences reported:",
        "  note triton_convert_req_index_to_global_index: api_added adds BLOCK_STRIDE_ROWS=None (reported, not "
        "failed: old's callers keep working)",
        "  note triton_filter_and_convert_dcp_index: api_added adds BLOCK_STRIDE_ROWS=None (reported, not failed: "
        "old's callers keep working)",
    ]


def test_a_dropped_parameter_fails(variants):
    diffs = api_compat.check("old", "api_dropped")
    assert api_compat.fails(diffs)
    lines = _lines("api_dropped")
    assert lines[0] == "api: FAIL — api_dropped does not accept every call old accepts (1 incompatible parameter)"
    assert lines[1] == ("  FAIL triton_convert_req_index_to_global_index: api_dropped lacks parameter "
                        "'HAS_PREFILL_WORKSPACE' (old: default False): a call that passes it fails on api_dropped")
    # The parameters after it moved up one place: passed by keyword in practice, but a
    # positional call binds elsewhere: reported.
    assert "positional parameter 8 is 'prefill_workspace_request_ids'" in lines[2] and "not failed" in lines[2]


def test_a_changed_default_fails(variants):
    assert _lines("api_redefaulted") == [
        "api: FAIL — api_redefaulted does not accept every call old accepts (1 incompatible parameter)",
        "  FAIL triton_convert_req_index_to_global_index: 'BLOCK_N' has default 256 in api_redefaulted, default 128 "
        "in old: a call that leaves it out means something else",
    ]


def test_an_added_parameter_without_a_default_and_a_moved_required_one_fail(variants):
    assert any("adds 'BLOCK_STRIDE_ROWS' without a default" in line for line in _lines("api_added_required"))
    assert api_compat.fails(api_compat.check("old", "api_added_required"))
    moved = _lines("api_moved")
    assert moved[0].startswith("api: FAIL") and "positional parameter 4 is 'dcp_size'; api_moved has 'dcp_rank' there" in moved[1]


def test_a_b_that_takes_args_and_kwargs_is_one_note_per_function_not_one_per_parameter():
    fake = type(sys)("fake")
    fake.triton_convert_req_index_to_global_index = lambda *a, **k: kernels_new.triton_convert_req_index_to_global_index(*a, **k)
    fake.triton_filter_and_convert_dcp_index = kernels_new.triton_filter_and_convert_dcp_index
    diffs = api_compat.check_modules(kernels_old, fake, "old", "fake")
    (d,) = diffs
    assert d.what == "kwargs" and not d.fails and d.parameter.startswith("req_id, block_table, token_indices, ")
    assert "its **kwargs accepts them by name (and by position through its *args)" in d.line
    assert api_compat.summary_lines(diffs, "old", "fake")[0].startswith("api: compatible — fake accepts every call")


def test_an_unreadable_signature_is_said_unchecked_never_compatible():
    class Opaque:  # a callable whose signature inspect cannot read (as some C extensions)
        __signature__ = "unknown"

        def __call__(self, *args, **kwargs):
            return None

    fake = type(sys)("fake")
    fake.triton_convert_req_index_to_global_index = Opaque()
    fake.triton_filter_and_convert_dcp_index = kernels_new.triton_filter_and_convert_dcp_index
    diffs = api_compat.check_modules(kernels_old, fake, "old", "fake")
    assert [d.what for d in diffs] == ["unreadable"] and "fake's signature cannot be read" in diffs[0].line
    assert api_compat.summary_lines(diffs, "old", "fake")[0] == "api: not checked for 1 function(s) (signature unreadable)"


def test_run_says_it_in_its_header_and_exits_1_on_an_incompatible_b(variants, capsys):
    base = ["run", "--tokens", "1", "--topk", "128", "--device", DEVICE]
    assert cli_main([*base, "--b", "api_added"]) == 0
    out = capsys.readouterr().out
    assert "  api: compatible — api_added accepts every call old accepts" in out and "case " in out and "PASS" in out
    assert cli_main([*base, "--b", "api_redefaulted"]) == 1  # the case itself passes
    out = capsys.readouterr().out
    assert "  api: FAIL — api_redefaulted does not accept every call old accepts" in out
    assert cli_main([*base, "--b", "api_redefaulted", "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"]["status"] == "pass" and payload["api_compatible"] is False


def test_the_sweep_summary_says_it_and_fails_the_run(variants, tmp_path, capsys):
    args = ["sweep", "--device", DEVICE, "-j", "0", "--root", str(tmp_path), "--no-progress", "--filter", "tokens=1",
            "--filter", "k=128", "--filter", "path=convert", "--filter", "invalid=0", "--filter", "oor=off"]
    assert cli_main([*args, "--run", "added", "--b", "api_added"]) == 0
    assert "  api: compatible — api_added accepts every call old accepts" in capsys.readouterr().out
    assert cli_main([*args, "--run", "dropped", "--b", "api_dropped"]) == 1
    out = capsys.readouterr().out
    assert "  api: FAIL — api_dropped does not accept every call old accepts" in out
    assert "result: FAIL — api_dropped does not accept every call old accepts (api above)" in out
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["api_compatible"] is False and summary["passed"] is False
    assert cli_main(["report", "--root", str(tmp_path), "dropped"]) == 1
    assert "api: FAIL" in capsys.readouterr().out
