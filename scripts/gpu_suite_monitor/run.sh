#!/usr/bin/env bash
# The GPU suite (pytest -n auto) with a watch on compute-sanitizer children: every 10 s
# their age, CPU time and kernel wait channel go to $OUT/ps.log, and a child alive past
# 30 s dumps every thread's Python stack (sitecustomize.py here) into $OUT/stacks/.
# This is how the H200 hang of 2026-11-30 was located (docs/memcheck.md).
#   OUT=some/folder RUNS="a b" LIMIT=300 TEST_TIMEOUT=200 bash scripts/gpu_suite_monitor/run.sh
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
OUT="${OUT:?set OUT to a folder for the logs}"
mkdir -p "$OUT/stacks" /tmp/remap-stacks
{ nproc; nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current --format=csv
  compute-sanitizer --version | tail -1; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > "$OUT/machine.txt" 2>&1
monitor() {
  while true; do
    { echo "=== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
      ps -eo pid,ppid,stat,etimes,times,pcpu,wchan:28,args --sort=start_time | grep -E "remap_ab[.]sanitizer" | cut -c1-220
    } >> "$OUT/ps.log" 2>&1
    sleep 10
  done
}
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"  # the children inherit it: see sitecustomize.py
monitor & watcher=$!
for run in ${RUNS:-1}; do
  started=$(date +%s)
  timeout "${LIMIT:-600}" python3 -m pytest -n auto --timeout "${TEST_TIMEOUT:-300}" -rfE --durations=20 \
    --junitxml="$OUT/junit-$run.xml" > "$OUT/pytest-$run.log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - started ))s" >> "$OUT/pytest-$run.log"
  tail -2 "$OUT/pytest-$run.log"
done
kill "$watcher"
for f in /tmp/remap-stacks/*.txt; do [ "$(wc -l < "$f")" -gt 1 ] && cp "$f" "$OUT/stacks/"; done
true
