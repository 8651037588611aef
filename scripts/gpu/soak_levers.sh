#!/usr/bin/env bash
# On one H200 (~3.5 min): where a soak's time goes (issue 22 §4, goal >= 50 cases/s). Seed 1
# each time, so every run after the first finds its variants in Triton's cache; the
# first (cold) is the defaults as a user meets them, the second the same warm under
# cProfile, then one lever at a time. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
soak() {  # soak LABEL ARGS...: a 24 s soak, its summary lines into $OUT/soak-levers.log
  local label=$1; shift
  echo "== $label: $*" | tee -a "$OUT/soak-levers.log"
  "$@" --minutes 0.4 --seed 1 --root "/tmp/soak-$label" 2>/dev/null \
    | grep -E "cases judged|throughput|time:" | tee -a "$OUT/soak-levers.log"
}
soak cold python3 -m remap_ab soak
soak profiled python3 -m cProfile -o "$OUT/soak.prof" -m remap_ab soak
python3 - "$OUT/soak.prof" <<'PY' > "$OUT/soak-profile.log"
import pstats, sys
s = pstats.Stats(sys.argv[1])
s.sort_stats("tottime").print_stats(35)
s.sort_stats("cumulative").print_stats(60)
PY
soak no-contention python3 -m remap_ab soak --contend-every 0
soak batch-64 python3 -m remap_ab soak --batch 64
soak tokens-1024 python3 -m remap_ab soak --max-tokens 1024
head -c 6000 "$OUT/soak-profile.log"
