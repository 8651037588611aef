#!/usr/bin/env bash
# On one H200 (~7 min), the sixth session's final tree: the pull request's table, old vs
# new on the counts and DCP paths (issue 22 §3's cells), both trees' caches warmed, the
# first sweep's variant loads in two more fresh processes, and the whole suite last under
# a timeout. At most 8 files under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
timeout 120 python3 -m remap_ab bench --sections pr --paths counts,dcp --report /tmp/bench-pr > "$OUT/bench.log" 2>&1
grep -E "^ *pr " "$OUT/bench.log"
warm_caches
for i in 1 2; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i 2>&1 | head -6 | tee -a "$OUT/first.log"
done
timeout 360 bash -c '. scripts/gpu/cost.sh; OUT='"$OUT"' whole_suite'
