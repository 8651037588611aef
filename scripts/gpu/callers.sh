#!/usr/bin/env bash
# On a GPU machine: the callers grid (issue 24), old vs new, three times (the old kernel's
# pattern-D compaction order races on a GPU, so each run's by-backend table shows whether
# FlashInfer SM100's view ever differs), then the planted-bug and view tests. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
for i in 1 2 3; do
  /usr/bin/time -f "run $i wall %e s" python3 -m remap_ab sweep --grid callers -j 1 --root "$OUT/runs" --run callers-$i \
    --no-progress 2>&1 | tee "$OUT/callers-$i.log" | grep -vE "^\s+[0-9a-f]{12} "
  cp "$OUT/runs/callers-$i/summary.json" "$OUT/summary-$i.json"
done
python3 -m pytest tests/test_callers.py tests/test_properties_callers.py -q -n 4 2>&1 | tail -5 | tee "$OUT/tests.log"
