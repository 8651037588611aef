#!/usr/bin/env bash
# On a GPU machine: the call checks' kills (the four call mutants and the layout one)
# and the sweep's cost with and without the GPU call checks. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -m remap_ab mutants --device cuda -j 4 --only convert_in_place,token_strides_ignored,counts_read_back,private_stream \
  --json "$OUT/call-mutants.json" 2>&1 | tee "$OUT/call-mutants.log" | tail -20
# Warm the Triton cache, then time the whole grid in-process with and without the call checks.
python3 -m remap_ab sweep -j 0 --root /tmp/warm --no-progress --call-checks off >/dev/null 2>&1
for mode in off sample off sample all; do
  /usr/bin/time -f "$mode wall %e s" python3 -m remap_ab sweep -j 0 --root /tmp/s-$mode-$RANDOM --no-progress --call-checks $mode 2>&1 \
    | grep -E "verdicts|time:|result|wall" | tee -a "$OUT/sweep-cost.log"
done
