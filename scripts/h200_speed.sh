#!/bin/sh
# Issue 22 §4 on one H200, before/after, in about 4-5 minutes of device time. Run from
# the repository root:   sh scripts/h200_speed.sh 2>&1 | tee /tmp/h200_speed.log
# Each step says what to read off. Every figure is printed, none is judged here.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
R=$(mktemp -d /tmp/remap-ab-speed.XXXX)
step() { printf '\n=== %s\n' "$*"; }
secs() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); s=m["last_session"]; print("in-process %.2f s (%s)" % (s["wall_seconds"], ", ".join("%s %.2f" % kv for kv in s["phase_seconds"].items())))' "$1"; }
nproc; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'

step "1. first sweep of a fresh process (-j 0, warm Triton cache): before = no preloading, after = preloading"
python3 -m remap_ab sweep -j 0 --root "$R" --run warm --no-progress >/dev/null 2>&1
echo "(the cache is warm: $(secs "$R/warm/run.json"))"
for threads in 0 4; do
  /usr/bin/time -f "end to end %e s" env REMAP_AB_PRELOAD_THREADS=$threads python3 - "$R" "$threads" <<'PY'
import json, sys, time
from remap_ab.sweep import Sweep, SweepOptions
root, threads = sys.argv[1], sys.argv[2]
for n in ("first", "second"):  # two sweeps in one fresh process: the README's figure is the second's
    s = Sweep(SweepOptions(workers=0, root=root, run=f"p{threads}-{n}", progress=False))
    s.prepare()
    s.run()
    m = json.load(open(f"{root}/p{threads}-{n}/run.json"))["last_session"]
    print(f"REMAP_AB_PRELOAD_THREADS={threads} {n} sweep of the process: in-process {m['wall_seconds']:.2f} s "
          f"({', '.join(f'{k} {v:.2f}' for k, v in m['phase_seconds'].items())})")
PY
done

step "2. sweep --memcheck, 32 cases: clean (old vs new) against a B with a finding in every case (goal: failing <= 2x clean; before: did not finish in 120 s)"
F="--filter path=convert,convert-counts --filter tokens=1 --filter oor=on"
python3 tests/memcheck_support.py /tmp/oobpkg row_end >/dev/null
/usr/bin/time -f "clean: %e s end to end" python3 -m remap_ab sweep --memcheck --root "$R" --run mc-clean $F >/dev/null 2>&1; echo "exit $?"
PYTHONPATH="$PYTHONPATH:/tmp/oobpkg" /usr/bin/time -f "failing: %e s end to end" timeout 300 \
  python3 -m remap_ab sweep --memcheck --root "$R" --run mc-fail --a old --b oob_remap_row_end $F >/dev/null 2>&1
echo "exit $? (expect 1: every case fails [memcheck])"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("statuses", s["counts"]); [print(" ", f) for f in (s.get("failures") or [])[:3]]' "$R/mc-fail/summary.json"

step "3. soak, 45 s each, cold Triton cache each: before = every draw fresh, no compile-ahead; after = the defaults"
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --fresh-every 1 --compile-workers 0 --root "$R" 2>/dev/null \
  | grep -E "soak summary|cases judged|throughput|time:|soak: "
TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --root "$R" 2>/dev/null \
  | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: "
echo "(after: 'Triton in the worker: N kernels compiled' near 0 means the compile-ahead's cache keys are the GPU's)"
rm -rf "$R"
