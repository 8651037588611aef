#!/usr/bin/env bash
# Issue 22 §1-3 on one H200, one bench run (about 3-4 minutes; --budget-s caps it):
#   pr          the section-3 table: old vs new, counts and DCP 4, K 512/2048, T 1/256/1024
#   contention  K=2048, old at 16/8/4/2 tiles, each beside its control (atomic replaced by a
#               write to the tile's own slot): atomic - control = the contention cost
#   width       the single tile on counts, in-place DCP and DCP compaction, vs the tiled path
#   resources   the variants loaded on the H200 beside the same variants cross-compiled for
#               sm_90 with the machine's Triton (they should be equal, variant for variant)
# Usage: scripts/h200_issue22_perf.sh [OUT_DIR]   (default reports/bench-issue22)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-reports/bench-issue22}"
python3 -m remap_ab bench --sections pr,contention,width,resources --report "$out" --budget-s 210 \
    --repeats 10 --scan-k 256,2048,8192,16384 --scan-tokens 1,1024 --resource-targets sm_90 \
    2>&1 | tee "$out.log"
