"""The GPU memcheck's parser and its refusals, on sample compute-sanitizer output written
from the tool's documented memcheck format (the child itself needs a GPU: see the
README's GPU memcheck command)."""

import os
import stat
import time
from pathlib import Path

import pytest

from remap_ab import runtime
from remap_ab.errors import SanitizerError
from remap_ab.sanitizer import compute as sanitizer
from remap_ab.status import Check
from remap_ab.subjects.remap.judge.call import MEMCHECK_CHILD as CHILD

KERNEL = "_convert_req_index_to_global_index_kernel"

ONE_PAST_THE_TABLE = f"""\
========= COMPUTE-SANITIZER
REMAP-AB-SANITIZER-CASE 0 8cc001b337aa
REMAP-AB-SANITIZER-TENSOR req_id 0x7f0a1e000000 8
REMAP-AB-SANITIZER-TENSOR block_table 0x7f0a1e000200 16
REMAP-AB-SANITIZER-TENSOR token_indices 0x7f0a1e000400 1024
========= Invalid __global__ read of size 4 bytes
=========     at {KERNEL}+0x2d0 in /work/oob/_remap.py:78
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f0a1e000210 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0a1e000200 of size 16 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2d0] in libcuda.so.1
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
REMAP-AB-SANITIZER-TENSOR out 0x7f0a1e000800 1024
REMAP-AB-SANITIZER-DONE 1
========= ERROR SUMMARY: 2 errors
"""

OLD_SPELLING_WRITE_BEFORE = """\
========= COMPUTE-SANITIZER
REMAP-AB-SANITIZER-CASE 0 x
========= Invalid __global__ write of size 4 bytes
=========     at 0x00000160 in /tmp/demo.cu:11:out_of_bounds_kernel(int*)
=========     by thread (37,0,0) in block (2,3,0)
=========     Address 0x7fb0d5fffff8 is out of bounds
=========     and is 8 bytes before the nearest allocation at 0x7fb0d6000000 of size 1,024 bytes
=========
REMAP-AB-SANITIZER-DONE 1
========= ERROR SUMMARY: 1 error
"""

# Measured: the H200's compute-sanitizer on the row_end mutant of tests/memcheck_support.py
# (2026-11-30; the host backtrace shortened). It spells the address "Access to".
MEASURED_ON_THE_H200 = f"""\
========= COMPUTE-SANITIZER
REMAP-AB-SANITIZER-CASE 0 475880512d15
REMAP-AB-SANITIZER-TENSOR req_id 0x7ff5aa800000 8
REMAP-AB-SANITIZER-TENSOR block_table 0x7ff5aa800200 32
REMAP-AB-SANITIZER-TENSOR token_indices 0x7ff5aa800400 2048
========= Invalid __global__ read of size 4 bytes
=========     at {KERNEL}+0x220 in _remap.py:76
=========     by thread (32,0,0) in block (0,0,0)
=========     Access to 0x7ff5aa800220 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7ff5aa800200 of size 32 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: launch [0x20cc] in __triton_launcher.cpython-312-x86_64-linux-gnu.so
=========         Host Frame: _launch in _remap.py:127
=========
REMAP-AB-SANITIZER-TENSOR out 0x7ff5aa800c00 2048
REMAP-AB-SANITIZER-DONE 1
========= ERROR SUMMARY: 1 error
"""

CLEAN = """\
========= COMPUTE-SANITIZER
REMAP-AB-SANITIZER-CASE 0 a
REMAP-AB-SANITIZER-CASE 1 b
REMAP-AB-SANITIZER-DONE 2
========= ERROR SUMMARY: 0 errors
"""


def _memcheck_failures(report, replay: str) -> list:
    """The memcheck failures ``compare`` builds from ``report``."""
    from remap_ab.subjects.remap.judge.compare import Output, _memcheck_failures

    failures: list = []
    _memcheck_failures(Output(report.label, None, None, None, memcheck=report), replay, failures)  # type: ignore[arg-type]
    return failures


def test_a_read_one_past_the_block_table():
    (report,) = sanitizer.reports_from_output(ONE_PAST_THE_TABLE, "oob", 1)
    assert not report.clean and report.source == "compute-sanitizer"
    (f,) = report.findings  # the launch failure that follows is the same error's echo
    assert (f.kind, f.kernel, f.row, f.col, f.program) == ("load", KERNEL, 1, -1, (1, 0, 0))
    assert (f.nearest, f.address, f.itemsize, f.bytes_after_end, f.elements_past_last) == ("block_table", 0x7F0A1E000210, 4, 0, 1)
    assert "1 element past the last element of block_table (4 elements of 4 bytes" in f.describe()
    assert "by thread (0, 0, 0)" in f.describe()
    (m,) = _memcheck_failures(report, "remap-ab run --memcheck")
    assert m.check == Check.MEMCHECK and m.impl == "oob" and m.row == 1 and m.message.endswith("replay: remap-ab run --memcheck")


def test_the_h200s_access_to_spelling_names_the_block_table():
    (report,) = sanitizer.reports_from_output(MEASURED_ON_THE_H200, "oob", 1)
    (f,) = report.findings
    assert (f.kind, f.kernel, f.row, f.program) == ("load", KERNEL, 0, (0, 0, 0))
    assert (f.nearest, f.address, f.bytes_after_end, f.elements_past_last) == ("block_table", 0x7FF5AA800220, 0, 1)
    (m,) = _memcheck_failures(report, "remap-ab run --memcheck")
    assert "block_table" in m.message


def test_the_old_location_spelling_a_write_before_an_unnamed_allocation():
    (report,) = sanitizer.reports_from_output(OLD_SPELLING_WRITE_BEFORE, "new", 1)
    (f,) = report.findings
    assert (f.kind, f.kernel, f.row, f.program) == ("store", "out_of_bounds_kernel", 2, (2, 3, 0))
    assert f.bytes_before_start == 8 and f.bytes_after_end == -1
    assert f.nearest == "the allocation of 1024 bytes at 0x7fb0d6000000"
    assert "2 elements before the first element" in f.describe()


def test_clean_output_gives_one_clean_report_per_case():
    reports = sanitizer.reports_from_output(CLEAN, "new", 2)
    assert len(reports) == 2 and all(r.clean for r in reports)
    assert reports[0].summary() == "memcheck new (compute-sanitizer): clean (ERROR SUMMARY: 0 errors)"


def test_errors_without_an_access_report_still_fail():
    text = CLEAN.replace("0 errors", "1 error").replace(
        "REMAP-AB-SANITIZER-DONE",
        "========= Program hit cudaErrorIllegalAddress (error 700) on CUDA API call to cuMemcpy.\nREMAP-AB-SANITIZER-DONE",
    )
    found = sanitizer.localised(text, "new", 2)
    # It came after case 1's mark: case 1's, and case 0 (which ran before it) is clean.
    assert [r.clean for r in found.reports] == [True, False] and not found.unchecked and not found.unplaced
    assert "cudaErrorIllegalAddress" in found.reports[1].findings[0].describe()
    (alone,) = sanitizer.reports_from_output(text.replace("REMAP-AB-SANITIZER-CASE 1 b\n", ""), "new", 1)
    assert not alone.clean


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "========= Error: Device not supported. Please refer to the documentation.\n========= ERROR SUMMARY: 0 errors\n",
            "cannot check this GPU",
        ),
        ("Traceback (most recent call last):\nImportError: no torch\n", "without its error summary"),
        ("REMAP-AB-SANITIZER-CASE 0 a\nRuntimeError: CUDA error\n========= ERROR SUMMARY: 0 errors\n", "stopped before finishing"),
        ("", "without its error summary"),
        (
            "REMAP-AB-SANITIZER-CASE 0 raised: AssertionError: x\nREMAP-AB-SANITIZER-DONE 1\n========= ERROR SUMMARY: 0 errors\n",
            "raised in the sanitized run",
        ),
    ],
)
def test_nothing_checked_is_an_error_never_clean(text, words):
    with pytest.raises(SanitizerError, match=words):
        sanitizer.reports_from_output(text, "new", 1)


def test_kernel_name_spellings():
    assert sanitizer.kernel_name(f"{KERNEL}+0x1b0 in /x/_remap.py:84") == KERNEL
    assert sanitizer.kernel_name(f"{KERNEL}(int*, int*)+0x1b0") == KERNEL
    assert sanitizer.kernel_name("0x160 in memcheck_demo.cu:10:out_of_bounds_kernel(void)") == "out_of_bounds_kernel"


def test_find_sanitizer(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if os.path.exists("/usr/local/cuda/bin/compute-sanitizer"):
        pytest.skip("this machine has compute-sanitizer under /usr/local/cuda")
    with pytest.raises(SanitizerError, match="nothing was checked"):
        sanitizer.find_sanitizer()
    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert sanitizer.find_sanitizer() == str(tool)


def test_the_remaps_child_function_runs_each_case_and_names_its_allocations():
    # What processes/memcheck_child.py calls on the GPU, run here on this process's
    # device: a mark per case, every tensor the kernels touch named, the outputs too.
    import importlib

    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    module, _, function = CHILD.partition(":")
    run_cases = getattr(importlib.import_module(module), function)
    configs = [CaseConfig(mode="convert", tokens=1, topk=128, counts=True, seed=s) for s in range(2)]
    payload = {"impl": "new", "cases": [(c.to_dict(), {k: t.cpu() for k, t in generate_inputs(c).tensors().items()})
                                        for c in configs]}
    marks, named, stages = [], [], []
    alive = run_cases(payload, runtime.current(), lambda name, t: named.append(name),
                      lambda k, what: marks.append((k, what)), stages.append)
    assert marks == [(k, c.case_id) for k, c in enumerate(configs)] and stages == ["case 0 ran", "case 1 ran"]
    assert len(alive) == 2 and named.count("out") == 2 and named.count("valid_counts") == 2
    assert set(generate_inputs(configs[0]).tensors()) <= set(named)


def test_the_child_runs_without_the_caching_allocator():
    env = sanitizer.child_environment()
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and "TRITON_INTERPRET" not in env
    cmd = sanitizer.command("/usr/local/cuda/bin/compute-sanitizer", "p.pt")
    assert cmd[:3] == ["/usr/local/cuda/bin/compute-sanitizer", "--tool", "memcheck"]
    assert cmd[-2:] == ["remap_ab.processes.memcheck_child", "p.pt"]


FAKE_SANITIZER = """#!/bin/sh
# Stands in for compute-sanitizer: checks how it was called, counts its starts, reads
# the payload the child would run, and answers in the tool's format. Cases whose seed
# is in FAKE_OOB_SEEDS read one past their block table. FAKE_LOSE_CONTEXT: after a
# finding every later case raises (a context destroyed in spite of the option);
# FAKE_LATE: a finding is printed after the next case's mark; FAKE_FIRST: before the
# first mark and without its address. It reads the payload without importing torch (a
# torch import is seconds of CPU per start) and keeps a copy at $FAKE_STARTS.pt, which
# a test loads with torch.load as the real child does.
[ "$1 $2" = "--tool memcheck" ] || { echo "called without --tool memcheck"; exit 9; }
case "$*" in *"--destroy-on-device-error kernel"*) ;; *) echo "called without --destroy-on-device-error kernel"; exit 9;; esac
echo x >> "$FAKE_STARTS"
for last in "$@"; do :; done
cp "$last" "$FAKE_STARTS.pt"
exec "$PYTHON" - "$last" <<'PY'
import io, os, pickle, sys, zipfile

class Tensor:  # all the fake reads of a tensor: its size
    def __init__(self, size):
        self.size = tuple(size)

    def numel(self):
        n = 1
        for s in self.size:
            n *= s
        return n

class Payload(pickle.Unpickler):  # torch.save's data.pkl, its tensors as Tensor
    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return lambda storage, offset, size, *rest: Tensor(size)
        if module == "torch" and name.endswith("Storage"):
            return name
        assert not module.startswith("torch"), f"the fake cannot read {module}.{name}"
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return pid

with zipfile.ZipFile(sys.argv[1]) as z:
    (pkl,) = [n for n in z.namelist() if n.endswith("/data.pkl")]
    d = Payload(io.BytesIO(z.read(pkl))).load()
assert d["child"] == "remap_ab.subjects.remap.parts.memcheck:run_cases", d["child"]
assert os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
bad = set(os.environ.get("FAKE_OOB_SEEDS", "").split(","))
lost = late = None
errors = 0
def finding(k, tensors):
    start, size = 0x1000 * (k + 1), tensors["block_table"].numel() * 4
    print("========= Invalid __global__ read of size 4 bytes")
    print("=========     at _convert_req_index_to_global_index_kernel+0x10 in _remap.py:80")
    print("=========     by thread (3,0,0) in block (1,2,0)")
    if not os.environ.get("FAKE_FIRST"):
        print(f"=========     Address {hex(start + size)} is out of bounds")
        print(f"=========     and is 0 bytes after the nearest allocation at {hex(start)} of size {size} bytes")
    print("=========")
if os.environ.get("FAKE_FIRST"):
    for k, (config, tensors) in enumerate(d["cases"]):
        if str(config["seed"]) in bad:
            finding(k, tensors)
            errors += 1
    bad = set()
for k, (config, tensors) in enumerate(d["cases"]):
    print("REMAP-AB-SANITIZER-CASE", k, config["seed"])
    print("REMAP-AB-SANITIZER-TENSOR block_table", hex(0x1000 * (k + 1)), tensors["block_table"].numel() * 4)
    if late is not None:
        finding(*late)
        late = None
    if lost:
        print("REMAP-AB-SANITIZER-CASE", k, "raised: RuntimeError: CUDA error: unspecified launch failure")
        continue
    if str(config["seed"]) in bad:
        errors += 1
        if os.environ.get("FAKE_LATE"):
            late = (k, tensors)
        else:
            finding(k, tensors)
        lost = bool(os.environ.get("FAKE_LOSE_CONTEXT"))
    print(f"REMAP-AB-SANITIZER-STAGE 0.1 s: case {k} ran")
if late is not None:
    finding(*late)
print("REMAP-AB-SANITIZER-DONE", len(d["cases"]))
print(f"========= ERROR SUMMARY: {errors} errors")
PY
"""


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    """The fake tool on PATH; returns a function giving the starts made so far."""
    import sys

    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text(FAKE_SANITIZER)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHON", sys.executable)
    starts = tmp_path / "starts"
    monkeypatch.setenv("FAKE_STARTS", str(starts))
    return lambda: len(starts.read_text().split()) if starts.exists() else 0


def _cases(n):
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    configs = [CaseConfig(mode="convert", tokens=1, topk=128, seed=s) for s in range(n)]
    return configs, [generate_inputs(c) for c in configs]


def test_one_child_checks_a_batch_and_places_each_finding_in_its_case(fake_sanitizer, monkeypatch):
    import torch

    configs, inputs = _cases(5)
    clean = sanitizer.check_cases("new", configs, inputs, child=CHILD)
    assert [r.clean for r in clean] == [True] * 5 and clean[0].detail == "ERROR SUMMARY: 0 errors"
    assert fake_sanitizer() == 1
    # The payload the child got loads as the real child loads it: every case, its tensors whole.
    payload = torch.load(os.environ["FAKE_STARTS"] + ".pt", weights_only=False)
    assert payload["child"] == CHILD and [c for c, _ in payload["cases"]] == [c.to_dict() for c in configs]
    assert all(torch.equal(t["block_table"], x.block_table.cpu()) for (_, t), x in zip(payload["cases"], inputs))

    monkeypatch.setenv("FAKE_OOB_SEEDS", "1,3")  # the "kernel" reads past the table in cases 1 and 3
    reports = sanitizer.check_cases("new", configs, inputs, child=CHILD)
    assert fake_sanitizer() == 2  # one child for the failing batch too
    assert [r.clean for r in reports] == [True, False, True, False, True]
    (f,) = reports[1].findings
    assert (f.nearest, f.row, f.program, f.bytes_after_end, f.kind) == ("block_table", 1, (1, 2, 0), 0, "load")
    assert reports[3].findings[0].address == 0x4000 + inputs[3].block_table.numel() * 4
    assert reports[3].detail == "ERROR SUMMARY: 2 errors in a batch of 5 cases, 1 in this one"


def test_a_finding_printed_late_goes_to_the_case_whose_allocation_it_names(fake_sanitizer, monkeypatch):
    configs, inputs = _cases(3)
    monkeypatch.setenv("FAKE_OOB_SEEDS", "0")
    monkeypatch.setenv("FAKE_LATE", "1")  # printed after case 1's mark
    assert [r.clean for r in sanitizer.check_cases("new", configs, inputs, child=CHILD)] == [False, True, True]
    assert fake_sanitizer() == 1


def test_a_lost_context_checks_the_rest_in_a_fresh_child(fake_sanitizer, monkeypatch):
    configs, inputs = _cases(5)
    monkeypatch.setenv("FAKE_OOB_SEEDS", "1,3")
    monkeypatch.setenv("FAKE_LOSE_CONTEXT", "1")  # cases after a finding raise in that child
    reports = sanitizer.check_cases("new", configs, inputs, child=CHILD)
    assert [r.clean for r in reports] == [True, False, True, False, True]
    assert fake_sanitizer() == 3  # [0..4], then [2, 3, 4], then [4]


def test_a_finding_no_case_claims_makes_each_case_run_alone(fake_sanitizer, monkeypatch):
    configs, inputs = _cases(3)
    monkeypatch.setenv("FAKE_OOB_SEEDS", "2")
    monkeypatch.setenv("FAKE_FIRST", "1")  # before every mark, with no address: any case's
    assert [r.clean for r in sanitizer.check_cases("new", configs, inputs, child=CHILD)] == [True, True, False]
    assert fake_sanitizer() == 1 + 3


def _sanitizer_available() -> bool:
    try:
        sanitizer.find_sanitizer()
    except SanitizerError:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _sanitizer_available(), reason="needs a CUDA GPU and compute-sanitizer")
def test_on_the_gpu_the_read_past_the_table_fails_and_the_real_kernels_are_clean(tmp_path, monkeypatch):
    from memcheck_support import oob_implementation

    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.judge.runner import run_case

    oob = oob_implementation(tmp_path, monkeypatch, "row_end")
    config = CaseConfig(mode="convert", tokens=2, topk=256, num_reqs=1, blocks_per_req=8, block_size=16)
    assert run_case(config, "old", oob, device="cuda").verdict.passed
    v = run_case(config, "old", oob, device="cuda", memcheck=True).verdict
    assert v.status == "fail" and v.first.check == Check.MEMCHECK and v.first.impl == oob
    assert "block_table" in v.first.message and "--memcheck" in v.first.message
    for real in (config, CaseConfig(), CaseConfig(mode="convert", counts=True, prefill_fraction=0.5)):
        result = run_case(real, "old", "new", device="cuda", memcheck=True)
        assert result.verdict.passed, result.verdict.describe()
        assert result.a.memcheck.source == "compute-sanitizer" and result.b.memcheck.clean


def test_a_gpu_batch_folds_each_cases_sanitizer_report_into_its_verdict(monkeypatch):
    """``--memcheck`` on a GPU judges the batch, then replays it under the sanitizer once
    per implementation: each case's report lands in its own verdict, and an output
    that raised is said "not checked" (never sent to the sanitizer, never clean)."""
    import torch

    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.judge import batch
    from remap_ab.subjects.remap.judge.compare import OrderContract, Output, Reference, compare

    clean_one = "REMAP-AB-SANITIZER-DONE 1\n========= ERROR SUMMARY: 0 errors\n"
    calls = []

    def check_cases(name, configs, inputs, *, child):
        assert child == CHILD  # the remap's cases run in the child by its own function
        calls.append((name, [c.case_id for c in configs]))
        reports = [sanitizer.reports_from_output(clean_one, name, 1)[0] for _ in configs]
        if name == "new":
            reports[1] = sanitizer.reports_from_output(MEASURED_ON_THE_H200, name, 1)[0]
        return reports

    monkeypatch.setattr(sanitizer, "check_cases", check_cases)
    configs = [CaseConfig(tokens=1, seed=s) for s in range(3)]
    ids = [c.case_id for c in configs]
    contract = OrderContract(True, 2048)

    lanes = torch.tensor([[1, 2]], dtype=torch.int32)
    ref = Reference(lanes=lanes, valid=lanes >= 0, out=lanes, counts=torch.tensor([2], dtype=torch.int32))

    def output(name, error=None):
        return Output(name, None if error else lanes.clone(), None, contract, error=error)

    outs = [(output("old"), None, output("new"), None) for _ in configs]
    outs[2] = (output("old", error="RuntimeError: boom"), None, output("new"), None)
    batch._sanitize(configs, [None] * 3, outs, "old", "new")
    verdicts = [compare(i, oa, ob, ref, compacted=False, counts_returned=False, memchecked=True, replay="r --memcheck")
                for i, (oa, _, ob, _) in zip(ids, outs)]
    assert calls == [("old", ids[:2]), ("new", ids)]
    assert verdicts[0].passed and "memcheck old (compute-sanitizer): clean" in " ".join(verdicts[0].info)
    assert verdicts[1].status == "fail" and verdicts[1].first.check == Check.MEMCHECK and verdicts[1].first.impl == "new"
    assert "block_table" in verdicts[1].first.message and "--memcheck" in verdicts[1].first.message
    assert "memcheck old: not checked" in verdicts[2].info


def _fake_tool(tmp_path, monkeypatch, script: str):
    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: str(tool))


def test_the_child_gets_an_empty_stdin_not_ours(tmp_path, monkeypatch):
    """Our stdin is made an open pipe for the call (a child that inherited it would
    read it or wait on it); the child must see /dev/null instead."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    _fake_tool(tmp_path, monkeypatch,
               'fd0=$(readlink /proc/$$/fd/0)\n[ "$fd0" = /dev/null ] || { echo "stdin is $fd0"; exit 9; }\n'
               "echo 'REMAP-AB-SANITIZER-DONE 1'\necho '========= ERROR SUMMARY: 0 errors'\n")
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        (report,) = sanitizer._run_child("old", [CaseConfig(tokens=1)], [generate_inputs(CaseConfig(tokens=1))],
                                         timeout_s=60, child=CHILD).reports
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert report.clean


def test_a_child_past_its_time_is_an_error_with_its_last_words(tmp_path, monkeypatch):
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    _fake_tool(tmp_path, monkeypatch, "echo 'REMAP-AB-SANITIZER-CASE 0 stuck here'\nexec sleep 30\n")
    with pytest.raises(SanitizerError, match=r"within 1 s \(its last line: REMAP-AB-SANITIZER-CASE 0 stuck here\); nothing was checked"):
        sanitizer._run_child("old", [CaseConfig(tokens=1)], [generate_inputs(CaseConfig(tokens=1))], timeout_s=1, child=CHILD)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("how", ["same group", "own session"])
def test_a_child_past_its_time_leaves_nothing_running(tmp_path, monkeypatch, how):
    """On an H200 a killed compute-sanitizer left its instrumented Python running, an
    orphan holding a GPU context. The fake tool starts a grandchild (in its group, or
    in a session of its own as a launcher might) and hangs; after the timeout error the
    grandchild must be gone."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    pid_file = tmp_path / "grandchild.pid"
    # Its output goes elsewhere, so our pipes cannot keep us waiting for it.
    start = ("setsid " if how == "own session" else "") + "sleep 600 >/dev/null 2>&1 </dev/null &"
    _fake_tool(tmp_path, monkeypatch, f"{start}\necho $! > {pid_file}\necho 'REMAP-AB-SANITIZER-STAGE 0.1 s: started'\nexec sleep 120\n")
    with pytest.raises(SanitizerError, match=r"its last line: REMAP-AB-SANITIZER-STAGE 0.1 s: started"):
        sanitizer._run_child("old", [CaseConfig(tokens=1)], [generate_inputs(CaseConfig(tokens=1))], timeout_s=2, child=CHILD)
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), f"{how}: the grandchild {grandchild} outlived the timeout"


_STALL_THEN_WORK = """n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}
echo 'REMAP-AB-SANITIZER-STAGE 0.0 s: started'
stack='Current thread 0x1 (most recent call first):\n  File "/t/cuda/__init__.py", line 372 in _lazy_init\n'
[ "$n" -ge {stalls} ] || {{ printf "$stack" >&2; exec sleep 60; }}
echo 'REMAP-AB-SANITIZER-STAGE 2.0 s: torch imported, cuda:0: CUDA ready'
sleep 2
echo 'REMAP-AB-SANITIZER-DONE 1'
echo '========= ERROR SUMMARY: 0 errors'
"""


@pytest.mark.parametrize("stalls", [0, 1, 2])
def test_a_start_that_never_gets_cuda_is_restarted_once(tmp_path, monkeypatch, stalls):
    """On an H200 a child now and then hung in CUDA's initialisation under the
    sanitizer. One stalled start is restarted, and the report says so; two are an
    error that says nothing was checked, never a clean report. A child that got CUDA
    in time may take longer than the start limit to finish (it sleeps 2 s here). The
    stalled child's innermost frame (its faulthandler stack) is quoted."""
    from remap_ab.subjects.remap.case.config import CaseConfig
    from remap_ab.subjects.remap.case.inputs import generate_inputs

    count = tmp_path / "starts"
    _fake_tool(tmp_path, monkeypatch, _STALL_THEN_WORK.format(count=count, stalls=stalls))
    run = lambda: sanitizer._run_child(  # noqa: E731
        "old", [CaseConfig(tokens=1)], [generate_inputs(CaseConfig(tokens=1))], timeout_s=60, start_timeout_s=1, child=CHILD).reports
    if stalls == 0:
        (report,) = run()
        assert report.clean and "restarted" not in report.detail
    elif stalls == 1:
        (report,) = run()
        assert report.clean and "restarted once: the first start did not get CUDA within 1 s" in report.detail
        assert "restarted once" in report.summary()
    else:
        with pytest.raises(SanitizerError, match=r"did not get CUDA within 1 s, twice \(its last line: "
                                                 r"REMAP-AB-SANITIZER-STAGE 0.0 s: started; stuck in File "
                                                 r"\"/t/cuda/__init__.py\", line 372 in _lazy_init\); nothing was checked"):
            run()
    assert int(count.read_text()) == min(stalls + 1, 2)  # starts made
