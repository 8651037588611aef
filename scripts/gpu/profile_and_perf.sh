#!/usr/bin/env bash
# On one H200 (~7 min): where a fresh process's first sweep spends its time
# (first_sweep_profile.py, call checks off and sampled, then cProfiled), and issue 22's
# sections 1-3 (h200_issue22_perf.sh). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
/usr/bin/time -f "cold-cache sweep: %e s" python3 -m remap_ab sweep -j 0 --root /tmp/warm --no-progress --call-checks off 2>&1 | grep -E "time:|cold-cache"
for checks in off sample; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/prof --call-checks $checks 2>&1 | tee -a "$OUT/profile.log"
done
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --call-checks off --cprofile 40 > "$OUT/cprofile.log" 2>&1
head -12 "$OUT/cprofile.log"
bash scripts/h200_issue22_perf.sh /tmp/i22
for f in bench.log pytest.log resources.log resources-sm_90.json; do cp "/tmp/i22/$f" "$OUT/i22-$f" 2>/dev/null; done
tar czf "$OUT/i22-bench-page.tgz" -C /tmp/i22 bench 2>/dev/null
