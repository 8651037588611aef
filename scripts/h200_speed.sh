#!/bin/sh
# Issue 22 §4 on one H200: the memcheck batch and the soak, before/after, in about 4 minutes
# of device time (the first sweep's loads: scripts/gpu/first_sweep_profile.py). Run from
# the repository root:   sh scripts/h200_speed.sh 2>&1 | tee /tmp/h200_speed.log
# Each step says what to read off. Every figure is printed, none is judged here.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
R=$(mktemp -d /tmp/remap-ab-speed.XXXX)
step() { printf '\n=== %s\n' "$*"; }
since() { python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$1"; }
# timed LABEL CMD...: runs CMD (its output dropped: the run folder has it), prints "LABEL: N s end to end, exit S"
timed() { label=$1; shift; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; rc=$?; echo "$label: $(since "$t0") s end to end, exit $rc"; }
nproc; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'

step "2. sweep --memcheck, 32 cases: clean (old vs new) against a B that reads past block_table where a row reaches its last block (goal: failing <= 2x clean; before: did not finish in 120 s)"
F="--filter path=convert,convert-counts --filter tokens=1 --filter oor=on"
python3 tests/memcheck_support.py /tmp/oobpkg row_end >/dev/null
timed "clean (expect exit 0)" python3 -m remap_ab sweep --memcheck --root "$R" --run mc-clean --no-progress $F
timed "failing (expect exit 1, [memcheck] in the cases that reach it)" env PYTHONPATH="$PYTHONPATH:/tmp/oobpkg" timeout 150 \
  python3 -m remap_ab sweep --memcheck --root "$R" --run mc-fail --no-progress --a old --b oob_remap_row_end $F
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("statuses", s["counts"]); [print(" ", f) for f in (s.get("failures") or [])[:3]]' "$R/mc-fail/summary.json"

step "3. soak, 45 s each, cold Triton cache each: before = every draw fresh, no compile-ahead; after = the defaults"
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --fresh-every 1 --compile-workers 0 --root "$R" 2>/dev/null \
  | grep -E "soak summary|cases judged|throughput|time:|soak: "
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --root "$R" 2>/dev/null \
  | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: "
echo "(after: 'Triton in the worker: N kernels compiled' near 0 means the compile-ahead's cache keys are the GPU's)"
rm -rf "$R"
