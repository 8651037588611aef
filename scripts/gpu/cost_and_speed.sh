#!/usr/bin/env bash
# On one H200 (~8 min). Issue 20: the sweep's cost against cfacc42 (its tree carried in
# .old/), fresh processes taking turns, warm Triton caches. Issue 22 §4: the first sweep's
# variant loads (first_sweep_profile.py), then sweep --memcheck clean vs failing and the
# soak (scripts/h200_speed.sh, steps 2 and 3). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
( cd .old && python3 -c 'import remap_ab; print("before = cfacc42 from", remap_ab.__file__)' )
warm_caches
cost_turns 2
( cd .old && /usr/bin/time -f "cfacc42, default -j: end to end %e s" python3 -m remap_ab sweep --no-progress --root /tmp/oj 2>&1 | grep -E "verdicts:|time:|end to end" ) | tee -a "$OUT/cost.log"
/usr/bin/time -f "now, default -j and call checks: end to end %e s" python3 -m remap_ab sweep --no-progress --root /tmp/nj 2>&1 | grep -E "verdicts:|time:|end to end" | tee -a "$OUT/cost.log"
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --call-checks sample 2>&1 | tee "$OUT/profile.log"
sh scripts/h200_speed.sh 2>&1 | tee "$OUT/speed.log"
