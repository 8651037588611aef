"""Report folders drawn and written by helper processes (processes/background.py): the
same folder as one written in place, nothing lost at the end of the block, a helper's
failure said, and no helper outside a block."""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

import pytest

from remap_ab import runtime
from remap_ab.processes import background
from remap_ab.subjects.remap.case.config import CaseConfig
from remap_ab.subjects.remap.judge.runner import run_case
from remap_ab.subjects.remap.report.report import load_report, write_case_report

IMPLS = Path(__file__).parent / "impls"


def _pid_into(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


def _raise(message: str) -> None:
    raise OSError(message)


def test_without_a_block_a_call_runs_here_and_now(tmp_path):
    background.submit(_pid_into, str(tmp_path / "pid"))
    assert (tmp_path / "pid").read_text() == str(os.getpid())
    with background.Helpers(0):
        background.submit(_pid_into, str(tmp_path / "zero"))
        assert (tmp_path / "zero").read_text() == str(os.getpid())


def test_a_block_runs_the_calls_in_helpers_and_waits_for_them_all(tmp_path):
    with background.Helpers(2) as helpers:
        for i in range(5):
            background.submit(_pid_into, str(tmp_path / f"pid{i}"))
        background.submit(_raise, "disk full")
    pids = {(tmp_path / f"pid{i}").read_text() for i in range(5)}  # all there once the block is left
    assert str(os.getpid()) not in pids and len(pids) <= 2
    assert helpers.done == 5 and helpers.failures == ["OSError: disk full"]
    background.submit(_pid_into, str(tmp_path / "after"))  # the block is closed: here again
    assert (tmp_path / "after").read_text() == str(os.getpid())


def _text_into(path: str, text: str) -> None:
    Path(path).write_text(text)


def _upper(text: str) -> str:
    if not text:
        raise ValueError("nothing to hash")
    return text.upper()


@pytest.mark.parametrize("workers", [0, 1])
def test_a_future_argument_reaches_the_call_as_its_result(tmp_path, workers):
    with background.Helpers(workers) as helpers:
        background.submit(_text_into, str(tmp_path / "out"), background.in_thread(_upper, "digest"))
        if workers:  # here and now, the failure would raise in this call instead
            background.submit(_text_into, str(tmp_path / "never"), background.in_thread(_upper, ""))
    assert (tmp_path / "out").read_text() == "DIGEST"
    if workers:  # a future that failed fails its call, said and counted, the rest written
        assert not (tmp_path / "never").exists()
        assert helpers.done == 1 and helpers.failures == ["ValueError: nothing to hash"]


@pytest.fixture(scope="module")
def failing_result():
    sys.path.insert(0, str(IMPLS))
    try:
        return run_case(CaseConfig(mode="dcp", tokens=1030, topk=256, block_n=128), "main",
                        str(IMPLS / "wrong_past_row_1024.py"), device=runtime.current())
    finally:
        sys.path.remove(str(IMPLS))


def test_a_folder_written_by_a_helper_is_the_one_written_in_place(failing_result, tmp_path):
    assert not failing_result.verdict.passed
    here = write_case_report(failing_result, tmp_path / "here", inputs_generated=True)
    with background.Helpers(1) as helpers:
        there = write_case_report(failing_result, tmp_path / "helper", inputs_generated=True)
        assert there == tmp_path / "helper" / failing_result.config.case_id
    assert helpers.done == 1 and not helpers.failures
    names = sorted(p.name for p in here.iterdir())
    assert names == sorted(p.name for p in there.iterdir()) and "lanes.png" in names
    for name in names:
        if name not in ("verdict.json", "diff.md", "diff.html", "replay.sh"):  # they name their folder and time
            mine, theirs = (here / name).read_bytes(), (there / name).read_bytes()
            if name.endswith(".gz"):  # the gzip header holds the time of writing
                mine, theirs = gzip.decompress(mine), gzip.decompress(theirs)
            assert mine == theirs, name
    mine, theirs = load_report(here).meta, load_report(there).meta
    for key in ("verdict", "inputs", "outputs", "inputs_sha256"):
        assert mine[key] == theirs[key], key
    assert not list((tmp_path / "helper").glob(".*"))  # written aside, then renamed into place


def test_a_case_written_again_while_a_helper_finishes_it_loses_neither(failing_result, tmp_path):
    # A batch that raised is judged again case by case: a case may be written twice.
    with background.Helpers(1) as helpers:
        first = write_case_report(failing_result, tmp_path, inputs_generated=True)
        again = write_case_report(failing_result, tmp_path, inputs_generated=True)
    assert helpers.done == 2 and not helpers.failures and first == again
    assert {"verdict.json", "rows.pt.gz", "lanes.png", "diff.html"} <= {p.name for p in first.iterdir()}
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # nothing left aside



@pytest.mark.skipif(runtime.current() != "cuda", reason="the sync check's debug mode is a CUDA one")
def test_the_outputs_are_hashed_beside_a_call_check_without_a_synchronisation(failing_result, tmp_path, monkeypatch):
    # The sweep's thread may be inside a call's sync check (sync debug "error", for the
    # whole process) while a host thread hashes a folder's outputs: that thread must not
    # synchronise. Its wait is held until the mode is on.
    import threading

    import torch

    from remap_ab.subjects.remap.case import inputs
    from remap_ab.subjects.remap.case.inputs import tensor_sha256

    mode_on = threading.Event()
    copied = inputs._copied

    def held(done):
        mode_on.wait(30)
        copied(done)

    monkeypatch.setattr(inputs, "_copied", held)
    previous = torch.cuda.get_sync_debug_mode()
    try:
        with background.Helpers(1) as helpers:
            folder = write_case_report(failing_result, tmp_path, inputs_generated=True)
            torch.cuda.set_sync_debug_mode("error")
            mode_on.set()
    finally:  # leaving the block waited for the hashing, done under the mode
        torch.cuda.set_sync_debug_mode(previous)
    assert helpers.done == 1 and not helpers.failures
    roles = load_report(folder).meta["outputs"]["roles"]
    assert roles["b"]["tensors"]["out"]["sha256"] == tensor_sha256(failing_result.b.out)
    assert roles["reference"]["tensors"]["out"]["sha256"] == tensor_sha256(failing_result.reference.out)
