#!/usr/bin/env bash
# On one H200 (~9 min), the session's closing run: PrivateInputs timed alone and beside
# the hashing threads, the whole suite, a 60 s soak from a cold Triton cache and a 30 s
# one on the cache it filled, then two cost turns against cfacc42 (.old/, carried).
# Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
python3 scripts/gpu/private_inputs_bench.py 2>&1 | tee "$OUT/private-inputs.log"
whole_suite
export TRITON_CACHE_DIR=/tmp/soak-cache
for what in "cold 1" "warm 0.5"; do
  set -- $what
  python3 -m remap_ab soak --minutes "$2" --seed 1 --root "/tmp/soak-$1" 2>/dev/null \
    | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: |FAIL" | head -12 | sed "s/^/[$1] /" \
    | tee -a "$OUT/soak.log"
done
unset TRITON_CACHE_DIR
warm_caches
cost_turns 2
