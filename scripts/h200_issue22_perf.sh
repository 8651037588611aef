#!/usr/bin/env bash
# Issue 22 §1-3 on one H200 (about 3.5 minutes of device time; --budget-s caps the bench):
#   pr          the section-3 table: old vs new, counts and DCP 4, K 512/2048, T 1/256/1024
#   contention  K=2048, old at 16/8/4/2 tiles, each beside its control (atomic replaced by a
#               write to the tile's own slot): atomic - control = the contention cost
#   width       the single tile on counts, in-place DCP and DCP compaction, vs the tiled path
#   resources   the variants loaded on the H200 beside the same variants cross-compiled for
#               sm_90 with this machine's Triton (they should be equal, variant for variant)
# then the test that asserts that equality, and the sm_90 resources table as JSON.
# Usage: scripts/h200_issue22_perf.sh [OUT_DIR]   (default reports/issue22)
cd "$(dirname "$0")/.."
out="${1:-reports/issue22}"
mkdir -p "$out"
start=$SECONDS
python3 -m remap_ab bench --sections pr,contention,width,resources --report "$out/bench" --budget-s 190 \
    --repeats 10 --scan-k 256,2048,8192,16384 --scan-tokens 1,1024 --resource-targets sm_90 \
    > "$out/bench.log" 2>&1
echo "bench: rc $? after $((SECONDS - start)) s (page: $out/bench/index.html)"
python3 -m pytest tests/test_resources.py -q -n 0 -k loaded > "$out/pytest.log" 2>&1
echo "cross-compiled == loaded test: rc $? ($(tail -1 "$out/pytest.log"))"
python3 -m remap_ab resources --targets sm_90 --json "$out/resources-sm_90.json" > "$out/resources.log" 2>&1
echo "resources sm_90: rc $? (1 = B spills where A does not: see the log's FAIL lines)"
sed -n '/=== findings ===/,$p' "$out/bench.log"
echo "total $((SECONDS - start)) s"
