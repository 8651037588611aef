#!/usr/bin/env bash
# On one H200: the whole suite, then the sweep's in-process and end-to-end time with the
# GPU call checks off and sampled, with and without variant preloading. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then  # pydantic is not on the GPU image: its wheels travel in .whl, into the venv
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -c 'import torch, triton, pydantic; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
/usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 240 -p no:cacheprovider >"$OUT/suite.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" | tail -30
python3 -m remap_ab sweep -j 0 --root /tmp/warm --no-progress --call-checks off >/dev/null 2>&1
for run in "0 off" "0 sample" "4 off" "4 sample" "0 off" "0 sample"; do
  set -- $run
  /usr/bin/time -f "preload $1 call-checks $2: end to end %e s" env REMAP_AB_PRELOAD_THREADS=$1 python3 -m remap_ab sweep -j 0 \
    --root /tmp/s-$RANDOM --no-progress --call-checks $2 2>&1 | grep -E "time:|end to end" | tee -a "$OUT/sweep-cost.log"
done
