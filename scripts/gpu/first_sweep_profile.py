"""Where the first sweep of a fresh GPU process spends its time (issues 20 and 22).

Run in a fresh process with a warm Triton cache (one sweep before it):
    python3 scripts/gpu/first_sweep_profile.py ROOT [--second] [--cprofile N [--dump FILE]] [--call-checks off|sample] [--no-share]
        [--time MODULE:NAME ...]
Prints the sweep's phases, then every JIT launch split into "a variant new to this
process" and "a variant already loaded", with the seconds of each and the time spent
in Triton's compile-from-cache and module load; with --cprofile N, the N functions of
most own time (a second, profiled sweep would be warm: this one is the first); with
--time, the seconds spent in each function named (its own threads' calls included).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pstats
import sys
import time
from collections import Counter

sys.path.insert(0, ".")

import triton.compiler.compiler as tcc  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

counts: Counter = Counter()
seconds: Counter = Counter()


def timed(label, fn):
    # wraps: inspect.getsource sees the function wrapped (remap_ab.variant_loads reads Triton's source)
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            counts[label] += 1
            seconds[label] += time.perf_counter() - t
    return wrapper


launch = JITFunction.run


def run(self, *args, grid, warmup, **kwargs):
    before = sum(len(c[0]) for c in self.device_caches.values())
    t = time.perf_counter()
    try:
        return launch(self, *args, grid=grid, warmup=warmup, **kwargs)
    finally:
        new = sum(len(c[0]) for c in self.device_caches.values()) > before
        label = f"launch, {'new' if new else 'known'} variant: {self.__name__}"
        counts[label] += 1
        seconds[label] += time.perf_counter() - t


JITFunction.run = run
tcc.CompiledKernel._init_handles = timed("  CompiledKernel._init_handles (module load)", tcc.CompiledKernel._init_handles)
tcc.CompiledKernel.__init__ = timed("  CompiledKernel.__init__ (read from the cache)", tcc.CompiledKernel.__init__)
compile_ = timed("  triton.compile (key, cache lookup)", tcc.compile)
tcc.compile = compile_
import triton  # noqa: E402
import triton.runtime.jit as tjit  # noqa: E402

triton.compile = compile_
if hasattr(tjit, "compile"):
    tjit.compile = compile_

from remap_ab.sweep import Sweep, SweepOptions  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--cprofile", type=int, default=0)
p.add_argument("--dump", metavar="FILE", help="with --cprofile, also save the profile (pstats) to FILE")
p.add_argument("--call-checks", default="sample")
p.add_argument("--second", action="store_true", help="profile the second sweep of the process, not the first")
p.add_argument("--no-share", action="store_true",
               help="leave Triton's per-variant rebuilds as they are (remap_ab.variant_loads not applied)")
p.add_argument("--time", nargs="*", default=[], metavar="MODULE:NAME",
               help="functions to time (remap_ab.call:_graph_check, remap_ab.call:PrivateInputs.__init__, ...)")
o = p.parse_args()
if o.no_share:
    from remap_ab import variant_loads

    variant_loads._shared = True  # share() then applies nothing
for spec in o.time:  # each wrapped where it is looked up: its module's global, or its class's attribute
    module_name, _, path = spec.partition(":")
    owner = __import__("importlib").import_module(module_name)
    *outer, leaf = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    setattr(owner, leaf, timed(f"  {spec}", getattr(owner, leaf)))


def new_sweep():
    extra = {"call_checks": o.call_checks} if "call_checks" in SweepOptions.__dataclass_fields__ else {}
    s = Sweep(SweepOptions(workers=0, root=o.root, run=f"profile-{time.time_ns()}", progress=False, **extra))
    s.prepare()
    return s


if o.second:
    new_sweep().run()
    counts.clear()
    seconds.clear()
sweep = new_sweep()
prof = cProfile.Profile() if o.cprofile else None
t0 = time.perf_counter()
if prof:
    prof.enable()
sweep.run()
if prof:
    prof.disable()
wall = time.perf_counter() - t0
runs = sorted((p for p in __import__("pathlib").Path(o.root).glob("profile-*/run.json")), key=lambda p: p.stat().st_mtime)
m = json.load(open(runs[-1]))["last_session"]
which = f"{'second' if o.second else 'first'} sweep{' (cProfiled)' if prof else ''}"
print(f"{which}: {wall:.2f} s here, in-process {m['wall_seconds']:.2f} s: "
      + ", ".join(f"{k} {v:.2f}" for k, v in m["phase_seconds"].items()))
import collections  # noqa: E402

from remap_ab import variant_loads  # noqa: E402

print(f"variant_loads: metadata class shared {collections.namedtuple is variant_loads._namedtuple}, "
      f"{len(variant_loads._classes)} class(es); launcher modules shared {len(variant_loads._modules)}")
for label in sorted(counts, key=lambda k: -seconds[k]):
    print(f"  {seconds[label]:7.2f} s  {counts[label]:6d}x  {1e3 * seconds[label] / counts[label]:7.3f} ms each  {label}")
if prof:
    s = pstats.Stats(prof)
    if o.dump:
        s.dump_stats(o.dump)
    s.sort_stats("tottime").print_stats(o.cprofile)
    s.sort_stats("cumulative").print_stats(o.cprofile)
