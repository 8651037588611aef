#!/usr/bin/env bash
# On one H200 (~2 min): what variant_loads saves on one machine instance, measured right:
# the first sweep's loads in six fresh processes, alternating without and with it, after
# one sweep warmed the cache (first_sweep_profile.py's timers now keep the wrapped
# function's source visible, which final15.sh's hid from variant_loads). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm --call-checks off 2>&1 | grep -E "verdicts:"
for i in 1 2 3; do
  for mode in --no-share ""; do
    echo "[${mode:-shared}]" | tee -a "$OUT/first.log"
    python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i$mode $mode 2>&1 | head -4 | tee -a "$OUT/first.log"
  done
done
