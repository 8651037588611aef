"""What Triton's cache hit costs per variant, on a machine with no GPU (issue 22 §4's first
sweep loads): every variant of the sweep's grid cross-compiled for sm_90 into a fresh
TRITON_CACHE_DIR, then warmed again from it (every kernel a cache hit: the binder, the key,
the lookup, the CompiledKernel read; no module load, which needs the GPU), one after the
other or inside Triton's AsyncCompileMode with 8 threads.
    TRITON_CACHE_DIR=/tmp/c python3 scripts/variant_loads_cpu.py seq|threads
(the first run fills the cache; later runs are the cache hits).
"""

from __future__ import annotations

import sys
import time

from remap_ab import grid, precompile

mode = sys.argv[1] if len(sys.argv) > 1 else "seq"
precompile._init_worker(precompile.Target("cuda", 90, 32))
configs: dict = {}
for point in grid.load().points():
    configs.setdefault(precompile.variant_key(point.config), point.config)
tasks = [c.to_dict() for c in configs.values()]
start = time.perf_counter()
if mode == "threads":
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime._async_compile import AsyncCompileMode

    with AsyncCompileMode(ThreadPoolExecutor(8)):
        warmed = precompile._warm("old", "new", tasks)
else:
    warmed = precompile._warm("old", "new", tasks)
seconds = time.perf_counter() - start
print(f"{mode}: {len(tasks)} variant keys, {sum(w.compiled for w in warmed)} kernels compiled, "
      f"{sum(w.cached for w in warmed)} from the cache, {seconds:.2f} s, {sum(1 for w in warmed if w.error)} errors")
