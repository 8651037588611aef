"""The tweaks' switch (``REMAP_AB_TWEAKS_OFF``, read in tuning.py alone) and the
side-by-side benchmark that measures them (``python -m remap_ab.bench.tweaks``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remap_ab import tuning
from remap_ab.errors import UsageError

REPO = Path(__file__).resolve().parents[1]


def test_every_tweak_is_on_unless_named_off(monkeypatch):
    monkeypatch.delenv(tuning.OFF_VARIABLE, raising=False)
    assert all(tuning.enabled(t) for t in tuning.TWEAKS)
    monkeypatch.setenv(tuning.OFF_VARIABLE, "heap, hash_threads")
    assert [t for t in tuning.TWEAKS if not tuning.enabled(t)] == ["heap", "hash_threads"]
    monkeypatch.setenv(tuning.OFF_VARIABLE, "all")
    assert not any(tuning.enabled(t) for t in tuning.TWEAKS)


def test_an_unknown_tweak_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(tuning.OFF_VARIABLE, "heap,heaps")
    with pytest.raises(UsageError, match="REMAP_AB_TWEAKS_OFF names heaps: not a tweak"):
        tuning.enabled("heap")


_OWNED = """
import sys
from remap_ab import backend, heap, tuning
if sys.argv[1] == "own":
    tuning.tune_this_process()
backend.select("cpu")
from triton.runtime import interpreter
print(heap._kept, interpreter.GridExecutor.__name__)
"""


@pytest.mark.parametrize("own, off, expected", [
    ("own", "", "True BatchedGridExecutor"),
    ("own", "heap", "False BatchedGridExecutor"),
    ("guest", "", "False GridExecutor"),
])
def test_only_a_process_of_remap_abs_own_is_tuned_and_the_switch_turns_a_tweak_off(own, off, expected):
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("heap.py tunes glibc's malloc only")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update({tuning.OFF_VARIABLE: off, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)})
    r = subprocess.run([sys.executable, "-c", _OWNED, own], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[-2] == expected


def test_the_tweaks_bench_runs_each_variant_alternating_and_prints_the_table(tmp_path):
    from remap_ab.bench import tweaks

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    argv = [sys.executable, "-m", "remap_ab.bench.tweaks", "--device", "cpu", "--repeats", "1", "--max-tokens", "1",
            "--filter", "path=convert", "--filter", "k=128", "-j", "0", "--tweaks", "heap", "--root", str(tmp_path),
            "--json", str(tmp_path / "t.json")]
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0].strip() for ln in lines if ln.startswith("  repeat 1")] == [
        "repeat 1 all on", "repeat 1 heap off", "repeat 1 all off"]
    rows = {ln[:24].strip(): ln for ln in lines[lines.index("") + 2:]}
    assert set(rows) == {"all on", "heap off", "all off"}
    assert rows["heap off"].rstrip().endswith(("keep", "drop"))
    import json

    seconds = json.loads((tmp_path / "t.json").read_text())["seconds"]
    assert [len(v) for v in seconds.values()] == [1, 1, 1] and all(s > 0 for v in seconds.values() for s in v)
    assert tweaks.variants("cpu", ["heap"])[1] == ("heap off", "heap")
