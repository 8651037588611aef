#!/usr/bin/env bash
# The GPU checks issues 58-61 still ask for, in one device call (about 9 minutes on an
# H200 with a warm start). Run from the repository root on the GPU machine, the tree under
# test installed editable (`pip install --no-deps --no-build-isolation -e .`) and pydantic
# there (the device image lacks it: carry its wheels). With a copy of the tree before the
# change in .old/ (`git archive 8e28903 --prefix=.old/ | tar x`) and remap-ab installed
# from it into the venv PY_OLD names, step 5 runs the before/after comparison too.
#
#   bash scripts/gpu_open_checks.sh [OUT]       (default: $OUT, else reports/gpu-open)
#   STEPS="1 2" bash scripts/gpu_open_checks.sh   (a subset)
#
# 1 the suite (`pytest -n auto`), every issue
# 2 the slot-mapping subject: its sweep in a fresh process, host+copy against the device
#   kernel, its soak and mutants (issue 58, scripts/slotmap_gpu.sh)
# 3 the recorder's overhead per call and disk per 10,000 calls (issue 59)
# 4 mutants of the topology and the slot mapping exit 0; a soak whose B stalls stops
#   within seconds of its deadline (issue 60)
# 5 the default sweep before/after: fresh processes and two sweeps in one process,
#   interleaved; the cold callers and models grids; results.csv of each (issue 61)
set -u
out=${1:-${OUT:-reports/gpu-open}}
mkdir -p "$out"
steps=${STEPS:-1 2 3 4 5}
py=${PY:-python}
export PYTHONUNBUFFERED=1
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "== $* ($(date +%T))"; }

if has 1; then
  stamp "1 suite"
  t0=$SECONDS
  timeout 400 "$py" -m pytest -n auto -q -p no:cacheprovider -rf > "$out/suite.txt" 2>&1
  echo "suite rc=$? in $((SECONDS - t0)) s"; tail -15 "$out/suite.txt"
fi
if has 2; then
  stamp "2 slot mapping"
  timeout 200 bash scripts/slotmap_gpu.sh "$out/slotmap"; echo "slotmap rc=$?"
fi
if has 3; then
  stamp "3 recorder overhead"
  timeout 120 "$py" scripts/record_overhead.py 2>&1 | tee "$out/record_overhead.txt"
fi
if has 4; then
  stamp "4 mutants and deadlines"
  for s in topology slotmap; do
    timeout 120 "$py" -m remap_ab mutants --subject "$s" > "$out/mutants-$s.txt" 2>&1
    echo "mutants --subject $s rc=$?"; tail -3 "$out/mutants-$s.txt"
  done
  t0=$SECONDS
  REMAP_AB_STALL_AFTER=3 timeout 120 "$py" -m remap_ab soak --minutes 0.5 --b tests/impls/stalls.py \
    --root "$out/soak" > "$out/soak-stall.txt" 2>&1
  echo "stalling soak rc=$? after $((SECONDS - t0)) s (deadline 30 s)"; grep -E "ABANDONED|deadline" "$out/soak-stall.txt" | head -3
fi
if has 5 && [ -n "${PY_OLD:-}" ] && [ -d .old ]; then
  stamp "5 before/after"
  sweep() {  # tree run-name args...
    local tree=$1 run=$2; shift 2
    local bin=$py dir=.
    [ "$tree" = old ] && bin=$PY_OLD && dir=.old
    local t0=$SECONDS
    (cd "$dir" && "$bin" -m remap_ab sweep -j 0 --no-progress --root "/tmp/gpu-open-$tree" --run "$run" "$@" \
      > "/tmp/gpu-open-$tree-$run.log" 2>&1)
    echo "$tree $run rc=$? e2e $((SECONDS - t0)) s | $(grep -E '^  time:' "/tmp/gpu-open-$tree-$run.log" | cut -c1-80)"
  }
  export TRITON_CACHE_DIR=/tmp/gpu-open-cache
  sweep old warm; sweep new warm
  for i in 1 2 3; do sweep old "default$i"; sweep new "default$i"; done
  for g in callers models; do
    for t in old new; do TRITON_CACHE_DIR="/tmp/gpu-open-cold-$g-$t" sweep "$t" "$g-cold" --grid "$g"; done
  done
  for t in old new; do
    for r in default1 callers-cold models-cold; do cp "/tmp/gpu-open-$t/$r/results.csv" "$out/$t-$r.csv" 2>/dev/null; done
  done
  echo "compare: python scripts/compare_results.py $out/old-default1.csv $out/new-default1.csv order_differs,order_differs_rows"
fi
