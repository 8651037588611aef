#!/usr/bin/env bash
# On one H200 (~7 min), the closing run of the sixth session's tree (the host heap kept,
# Triton's per-variant metadata class and launcher module shared, the DCP compaction's
# count reduced inside its store): both trees' caches warmed, the first sweep's variant
# loads in three fresh processes, one cost turn against cfacc42 (.old/, carried), a 45 s
# cold soak, and the whole suite last under a timeout. At most 8 files under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
warm_caches
for i in 1 2 3; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i 2>&1 | head -6 | tee -a "$OUT/first.log"
done
cost_turns 1
cold_soak
timeout 330 bash -c '. scripts/gpu/cost.sh; OUT='"$OUT"' whole_suite'
