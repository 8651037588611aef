"""The default sweep's steady state by step of batch.py (issue 41, part 4): in one
process, three sweeps (the first pays the process's first use), then one under torch's
profiler and one under cProfile. Each step of ``batch.run_batch`` (generation, private
copies, the calls, the reference, the proofs...) is wrapped: its host time per sweep,
and under the profiler a ``record_function`` range whose device time is that of the
kernels it launched.

    python scripts/profile_steps.py RUNS_ROOT OUT_PREFIX     (FILTERS="tokens=1 k=128" selects)

Writes OUT_PREFIXops.txt (steps' host and device time, kernels by device time, host ops
by count) and OUT_PREFIXprof.txt (cProfile, by own and by cumulative time). The
wrappers cost a few µs a call: compare sweeps of this script with each other, not with
the sweep's own time line.
"""

import cProfile
import io
import os
import pstats
import sys
import time

STEPS = ("generate_inputs_batch", "synchronize", "hashing_started", "timed_call", "reference_batch", "_proofs",
         "_witness_round", "compare", "backend_views", "_paths_sampled", "_production_sampled")
CALL_STEPS = ("production_findings", "layout_findings", "aliasing", "caller_buffers", "_timed", "_set_sync_debug_mode")


def main():
    root, out = sys.argv[1], sys.argv[2]
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from remap_ab.host import tuning
    from remap_ab.subjects.remap import batch
    from remap_ab.subjects.remap import call as call_module
    from remap_ab.sweep.run import Sweep, SweepOptions
    from remap_ab.sweep.summary import phases_text

    tuning.tune_this_process()
    timed = {}

    def wrap(owner, name, label=None):
        original = getattr(owner, name)
        label = label or name

        def timing(*args, **kwargs):
            start = time.perf_counter()
            try:
                with torch.profiler.record_function("step:" + label):
                    return original(*args, **kwargs)
            finally:
                calls = timed.setdefault(label, [0, 0.0])
                calls[0] += 1
                calls[1] += time.perf_counter() - start
        setattr(owner, name, timing)

    for name in STEPS:
        wrap(batch, name)
    wrap(batch.PrivateInputs, "each", "PrivateInputs.each")
    for name in CALL_STEPS:
        wrap(call_module, name)

    def one(label, profiler=None):
        sweep = Sweep(SweepOptions(workers=0, progress=False, root=root, filters=os.environ.get("FILTERS", "").split()))
        sweep.prepare()
        timed.clear()
        if profiler:
            profiler.enable()
        s = sweep.run()["last_session"]
        if profiler:
            profiler.disable()
        print(f"{label}: wall {s['wall_seconds']:.2f} s; {phases_text(s['phase_seconds'])}", flush=True)
        for name, (n, seconds) in sorted(timed.items(), key=lambda kv: -kv[1][1]):
            print(f"    {name:24s} {n:6d} calls {seconds:7.3f} s")

    for label in ("first", "second", "third"):
        one(label)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        one("under torch's profiler")
    events = prof.key_averages()
    with open(f"{out}ops.txt", "w") as f:
        # Two rows a step on a GPU: the host range (its kernels' device time) and the
        # range on the device's timeline (a span, gaps included).
        f.write("# steps: host time, device time\n")
        for e in sorted((e for e in events if e.key.startswith("step:")), key=lambda e: -e.device_time_total):
            f.write(f"{e.count:7d} host {e.cpu_time_total / 1e6:7.3f} s  device {e.device_time_total / 1e6:7.3f} s  {e.key}\n")
        f.write("\n# kernels by device time\n")
        kernels = sorted((e for e in events if e.device_type == DeviceType.CUDA), key=lambda e: -e.self_device_time_total)
        for e in kernels[:40]:
            f.write(f"{e.count:7d} {e.self_device_time_total / 1e3:9.1f} ms  {e.key[:120]}\n")
        f.write("\n# host ops by count\n")
        for e in sorted((e for e in events if e.device_type != DeviceType.CUDA), key=lambda e: -e.count)[:60]:
            f.write(f"{e.count:7d} {e.cpu_time_total / 1e3:9.1f} ms total {e.self_cpu_time_total / 1e3:9.1f} ms self  "
                    f"{e.key[:100]}\n")
    profiler = cProfile.Profile()
    one("under cProfile", profiler)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(60)
    stats.sort_stats("cumtime").print_stats(100)
    with open(f"{out}prof.txt", "w") as f:
        f.write(text.getvalue())


if __name__ == "__main__":
    main()
