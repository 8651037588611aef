#!/usr/bin/env bash
# On one H200 (~6 min): the whole suite, then the mutants on the device. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
/usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 240 -p no:cacheprovider >"$OUT/suite.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|suite wall" "$OUT/suite.log" | tail -30
