#!/usr/bin/env bash
# The H200 figures of docs/performance.md "Prefill scale and cold starts" (issue 41): cold
# (emptied Triton cache) and warm sweeps of every grid, failing against passing, disk use,
# and a 16384-row report folder replayed. One log: $OUT/measure.txt (or ./measure.txt).
# Run from the repository root with remap-ab importable (python3 -m remap_ab).
OUT=${OUT:-.}; L=$OUT/measure.txt; R=/tmp/runs; W=/tmp/w; mkdir -p $W
{ nproc; python3 -c "import os,torch,triton;print(len(os.sched_getaffinity(0)),'cores;',torch.__version__,triton.__version__)"; git log --oneline -1; } >> $L
t() { local cap=$1; shift; local s=$(date +%s.%N); timeout $cap "$@" > $W/last.txt 2>&1; local rc=$?; local e=$(date +%s.%N)
  echo "== rc=$rc wall=$(python3 -c "print(round($e-$s,2))") :: ${*:1:14}" >> $L
  grep -E "^  (time:|compiled|disk:|result:|optional|  [A-Za-z_]+ (on|x) )|reproduced|outputs:|SLOWER|judged cells|FAIL —|^soak|cases" $W/last.txt | head -${LINES_KEEP:-12} >> $L; }
S="python3 -m remap_ab sweep --device cuda -j 0 --no-progress --root $R"
export TRITON_CACHE_DIR=/tmp/tc1
t 120 $S --run d_cold
for i in 1 2 3; do t 60 $S --run d_warm$i; done
sed "s|# §3.1: any negative id is padding.|# §3.1: any negative id is padding (newb).|" kernels_new/_remap.py > $W/newb.py
grep -q "(newb)" $W/newb.py || echo "newb: comment not found" >> $L
t 120 $S --b $W/newb.py --run newb_cold
t 60 $S --b $W/newb.py --run newb_warm
t 60 $S --b tests/impls/writes_inputs.py --run d_fail
export TRITON_CACHE_DIR=/tmp/tc2
t 150 $S --grid callers --a main --b main --run c_cold
t 60 $S --grid callers --a main --b main --run c_warm
t 90 $S --grid callers --a main --b tests/impls/wrong_past_row_1024.py --run c_fail
du -sh $R/c_fail >> $L
t 60 $S --grid callers --a main --b tests/impls/wrong_past_row_1024.py --run c_fail0 --reports 0
t 60 $S --grid callers --a old --b main --run c_oldmain
export TRITON_CACHE_DIR=/tmp/tc3
t 200 $S --grid models --run m_cold
t 90 $S --grid models --run m_warm
t 120 $S --grid models --b tests/impls/wrong_past_row_1024.py --run m_fail
du -sh $R/m_fail >> $L
t 90 python3 -m remap_ab run --b tests/impls/wrong_past_row_1024.py --tokens 16384 --topk 2048 --device cuda --report $W/r41
du -sh $W/r41/* >> $L
t 90 python3 -m remap_ab replay $W/r41/* --device cuda
