#!/usr/bin/env bash
# On one H200: the whole suite, every mutant on the GPU, the call checks' sweep cost and
# the callers grid once. Logs under $OUT (each step's tail is printed too).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# pydantic is not on the GPU image: its wheels travel in .whl (carry it), into the venv
# itself, so that every subprocess a test starts finds it.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl \
    >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
/usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 300 -p no:cacheprovider --junitxml="$OUT/junit.xml" >"$OUT/suite.log" 2>&1
tail -25 "$OUT/suite.log"
/usr/bin/time -f "mutants wall %e s" python3 -m remap_ab mutants --device cuda -j 8 --json "$OUT/mutants-gpu.json" >"$OUT/mutants.log" 2>&1
grep -E "^killed|SURVIVED|BROKEN|NO WITNESS|wall" "$OUT/mutants.log" | tail -8
python3 -m remap_ab sweep -j 0 --root /tmp/warm --no-progress --call-checks off >/dev/null 2>&1
/usr/bin/time -f "callers grid end to end %e s" python3 -m remap_ab sweep --grid callers -j 0 --root /tmp/callers --run c \
  --no-progress >"$OUT/callers.log" 2>&1; grep -vE "^\s+[0-9a-f]{12} " "$OUT/callers.log" | tail -30
for mode in off sample off sample; do
  /usr/bin/time -f "$mode end to end %e s" python3 -m remap_ab sweep -j 0 --root /tmp/s-$mode-$RANDOM --no-progress --call-checks $mode 2>&1 \
    | grep -E "verdicts|time:|result|end to end|rejections" | tee -a "$OUT/sweep-cost.log"
done
