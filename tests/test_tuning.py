"""The tweaks' switch (``REMAP_AB_TWEAKS_OFF``, read in tuning.py alone) and the
side-by-side benchmark that measures them (``python -m remap_ab.subjects.remap.parts.bench.tweaks``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remap_ab.errors import UsageError
from remap_ab.host import tuning

REPO = Path(__file__).resolve().parents[1]


def test_every_tweak_is_on_unless_named_off(monkeypatch):
    monkeypatch.delenv(tuning.OFF_VARIABLE, raising=False)
    assert all(tuning.enabled(t) for t in tuning.TWEAKS)
    monkeypatch.setenv(tuning.OFF_VARIABLE, "heap, hash_threads")
    assert [t for t in tuning.TWEAKS if not tuning.enabled(t)] == ["heap", "hash_threads"]
    monkeypatch.setenv(tuning.OFF_VARIABLE, "all")
    assert not any(tuning.enabled(t) for t in tuning.TWEAKS)


def test_an_unknown_tweak_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(tuning.OFF_VARIABLE, "heap,variant_loads")  # a tweak that was dropped is unknown too
    with pytest.raises(UsageError, match="REMAP_AB_TWEAKS_OFF names variant_loads: not a tweak"):
        tuning.enabled("heap")


_OWNED = """
import sys
from remap_ab import runtime
from remap_ab.host import heap, tuning
if sys.argv[1] == "own":
    tuning.tune_this_process()
runtime.select("cpu")
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


def test_the_tweaks_bench_alternates_the_variants_warms_each_cache_once_and_judges_by_the_median(
        monkeypatch, capsys, tmp_path):
    from remap_ab.subjects.remap.parts.bench import tweaks

    seconds = {"": 10.0, "triton_key": 12.0, "hash_threads": 10.5, "heap": 11.0}
    ran = []

    def fake_sweep(device, off, root, run, max_tokens, workers, cache, filters=()):
        ran.append((run, off, cache))
        total = seconds.get(off, 13.0)
        return total + 5.0, total  # process start-up on top of the sweep

    monkeypatch.setattr(tweaks, "run_sweep", fake_sweep)
    assert tweaks.main(["--device", "cuda", "--repeats", "2", "--root", str(tmp_path)]) == 0
    assert [run for run, _, _ in ran if run.startswith("warm")] == ["warm-up"]  # one cache, filled once
    assert {cache for _, _, cache in ran} == {tmp_path / "triton-cache"}
    counted = [off for run, off, _ in ran if not run.startswith("warm")]
    cuda = tweaks.DEVICE_TWEAKS["cuda"]
    assert cuda == ("triton_key", "hash_threads")  # heap acts on the CPU only
    first = ["", *cuda, ",".join(cuda)]
    assert counted == first + first[1:] + first[:1]  # the second repeat starts one variant later
    out = capsys.readouterr().out.splitlines()
    rows = {ln[:22].strip(): ln.split() for ln in out[out.index("") + 3:]}
    assert rows["triton_key off"][4:8] == ["11.8%", "/", "16.7%", "keep"]  # 2 of 17 s, 2 of 12 s
    assert rows["hash_threads off"][4:8] == ["3.2%", "/", "4.8%", "drop"]
    assert rows["all off"][7] not in ("keep", "drop")
    assert tweaks.variants("cpu", ["heap"]) == [("all on", ""), ("heap off", "heap")]  # "all off" would repeat it


def test_a_tweaks_bench_run_times_a_real_sweep_with_the_switch_in_its_environment(tmp_path, monkeypatch):
    from remap_ab.subjects.remap.parts.bench import tweaks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    process, sweep = tweaks.run_sweep("cpu", "hash_threads", tmp_path, "one", 1, 0, tmp_path / "cache",
                                      ("path=convert", "k=128"))
    assert 0 < sweep < process
    import json

    assert json.loads((tmp_path / "one" / "run.json").read_text())["wall_seconds"] == sweep
