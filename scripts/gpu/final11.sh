#!/usr/bin/env bash
# On one H200 (~6 min): the new kernel's DCP compaction with its count reduced inside its
# store (47 registers at K = 2048 for sm_90 with Triton 3.7.1) beside the kernel before
# that change (.prev/kernels_new_edf3d75.py, carried): registers on this machine's Triton,
# the pr section on the counts and DCP paths; then the first sweep's variant loads in three
# fresh processes, two cost turns against cfacc42 (.old/, carried) and a 45 s cold soak,
# all with the host heap kept (remap_ab/heap.py). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
PREV=.prev/kernels_new_edf3d75.py
python3 -m remap_ab resources --a $PREV --b new --targets sm_90 --paths counts,dcp-inplace,dcp-compact \
  --topk 512,2048,4096 -j 8 > "$OUT/resources.log" 2>&1
grep -E "K=|sm_90" "$OUT/resources.log" | head -12
timeout 150 python3 -m remap_ab bench --a $PREV --b new --sections pr --paths counts,dcp --report "$OUT/bench-pr" \
  > "$OUT/bench.log" 2>&1
grep -E "µs|us|K|FAIL|PASS" "$OUT/bench.log" | head -40
warm_caches
for i in 1 2 3; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i > "$OUT/first-$i.log" 2>&1
  head -3 "$OUT/first-$i.log"
done
cost_turns 2
cold_soak
