#!/usr/bin/env bash
# On one H200 (~2 min): where Triton 3.6 spends a fresh process's first load of each
# variant, after one sweep warmed the cache: the sweep's JIT launches with Triton's
# per-variant steps timed (launcher, its C module, key, metadata), then the same sweep
# under cProfile, its profile saved for pstats here. At most 8 files under $OUT.
. "$(dirname "$0")/setup.sh"
python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm --call-checks off 2>&1 | grep -E "verdicts:|time:"
T="triton.backends.nvidia.driver:CudaLauncher.__init__ triton.backends.nvidia.driver:make_launcher
 triton.backends.nvidia.driver:compile_module_from_src triton.runtime.build:_load_module_from_path
 triton.runtime.cache:get_cache_key collections:namedtuple triton.runtime.jit:JITFunction._do_compile
 triton.runtime.cache:FileCacheManager.get_group triton.backends.nvidia.compiler:CUDABackend.parse_options
 triton.runtime.jit:JITFunction._pack_args remap_ab.inputs:generate_inputs_batch"
for i in 1 2; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i --time $T > "$OUT/first-timed-$i.log" 2>&1
  cat "$OUT/first-timed-$i.log"
done
python3 scripts/gpu/first_sweep_profile.py /tmp/p-3 --cprofile 30 --dump "$OUT/first.prof" > "$OUT/first-cprofile.log" 2>&1
head -3 "$OUT/first-cprofile.log"
