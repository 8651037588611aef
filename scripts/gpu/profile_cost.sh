#!/usr/bin/env bash
# On one H200 (~6 min): where the sampled call checks' cost goes (the first sweep of a
# fresh process, function by function, and whole processes under cProfile), how long
# the soak's and nondet's contending products take, and three soaks (45 s from a cold
# Triton cache, then 24 s warm with and without contended cases). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
python3 - <<'PY' | tee "$OUT/products.log"
import torch, time
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); c = torch.empty_like(a)
    for _ in range(3): torch.mm(a, a, out=c)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20): torch.mm(a, a, out=c)
    torch.cuda.synchronize(); print(f"bf16 mm {n}x{n}: {(time.perf_counter() - t) / 20 * 1e3:.3f} ms")
PY
python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm --call-checks off > "$OUT/warm-now.log" 2>&1
grep -h "verdicts:\|time:" "$OUT/warm-now.log"
T="remap_ab.call:production_findings remap_ab.call:_stream_check remap_ab.call:_graph_check remap_ab.call:fresh_inputs
 remap_ab.call:_sync_checked remap_ab.call:PrivateInputs.__init__ remap_ab.call:_CopyPlan.__init__
 remap_ab.call:PrivateInputs.any_changed remap_ab.call:aliasing remap_ab.batch:_proofs remap_ab.rejections:attempt
 remap_ab.layouts:apply_all remap_ab.inputs:hashing_started"
for checks in sample off; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$checks --call-checks $checks --time $T > "$OUT/first-$checks.log" 2>&1
  head -40 "$OUT/first-$checks.log"
done
for checks in off sample; do
  /usr/bin/time -f "e2e under cProfile, $checks: %e s" python3 -m cProfile -o "$OUT/e2e-$checks.prof" -m remap_ab sweep -j 0 \
    --no-progress --root /tmp/e-$checks --call-checks $checks 2>&1 | grep -E "verdicts:|time:|e2e"
done
export TRITON_CACHE_DIR=/tmp/soak-cache
for what in "cold 0.75" "warm 0.4" "warm-quiet 0.4 --contend-every 0"; do
  set -- $what; name=$1; minutes=$2; shift 2
  python3 -m remap_ab soak --minutes "$minutes" --seed 1 --root "/tmp/soak-$name" "$@" 2>/dev/null \
    | grep -E "soak summary|cases judged|throughput|time:|soak: |FAIL" | head -12 | sed "s/^/[$name] /" | tee -a "$OUT/soak.log"
done
