#!/usr/bin/env bash
# On one H200 (~3 min): what variant_loads saves on one machine instance (the first sweep's
# loads in six fresh processes, alternating without and with it, after one sweep warmed
# the cache), then every seeded mutant of the catalogue on the GPU (its kill matrix and
# each kill's verdict line as JSON). At most 8 files under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
loads_without_and_with 3
timeout 200 python3 -m remap_ab mutants --device cuda -j 8 --json "$OUT/mutants.json" > "$OUT/mutants.log" 2>&1
grep -E "^killed|KILLED|SURVIVED|NEEDS" "$OUT/mutants.log" | tail -40
