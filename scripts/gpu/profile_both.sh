#!/usr/bin/env bash
# On one H200 (~3 min): the second sweep of a process cProfiled (no variant loads in it:
# the per-call cost alone), this tree and cfacc42's (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
warm_caches
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --second --cprofile 45 > "$OUT/now-second.log" 2>&1
( cd .old && python3 ../scripts/gpu/first_sweep_profile.py /tmp/prof-old --second --cprofile 45 > "$OUT/old-second.log" 2>&1 )
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --second --call-checks off > "$OUT/now-second-plain.log" 2>&1
( cd .old && python3 ../scripts/gpu/first_sweep_profile.py /tmp/prof-old --second > "$OUT/old-second-plain.log" 2>&1 )
head -3 "$OUT"/*-plain.log "$OUT"/*-second.log
