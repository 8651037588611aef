#!/usr/bin/env bash
# Cold and warm start of GPU sweeps (issue 41, part 3), each cold run with an emptied
# Triton cache: the callers grid, the models grid, and the first default sweep of a B
# whose kernels no cache holds (a copy of kernels_new with one comment changed inside
# the kernel, so its Triton cache key is new; A's kernels are cached).
#
#   scripts/cold_start.sh [ahead|serial] [callers|models|newb ...]
#
# ahead (default): as remap-ab runs (variants compiled ahead on the host's cores);
# serial: REMAP_AB_COMPILE_WORKERS=0, each variant compiled at its launch (as before).
# J=N picks -j (default 0, in-process); EXTRA="--max-tokens 1 ..." adds sweep options (a dry run on a CPU). Writes $OUT/cold_start-<mode>.txt (or ./ without $OUT).
set -u
mode=${1:-ahead}; shift || true
runs=${*:-callers models newb}
out=${OUT:-.}/cold_start-$mode.txt
work=$(mktemp -d)
py=${PY:-python}
[ -x .venv/bin/python ] && py=.venv/bin/python
if [ "$mode" = serial ]; then export REMAP_AB_COMPILE_WORKERS=0; else unset REMAP_AB_COMPILE_WORKERS; fi
{
  echo "mode $mode, -j ${J:-0}, $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ)"
  echo "cores: nproc $(nproc); affinity $($py -c 'import os; print(len(os.sched_getaffinity(0)))')"
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1
  $py -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
} > "$out"

sweep() {  # label, then sweep arguments
  local label=$1; shift
  local t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  $py -m remap_ab sweep -j "${J:-0}" --no-progress --root "$work/runs" ${EXTRA:-} "$@" > "$work/last.txt" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  printf '%-28s %7.1f s end to end (exit %s)\n' "$label" "$(awk "BEGIN{print $t1 - $t0}")" "$rc" >> "$out"
  grep -E '^  (time:|compiled )|result:' "$work/last.txt" | sed 's/^/    /' >> "$out"
}

for r in $runs; do
  export TRITON_CACHE_DIR=$work/triton-$r
  rm -rf "$TRITON_CACHE_DIR"; mkdir -p "$TRITON_CACHE_DIR"
  case $r in
    callers|models)
      sweep "$r grid cold" --grid "$r"
      sweep "$r grid warm" --grid "$r" ;;
    newb)
      sweep "default sweep, warming A" --a old --b new
      newb=$work/newb_$(date +%s%N).py
      sed "s|# §3.1: any negative id is padding.|# §3.1: any negative id is padding ($(basename "$newb")).|" kernels_new/_remap.py > "$newb"
      grep -q "$(basename "$newb")" "$newb" || { echo "newb: the kernel comment was not found" >> "$out"; continue; }
      sweep "default sweep, new B cold" --a old --b "$newb"
      sweep "default sweep, new B warm" --a old --b "$newb" ;;
  esac
done
cat "$out"
rm -rf "$work"
