#!/usr/bin/env bash
# On one H200 (~7 min): the GPU sanitizer tests alone (their start-up under the sanitizer
# stalled once beside 15 workers), the whole suite, a 45 s soak from a cold Triton cache,
# then one cost turn against cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
/usr/bin/time -f "sanitizer tests alone: wall %e s" python3 -m pytest -q -p no:cacheprovider tests/test_sanitizer.py \
  -k on_the_gpu >"$OUT/sanitizer-alone.log" 2>&1; tail -3 "$OUT/sanitizer-alone.log"
whole_suite
cold_soak
warm_caches
cost_turns 1
