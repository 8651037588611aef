#!/usr/bin/env bash
# On one H200 (~6 min), the last device time of a session: the whole suite; a 45 s soak
# with the defaults (cold Triton cache); then, if time is left, one cost turn against
# cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
/usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 240 -p no:cacheprovider >"$OUT/suite.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|suite wall" "$OUT/suite.log" | tail -30
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --root /tmp/soak 2>/dev/null \
  | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: |FAIL" | head -20 | tee "$OUT/soak.log"
warm_caches
cost_turns 1
