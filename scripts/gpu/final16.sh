#!/usr/bin/env bash
# On one H200 (~2 min): what variant_loads saves on one machine instance, measured right:
# the first sweep's loads in six fresh processes, alternating without and with it, after
# one sweep warmed the cache (first_sweep_profile.py's timers now keep the wrapped
# function's source visible, which final15.sh's hid from variant_loads). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
loads_without_and_with 3
