"""Recording real calls and replaying them (docs/traces.md), as a user would: a small
serving loop calls kernels_main's functions through ``remap_ab.record``; the trace is
replayed by ``remap-ab sweep --trace`` against a correct B (pass) and against a B broken
on one recorded signature only (fail, that signature named). Also: unreadable trace
files, the disk cap, deduplication, results unchanged, and the ``REMAP_AB_RECORD`` hook."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

import kernels_main
import remap_ab
from remap_ab import runtime
from remap_ab.cli import main as cli_main
from remap_ab.errors import UsageError
from remap_ab.subjects.remap.trace_subject import NAME as TRACE_SUBJECT
from remap_ab.traces import trace_file

ROOT = Path(__file__).resolve().parent.parent
K = 2048  # DeepSeek's index width
BLOCK, WIDTH, SLOTS, STRIDE = 64, 32, 4, 4096
PREFILL_ROWS = 16
# Where this process runs kernels (the plugin chose it): the loop records there and the trace replays there.
DEVICE = runtime.default_device()


def serving_calls(device: str = DEVICE, decode_steps: int = 3) -> list:
    """A small serving loop's calls, as ``(function name, args, kwargs)``: decode steps
    of 2-3 requests into caller-owned buffers with a packed cache's block stride, one
    chunked-prefill step from the prefill workspace, one DCP decode step. The persistent
    block table is a column slice of a wider one. Made ahead of ``serve`` so that on a
    GPU only the calls run where host syncs are watched."""
    g = torch.Generator().manual_seed(0)
    table = torch.randint(0, 5000, (SLOTS, WIDTH + 8), dtype=torch.int32, generator=g).to(device)[:, :WIDTH]
    out_buf = torch.full((64, K), -7, dtype=torch.int32, device=device)
    counts_buf = torch.zeros(64, dtype=torch.int32, device=device)
    convert, dcp = "triton_convert_req_index_to_global_index", "triton_filter_and_convert_dcp_index"
    calls: list = []
    for step in range(decode_steps):
        rows = 2 + step % 2
        ids = torch.randint(-1, WIDTH * BLOCK, (rows, K), dtype=torch.int32, generator=g).to(device)
        calls.append((convert, (torch.arange(rows, dtype=torch.int32, device=device), table, ids),
                      dict(BLOCK_SIZE=BLOCK, BLOCK_STRIDE_ROWS=STRIDE, NUM_TOPK_TOKENS=K, return_valid_counts=True,
                           out=out_buf[:rows], valid_counts_out=counts_buf[:rows])))
    ids = torch.randint(-1, 700, (PREFILL_ROWS, K), dtype=torch.int32, generator=g)
    ids[0, 0] = 5  # lane (0, 0) valid: the broken B below changes it
    calls.append((convert, (torch.full((PREFILL_ROWS,), 1, dtype=torch.int32, device=device), table, ids.to(device)),
                  dict(BLOCK_SIZE=BLOCK, NUM_TOPK_TOKENS=K, HAS_PREFILL_WORKSPACE=True,
                       prefill_workspace_request_ids=torch.zeros(PREFILL_ROWS, dtype=torch.int32, device=device),
                       prefill_workspace_starts=torch.tensor([100], dtype=torch.int32, device=device),
                       return_valid_counts=True)))
    ids = torch.randint(-1, WIDTH * BLOCK * 2, (2, K), dtype=torch.int32, generator=g).to(device)
    calls.append((dcp, (torch.arange(2, dtype=torch.int32, device=device), table, ids, 2, 1),
                  dict(BLOCK_SIZE=BLOCK, NUM_TOPK_TOKENS=K, return_valid_counts=True)))
    return calls


def serve(calls: list) -> list:
    """Make ``calls``, each function looked up on kernels_main at the call as a backend
    does; each call's outputs, copied (the caller's buffers are reused)."""
    results = []
    for name, args, kwargs in calls:
        out, counts = getattr(kernels_main, name)(*args, **kwargs)
        if "out" in kwargs:
            assert out is kwargs["out"]  # the caller's buffer itself, as the backend relies on
        results.append((out.clone(), counts.clone()))
    return results


# kernels_main, wrong in lane (0, 0) of calls from the prefill workspace only: one signature of the trace.
BROKEN_ON_PREFILL = """
import functools
import torch
import kernels_main as _real

_remap_tiling = _real._remap_tiling
triton_filter_and_convert_dcp_index = _real.triton_filter_and_convert_dcp_index


@functools.wraps(_real.triton_convert_req_index_to_global_index)
def triton_convert_req_index_to_global_index(*args, **kwargs):
    res = _real.triton_convert_req_index_to_global_index(*args, **kwargs)
    if kwargs.get("HAS_PREFILL_WORKSPACE"):
        out = res[0]
        out[0, 0] = torch.where(out[0, 0] >= 0, out[0, 0] + 1, out[0, 0])
    return res
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """The loop recorded (every call sampled), beside the loop's own results unrecorded."""
    folder = tmp_path_factory.mktemp("trace") / "calls"
    plain = serve(serving_calls())
    originals = (kernels_main.triton_convert_req_index_to_global_index, kernels_main.triton_filter_and_convert_dcp_index)
    finders = list(sys.meta_path)
    with remap_ab.record(folder, module="kernels_main", every=1) as rec:
        assert kernels_main.triton_convert_req_index_to_global_index is not originals[0]
        recorded = serve(serving_calls())
    after = (kernels_main.triton_convert_req_index_to_global_index, kernels_main.triton_filter_and_convert_dcp_index)
    return folder, plain, recorded, rec.stats, originals, after, finders


def _sweep(folder, root, b, *more) -> int:
    return cli_main(["sweep", "--trace", str(folder), "--a", "main", "--b", b, "-j", "0", "--device", DEVICE,
                     "--root", str(root), "--no-progress", *more])


def _signatures(folder) -> dict:
    """Signature -> the samples recorded under it."""
    out: dict = {}
    for path in trace_file.files(folder):
        s = trace_file.read(path)
        out.setdefault(s.signature, []).append(s)
    return out


def test_recording_changes_no_result_and_restores_the_module(trace):
    folder, plain, recorded, stats, originals, after, finders = trace
    for x, y in zip(plain, recorded):
        assert all(torch.equal(a, b) for a, b in zip(x, y))
    assert after == originals and sys.meta_path == finders
    assert stats["written"] == 5 and not stats["errors"]
    sigs = _signatures(folder)
    assert len(sigs) == 4  # decode at 2 rows (twice) and 3 rows, the prefill step, the DCP step
    prefill = next(s for v in sigs.values() for s in v if s.params["HAS_PREFILL_WORKSPACE"])
    assert set(prefill.tensors) == {"req_id", "block_table", "token_indices", "prefill_workspace_request_ids",
                                    "prefill_workspace_starts"}
    decode = next(s for v in sigs.values() for s in v if s.buffers)
    # caller buffers are outputs: their layout is recorded, not their values
    assert set(decode.buffers) == {"out", "valid_counts_out"} and "out" not in decode.tensors
    assert decode.buffers["out"]["stride"] == [K, 1] and decode.params["BLOCK_STRIDE_ROWS"] == STRIDE
    assert decode.strides["block_table"]["stride"] == [WIDTH + 8, 1]  # the column slice, as the caller passed it
    manifest = trace_file.manifests(folder)
    assert sum(e["calls"] for m in manifest for e in m["signatures"]) == 5


def test_trace_replays_against_a_correct_b(trace, tmp_path, capsys):
    folder = trace[0]
    assert _sweep(folder, tmp_path / "runs", "main", "--run", "ok") == 0
    captured = capsys.readouterr()
    err, out = captured.err, captured.out
    assert f"trace {folder}: 5 recorded calls of 4 signatures; 5 calls counted by 1 recording process" in err
    assert "rows (T): 2, 3, 16" in err and "BLOCK_STRIDE_ROWS: 4096@64 (3)" in err
    assert "caller buffers: out= (2, 2048) strides (2048, 1) (2)" in err
    assert f"block_table ({SLOTS}, {WIDTH}) strides ({WIDTH + 8}, 1)" in err and "table_slice" in err
    assert "DCP: size 2 rank 1 interleave 1, compacted (1)" in err
    # rows 2 and 3 are no row count of the declared envelope; the trace leaves most cells untouched
    assert "convert:rows=2 (2)" in err and "convert:rows=3 (1)" in err and "dcp:rows=2 (1)" in err
    assert "envelope cells the trace does not touch: " in err and "convert:rows=16384" in err
    assert "result: PASS — every case passed: 5/5 on the recorded calls" in out
    sigs = [line.split() for line in err.splitlines() if line.startswith("    ") and "T=" in line]
    assert len(sigs) == 4 and sorted(int(words[1].rstrip(";")) for words in sigs) == [1, 1, 1, 2]
    df = pd.read_csv(tmp_path / "runs" / "ok" / "results.csv", keep_default_na=False)
    assert len(df) == 5 and set(df.status) == {"pass"} and df.signature.nunique() == 4


def test_trace_fails_on_the_one_broken_signature(trace, tmp_path, capsys, broken_impl):
    folder = trace[0]
    b = broken_impl(BROKEN_ON_PREFILL)
    assert _sweep(folder, tmp_path / "runs", b, "--run", "broken") == 1
    out = capsys.readouterr().out
    prefill = next(sig for sig, v in _signatures(folder).items() if v[0].params["HAS_PREFILL_WORKSPACE"])
    df = pd.read_csv(tmp_path / "runs" / "broken" / "results.csv", keep_default_na=False)
    failed = df[df.status != "pass"]
    assert list(failed.signature) == [prefill] and list(failed.check) == ["out"] and list(failed.mismatch_lanes) == [1]
    assert (f"FAILING signature {prefill} (convert T={PREFILL_ROWS} K={K} BLOCK_N=128 B={BLOCK} W={WIDTH} Rq={SLOTS}, "
            "prefill workspace, counts, table_slice inputs): 1 of 1 recorded calls") in out
    report = tmp_path / "runs" / "broken" / failed.report.iloc[0]
    assert f"replay: remap-ab replay {report}" in out
    assert "result: FAIL — not every case passed" in out
    # the report keeps the recorded inputs: its replay runs them again and fails again
    assert cli_main(["replay", str(report)]) == 1
    assert "reproduced: yes" in capsys.readouterr().out


def test_unreadable_files_are_one_line_each_and_the_rest_runs(trace, tmp_path, capsys):
    folder = tmp_path / "calls"
    shutil.copytree(trace[0], folder)
    files = trace_file.files(folder)
    truncated, corrupt, other = files[0], files[1], folder / "9-0000001-000000000000.pt.gz"
    truncated.write_bytes(truncated.read_bytes()[:200])
    corrupt.write_bytes(gzip.compress(b"not a torch file"))
    sample = trace_file.read(files[2])
    sample.subject = "topology"
    other.write_bytes(trace_file.dumps(sample))
    sample = trace_file.read(files[3])
    sample.tensors["req_id"][0] = SLOTS  # past the block table's rows: no valid call (SPEC §2)
    (folder / files[3].name).write_bytes(trace_file.dumps(sample))
    assert _sweep(folder, tmp_path / "runs", "main", "--run", "bad") == 1
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if "ERROR trace file" in line]
    assert len(errors) == 4 and "Traceback" not in captured.err
    assert any(files[3].name in e and "req_id" in e and "block_table rows" in e for e in errors)
    assert any(str(truncated) in e and "cut short or is corrupt" in e for e in errors)
    assert any(str(corrupt) in e and "not a remap-ab trace sample" in e for e in errors)
    assert any(str(other) in e and "records subject 'topology'" in e for e in errors)
    df = pd.read_csv(tmp_path / "runs" / "bad" / "results.csv", keep_default_na=False)
    assert len(df) == 2 and set(df.status) == {"pass"}  # the five files less the three spoiled ones
    assert "result: FAIL — 4 trace files could not be read or hold no call of the remap" in captured.out


def _decode_call(rows: int, seed: int, **kw):
    g = torch.Generator().manual_seed(seed)
    table = torch.randint(0, 5000, (SLOTS, WIDTH), dtype=torch.int32, generator=g).to(DEVICE)
    ids = torch.randint(-1, WIDTH * BLOCK, (rows, K), dtype=torch.int32, generator=g).to(DEVICE)
    return kernels_main.triton_convert_req_index_to_global_index(
        torch.arange(rows, dtype=torch.int32, device=DEVICE) % SLOTS, table, ids, BLOCK_SIZE=BLOCK, NUM_TOPK_TOKENS=K,
        **kw)


def test_identical_calls_are_written_once_and_unsampled_calls_not_at_all(tmp_path):
    with remap_ab.record(tmp_path / "same", module="kernels_main", every=1) as rec:
        for _ in range(3):
            _decode_call(1, seed=1)
    assert rec.stats["written"] == 1 and rec.stats["duplicates"] == 2
    with remap_ab.record(tmp_path / "every", module="kernels_main", every=4) as rec:
        for i in range(6):
            _decode_call(1, seed=i)  # calls 1 and 5 of the signature are sampled
        _decode_call(2, seed=0)  # a new shape: sampled
    sigs = _signatures(tmp_path / "every")
    assert sorted(len(v) for v in sigs.values()) == [1, 2]
    assert sorted(s.call for v in sigs.values() for s in v if s.tensors["req_id"].numel() == 1) == [1, 5]
    counted = {e["signature"]: e["calls"] for m in trace_file.manifests(tmp_path / "every") for e in m["signatures"]}
    assert sorted(counted.values()) == [1, 6]


def test_the_cap_keeps_each_signatures_oldest_samples(tmp_path):
    one = len(trace_file.dumps(trace_file.read(next(iter(_record_some(tmp_path / "probe", 1, 1e3))))))
    folder = tmp_path / "capped"
    files = _record_some(folder, 8, cap_mb=3.5 * one / 1e6, new_shape_last=True)
    total = sum(p.stat().st_size for p in files)
    assert total <= 3.5 * one
    sigs = _signatures(folder)
    assert len(sigs) == 2  # the last call's new shape made room for itself
    kept = sorted(s.call for v in sigs.values() for s in v if s.tensors["req_id"].numel() == 1)
    assert kept == list(range(1, len(kept) + 1)) and len(kept) >= 1  # the oldest, without a gap


def _record_some(folder, calls: int, cap_mb: float, new_shape_last: bool = False) -> list:
    with remap_ab.record(folder, module="kernels_main", every=1, cap_mb=cap_mb):
        for i in range(calls):
            _decode_call(1, seed=i)
        if new_shape_last:
            _decode_call(2, seed=0)
    return trace_file.files(folder)


def test_recorder_refuses_bad_settings_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="has none of triton_convert"):
        remap_ab.record(tmp_path, module="json").__enter__()
    with pytest.raises(UsageError, match="every=0"):
        remap_ab.record(tmp_path, every=0)
    with pytest.raises(UsageError, match="cannot import module"):
        remap_ab.record(tmp_path, module="no_such_module_here").__enter__()


HOOKED = """
import remap_ab.traces.hook as hook
import sys
assert "kernels_main" not in sys.modules and "torch" not in sys.modules  # nothing imported early
from remap_ab import runtime
runtime.select("cpu")
from kernels_main import triton_convert_req_index_to_global_index as convert
import torch
assert getattr(convert, "__remap_ab_recorded__", None) is not None, "not wrapped at import"
convert(torch.zeros(1, dtype=torch.int32), torch.zeros((1, 4), dtype=torch.int32),
        torch.full((1, 128), -1, dtype=torch.int32), NUM_TOPK_TOKENS=128)
print("hook", hook.RECORDER is not None)
"""


def test_the_environment_hook_records_a_process_it_did_not_start(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "REMAP_AB_RECORD": str(tmp_path / "hooked"), "REMAP_AB_RECORD_MODULE": "kernels_main"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(HOOKED)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "hook True" in done.stdout
    (sample,) = [trace_file.read(p) for p in trace_file.files(tmp_path / "hooked")]
    assert sample.function == "triton_convert_req_index_to_global_index" and sample.module == "kernels_main"
    unset = {k: v for k, v in env.items() if k != "REMAP_AB_RECORD"}
    done = subprocess.run([sys.executable, "-c", "import remap_ab.traces.hook as h, sys; "
                           "print(h.RECORDER, 'kernels_main' in sys.modules)"], env=unset, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.split() == ["None", "False"], done.stderr


def test_trace_option_conflicts_and_an_empty_folder_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert _sweep(tmp_path / "empty", tmp_path / "runs", "main") == 2
    assert "holds no trace files" in capsys.readouterr().err
    assert cli_main(["sweep", "--trace", str(tmp_path), "--grid", "pr"]) == 2
    assert "drop --grid" in capsys.readouterr().err
    assert _sweep(tmp_path / "empty", tmp_path / "runs", "main", "--filter", "tokens=1") == 2
    assert "takes only --filter case=ID" in capsys.readouterr().err
    assert _sweep(tmp_path / "empty", tmp_path / "runs", "main", "--max-tokens", "4") == 2
    assert "--max-tokens does not apply to a trace" in capsys.readouterr().err
    assert TRACE_SUBJECT.endswith(":SUBJECT")


@pytest.mark.gpu
def test_recording_on_cuda_syncs_nothing_and_keeps_the_stream(tmp_path):
    """On a GPU: outputs unchanged, the caller's stream current and its outputs ready on
    it, and no host synchronisation in the caller's thread on sampled or unsampled calls."""
    calls = serving_calls("cuda")
    plain = serve(calls)  # the first calls compile outside the sync check
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with remap_ab.record(tmp_path / "gpu", module="kernels_main", every=2) as rec:
        with torch.cuda.stream(stream):
            torch.cuda.set_sync_debug_mode("error")
            try:
                recorded = serve(calls + calls)
            finally:
                torch.cuda.set_sync_debug_mode(0)
            assert torch.cuda.current_stream() == stream
    torch.cuda.synchronize()
    for x, y in zip(plain + plain, recorded):
        assert all(torch.equal(a, b) for a, b in zip(x, y))
    assert not rec.stats["errors"] and rec.stats["written"] >= 4
    assert all(s.tensors["token_indices"].device.type == "cpu" for v in _signatures(tmp_path / "gpu").values() for s in v)
    assert json.loads(next((tmp_path / "gpu").glob("calls-*.json")).read_text())["stats"]["sampled"] >= 4



def test_importing_remap_ab_loads_no_recorder_and_record_is_served_on_first_use():
    code = ("import sys, remap_ab\n"
            "print(sorted(m for m in sys.modules if m.startswith('remap_ab.traces') or m == 'torch'))\n"
            "from remap_ab.traces import recorder\n"
            "print(remap_ab.record is recorder.record)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True"]


def test_a_recorded_call_crosses_to_a_worker_as_a_dict(trace):
    from remap_ab.subjects.remap.parts.trace_case import TraceCase, case_of

    path = trace_file.files(trace[0])[0]
    sample = trace_file.read(path)
    config, inputs = case_of(sample)
    case = TraceCase(str(path), sample.signature, config)
    assert TraceCase.from_dict(json.loads(json.dumps(case.to_dict()))) == case
    assert torch.equal(inputs.token_indices, sample.tensors["token_indices"])
    # the seed is a digest of the inputs: another call of the signature is another case
    other = next(p for p in trace_file.files(trace[0]) if p != path and trace_file.read(p).signature == sample.signature)
    assert case_of(trace_file.read(other))[0].case_id != config.case_id


@pytest.mark.gpu
def test_a_call_under_cuda_graph_capture_is_counted_not_sampled(tmp_path):
    name, args, kwargs = serving_calls("cuda")[0]
    function = getattr(kernels_main, name)
    function(*args, **kwargs)  # compiled outside the capture
    torch.cuda.synchronize()
    with remap_ab.record(tmp_path / "graph", module="kernels_main", every=1) as rec:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            getattr(kernels_main, name)(*args, **kwargs)  # sampled: a new signature
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            getattr(kernels_main, name)(*args, **kwargs)
        graph.replay()
        torch.cuda.synchronize()
    assert rec.stats["in_graph_capture"] == 1 and rec.stats["written"] == 1 and not rec.stats["errors"]


def _stub_kernels():
    """A module holding the two functions, launching nothing (a forked child runs no kernel)."""
    module = types.ModuleType("stub_kernels")

    def triton_convert_req_index_to_global_index(req_id, block_table, token_indices, BLOCK_SIZE=64,
                                                 NUM_TOPK_TOKENS=2048, BLOCK_N=128, return_valid_counts=False):
        return token_indices

    module.triton_convert_req_index_to_global_index = triton_convert_req_index_to_global_index
    return module


def test_a_forked_child_records_on_its_own(tmp_path):
    folder, stub = tmp_path / "forked", _stub_kernels()
    args = (torch.zeros(1, dtype=torch.int32), torch.zeros((1, 4), dtype=torch.int32))
    with remap_ab.record(folder, module=stub, every=1) as rec:
        stub.triton_convert_req_index_to_global_index(*args, torch.zeros((1, 128), dtype=torch.int32))
        child = os.fork()
        if child == 0:  # the child: one call of its own, then out without the parent's exit handlers
            try:
                stub.triton_convert_req_index_to_global_index(*args, torch.ones((1, 128), dtype=torch.int32))
                rec.stop()
            finally:
                os._exit(0)
        os.waitpid(child, 0)
    by_pid: dict = {}
    for path in trace_file.files(folder):
        by_pid.setdefault(trace_file.read(path).pid, []).append(path)
    assert sorted(by_pid) == sorted([os.getpid(), child]) and all(len(v) == 1 for v in by_pid.values())
    counts = {m["pid"]: sum(e["calls"] for e in m["signatures"]) for m in trace_file.manifests(folder)}
    assert counts == {os.getpid(): 1, child: 1}


def test_calls_neither_side_takes_are_not_run_and_the_run_is_not_pass(trace, tmp_path, capsys):
    code = cli_main(["sweep", "--trace", str(trace[0]), "-j", "0", "--device", DEVICE, "--root", str(tmp_path),
                     "--no-progress", "--run", "oldnew"])  # old and new take no stride, no caller buffers
    captured = capsys.readouterr()
    assert code == 1
    assert "NOT RUN: 3 recorded calls pass a parameter that neither A (old) nor B (new) takes" in captured.err
    assert "result: FAIL — 3 recorded calls not run" in captured.out
    assert len(pd.read_csv(tmp_path / "oldnew" / "results.csv")) == 2


def test_an_argument_the_recorder_cannot_describe_still_reaches_the_call(tmp_path):
    stub = _stub_kernels()
    seen = []
    real = stub.triton_convert_req_index_to_global_index

    def convert(req_id, block_table, token_indices, BLOCK_SIZE=64, NUM_TOPK_TOKENS=2048, BLOCK_N=128,
                return_valid_counts=False):
        seen.append(BLOCK_SIZE)
        return real(req_id, block_table, token_indices)

    class Unhashable(int):
        __hash__ = None

    stub.triton_convert_req_index_to_global_index = convert
    x = torch.zeros((1, 128), dtype=torch.int32)
    with remap_ab.record(tmp_path / "odd", module=stub, every=1) as rec:
        assert stub.triton_convert_req_index_to_global_index(x[0], x, x, BLOCK_SIZE=Unhashable(64)) is x
    assert seen == [64] and len(rec.stats["errors"]) == 1


def test_a_writer_that_falls_behind_drops_samples_and_holds_no_copies(tmp_path, monkeypatch):
    from remap_ab.traces import recorder

    monkeypatch.setattr(recorder, "MAX_PENDING", 0)  # the writer is always "behind"
    stub = _stub_kernels()
    x = torch.zeros((2, 128), dtype=torch.int32)
    with remap_ab.record(tmp_path / "busy", module=stub, every=1) as rec:
        for _ in range(3):
            assert stub.triton_convert_req_index_to_global_index(x[:, 0], x, x) is x
    assert rec.stats["dropped_busy"] == 3 and rec.stats["sampled"] == 0 and rec._pending_bytes == 0
    assert trace_file.files(tmp_path / "busy") == []


CAPTURE_BESIDE_A_POLLER = textwrap.dedent('''
    import json, sys, threading, time
    import torch
    from remap_ab.traces import recorder

    def poll(relaxed, stop, errors):
        if relaxed:
            recorder.leave_other_threads_captures_alone()
        side = torch.cuda.Stream()
        while not stop.is_set():
            done = torch.cuda.Event()
            done.record(side)
            try:
                done.query()  # what the writer thread does while its copies run
            except Exception as exc:
                errors.append(type(exc).__name__)
                return
            time.sleep(0.0002)

    relaxed = sys.argv[1] == "relaxed"
    stop, errors = threading.Event(), []
    x = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    thread = threading.Thread(target=poll, args=(relaxed, stop, errors))
    thread.start()
    time.sleep(0.05)
    graph, captured = torch.cuda.CUDAGraph(), True
    try:
        with torch.cuda.graph(graph):  # global mode: torch's default, vLLM's
            for _ in range(50):
                x.add_(1)
                time.sleep(0.002)  # the poller queries while this capture runs
    except Exception:
        captured = False
    stop.set()
    thread.join()
    print(json.dumps({"captured": captured, "poller_errors": errors}))
''')


@pytest.mark.gpu
def test_the_writer_thread_s_cuda_calls_leave_another_thread_s_graph_capture_alone():
    def run(mode: str) -> dict:
        done = subprocess.run([sys.executable, "-c", CAPTURE_BESIDE_A_POLLER, mode], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run("relaxed") == {"captured": True, "poller_errors": []}
    # The control: a thread in the default mode that queries an event breaks the capture.
    assert run("default")["captured"] is False
