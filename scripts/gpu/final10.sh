#!/usr/bin/env bash
# On one H200 (~2 min, what device time was left): the final tree's first-sweep variant
# loads again on another machine instance (two fresh processes after both trees' caches
# are warmed) and one cost turn against cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
warm_caches
for i in 1 2; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i > "$OUT/first-$i.log" 2>&1
  head -3 "$OUT/first-$i.log"
done
cost_turns 1
