#!/usr/bin/env bash
# On one H200 (~4 min; the session's last device time): PrivateInputs beside the
# inputs' host copies (the sha256s no longer run beside the launches), the tests of the
# last two changes (hashing, workers' start-up signals) and the GPU call paths, then
# cost turns against cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
python3 scripts/gpu/private_inputs_bench.py 2>&1 | tee "$OUT/private-inputs.log"
/usr/bin/time -f "tests wall %e s" timeout 150 python3 -m pytest -n auto -q -p no:cacheprovider tests/test_sweep_interrupt.py \
  tests/test_batching.py tests/test_report.py tests/test_call.py tests/test_sweep_gpu.py tests/test_soak.py >"$OUT/tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|tests wall" "$OUT/tests.log" | tail -12
warm_caches
cost_turns 2
