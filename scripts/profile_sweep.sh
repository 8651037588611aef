#!/usr/bin/env bash
# The passing default sweep in-process (issue 41, part 4): N runs (default 3), each a
# fresh process on a warm Triton cache, their summary's time line (the phase split:
# gen, kernels, compare, write) and compile line; one with --call-checks off; two sweeps
# in one process, timed by part (Triton's launches, the sampled checks, the host's waits,
# the wrappers, the collector) with what the first paid over the second, and a third
# under torch's profiler (GPU busy time, launches, host waits, each step of batch.py's
# host and device time, the kernels and host ops that dominate); then one more run under
# cProfile, its top functions by own time and by cumulative time.
#
#   scripts/profile_sweep.sh [N]        (EXTRA="..." adds sweep options)
#
# Writes $OUT/profile_sweep.txt and $OUT/sweep.prof (or ./ without $OUT).
set -u
n=${1:-3}
dir=${OUT:-.}
out=$dir/profile_sweep.txt
work=$(mktemp -d)
py=${PY:-python}
[ -x .venv/bin/python ] && py=.venv/bin/python
echo "$(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ); cores $(nproc)" > "$out"
# shellcheck disable=SC2086
$py -m remap_ab sweep -j 0 --no-progress --root "$work/runs" ${EXTRA:-} > /dev/null 2>&1  # warms the cache
for i in $(seq 1 "$n"); do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  $py -m remap_ab sweep -j 0 --no-progress --root "$work/runs" ${EXTRA:-} > "$work/last.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "run $i: $(awk "BEGIN{print $t1 - $t0}") s end to end (exit $rc)" >> "$out"
  grep -E '^  (time:|compiled )|result:' "$work/last.txt" >> "$out"
done
# The same without the GPU call checks (sync, stream, graph): what they cost.
# shellcheck disable=SC2086
$py -m remap_ab sweep -j 0 --no-progress --root "$work/runs" --call-checks off ${EXTRA:-} > "$work/last.txt" 2>&1
grep -E '^  time:' "$work/last.txt" | sed 's/^/--call-checks off: /' >> "$out"
# Two sweeps in one process: the second loads no kernel (Triton's in-memory cache) and
# runs no sampled graph or stream check (they sample what this process has not checked),
# so the difference is what a fresh process pays. Timed by wrapping (cProfile
# misattributes once threads run): Triton's launches, the variants loaded from the disk
# cache, the handles made at their first launch; the sampled checks, whole and by half
# (stream, graph, the capture); the host's waits for the device; the A and B wrappers and
# a call's own parts around them (the sync check's switches, the clock, the layout and
# aliasing checks); the batch's steps outside the calls; and, from the collector's
# callbacks, its pauses. Each part: calls, seconds, microseconds a call.
$py - "$work/runs" ${EXTRA:-} >> "$out" 2>&1 <<'PY'
import gc
import sys
import time
import torch
from remap_ab.host import tuning
from remap_ab.sweep.run import Sweep, SweepOptions
from remap_ab.sweep.summary import phases_text

timed = {}
def wrap(cls, name):
    original = getattr(cls, name)
    def timing(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            calls = timed.setdefault(f"{cls.__name__.rsplit('.', 1)[-1]}.{name}", [0, 0.0])
            calls[0] += 1
            calls[1] += time.perf_counter() - start
    setattr(cls, name, timing)
if torch.cuda.is_available():  # the interpreter launches nothing through JITFunction.run
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    from remap_ab.subjects.remap.judge import batch, call, registry

    for cls, name in ((JITFunction, "run"), (JITFunction, "_do_compile"), (CompiledKernel, "_init_handles"),
                      (call, "production_findings"), (torch.cuda, "synchronize"), (registry.Implementation, "__call__"),
                      # a call's own parts around the wrapper, and the sampled checks' two halves
                      (batch, "timed_call"), (call, "_sync_checked"), (call.CallClock, "start"),
                      (call, "layout_findings"), (call, "aliasing"), (call, "_stream_check"), (call, "_graph_check"),
                      (call, "_captured"),
                      # the batch's steps outside the calls
                      (batch, "generate_inputs_batch"), (batch, "hashing_started"), (batch, "reference_batch"),
                      (batch, "_proofs")):
        if hasattr(cls, name):
            wrap(cls, name)


collection_began = 0.0


def collected(phase, info):
    global collection_began
    if phase == "start":
        collection_began = time.perf_counter()
        return
    calls = timed.setdefault(f"collector generation {info['generation']}", [0, 0.0])
    calls[0] += 1
    calls[1] += time.perf_counter() - collection_began


gc.callbacks.append(collected)

tuning.tune_this_process()
extra = sys.argv[2:]
filters = [extra[i + 1] for i, a in enumerate(extra) if a == "--filter"]
size = next((int(extra[i + 1]) for i, a in enumerate(extra) if a == "--max-tokens"), None)


def one_sweep() -> dict:
    sweep = Sweep(SweepOptions(workers=0, progress=False, root=sys.argv[1], filters=filters, max_size=size))
    sweep.prepare()
    timed.clear()  # the run's own, not the set-up's
    return sweep.run()["last_session"]


seen = []
for label in ("one process, first sweep", "one process, second sweep"):
    s = one_sweep()
    print(f"{label}: wall {s['wall_seconds']:.2f} s; {phases_text(s['phase_seconds'])}; "
          + "; ".join(f"{name} {n} calls {seconds:.3f} s ({seconds / n * 1e6:.0f} us each)"
                      for name, (n, seconds) in sorted(timed.items())))
    seen.append((s["wall_seconds"], {name: seconds for name, (_, seconds) in timed.items()}))
# What the first sweep paid over the second, by part. Timers nest (run inside __call__;
# the checks' own launches, already loaded, inside production_findings too; a collection
# can pause inside any of them), so "the rest" is close, not exact.
(first, t1), (second, t2) = seen
more = {name: t1.get(name, 0.0) - t2.get(name, 0.0) for name in t1}
named = ("JITFunction.run", "call.production_findings", "collector generation 0", "collector generation 1",
         "collector generation 2")
print(f"the first sweep over the second: {first - second:.2f} s; "
      + "; ".join(f"{name} {more[name]:+.3f} s" for name in named if name in more)
      + f"; the rest {first - second - sum(more[n] for n in named if n in more):+.3f} s")
if torch.cuda.is_available():
    # A third sweep under torch's profiler: how busy the GPU was, how many launches,
    # and how long the host waited for the device (the waits are where GPU time is on
    # the critical path). Each step of batch.run_batch runs in a range of its own: the
    # host time of the range, and the device time of the kernels it launched.
    from torch.profiler import ProfilerActivity, profile, record_function

    def ranged(owner, name, label=None):
        original = getattr(owner, name)

        def step(*args, **kwargs):
            with record_function("step:" + (label or name)):
                return original(*args, **kwargs)
        setattr(owner, name, step)

    for name in ("generate_inputs_batch", "hashing_started", "timed_call", "reference_batch", "_proofs",
                 "_witness_round", "compare"):
        ranged(batch, name)
    ranged(batch.PrivateInputs, "each", "PrivateInputs.each")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        s = one_sweep()
    from torch.autograd import DeviceType

    events = prof.key_averages()
    # The device's own events only: an operator's row repeats its kernels' time, and a
    # step's range has a device row too (its span, gaps included), not a kernel.
    on_device = [e for e in events if e.device_type == DeviceType.CUDA and not e.key.startswith("step:")]
    busy = sum(e.self_device_time_total for e in on_device) / 1e6
    launches = {e.key: e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel")}
    waits = {e.key: (e.count, e.cpu_time_total / 1e6) for e in events if "Synchronize" in e.key}
    print(f"under torch.profiler: wall {s['wall_seconds']:.2f} s; GPU busy {busy:.2f} s; launches {launches}; "
          "host waits " + ", ".join(f"{k} {n} calls {t:.3f} s" for k, (n, t) in waits.items()))
    # A step's host range (its span on the device's timeline, gaps included, is another row).
    steps = sorted((e for e in events if e.key.startswith("step:") and e.device_type != DeviceType.CUDA),
                   key=lambda e: -e.cpu_time_total)
    print("by step, host / its kernels' device time: "
          + "; ".join(f"{e.key[5:]} {e.cpu_time_total / 1e6:.3f} / {e.device_time_total / 1e6:.3f} s" for e in steps))
    kernels = sorted(on_device, key=lambda e: -e.self_device_time_total)[:10]
    print("kernels by device time: " + "; ".join(f"{e.key[:60]} {e.count} x {e.self_device_time_total / 1e3:.1f} ms"
                                                  for e in kernels))
    ops = sorted((e for e in events if e.key.startswith("aten::")), key=lambda e: -e.count)[:10]
    print("host ops by count: " + ", ".join(f"{e.key} {e.count}" for e in ops))
PY
# shellcheck disable=SC2086
$py -m cProfile -o "$dir/sweep.prof" -m remap_ab sweep -j 0 --no-progress --root "$work/runs" ${EXTRA:-} \
  > "$work/last.txt" 2>&1
grep -E '^  time:' "$work/last.txt" | sed 's/^/profiled: /' >> "$out"
$py - "$dir/sweep.prof" >> "$out" <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1])
s.sort_stats("tottime").print_stats(40)
s.sort_stats("cumtime").print_stats(60)
PY
head -20 "$out"
rm -rf "$work"
