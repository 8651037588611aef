#!/usr/bin/env bash
# On one H200 (~10 min): the whole suite; then the sweep's cost against cfacc42 (.old/,
# carried), fresh processes taking turns with warm caches; the first sweep's variant
# loads; a 45 s soak with the defaults; the second sweep cProfiled, both trees. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
/usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 240 -p no:cacheprovider >"$OUT/suite.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|suite wall" "$OUT/suite.log" | tail -30
warm_caches
cost_turns 1
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --call-checks sample 2>&1 | tee "$OUT/profile.log"
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --root /tmp/soak 2>/dev/null \
  | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: " | tee "$OUT/soak.log"
# The per-call cost alone: the second sweep of a process, cProfiled, this tree and cfacc42's.
python3 scripts/gpu/first_sweep_profile.py /tmp/prof2 --second --cprofile 40 --call-checks off > "$OUT/now-second.log" 2>&1
( cd .old && python3 ../scripts/gpu/first_sweep_profile.py /tmp/prof-old --second --cprofile 40 > "$OUT/old-second.log" 2>&1 )
head -4 "$OUT"/*-second.log
