#!/usr/bin/env bash
# On one H200 (~6 min): PrivateInputs alone and beside the started hashing (the large
# inputs now hashed by threads beside the launches), the GPU tests of the changed paths,
# the first sweep function by function, three cost turns against cfacc42 (.old/,
# carried), and a 60 s cold and 30 s warm soak. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
python3 scripts/gpu/private_inputs_bench.py 2>&1 | tee "$OUT/private-inputs.log"
/usr/bin/time -f "tests wall %e s" timeout 200 python3 -m pytest -n auto -q -p no:cacheprovider tests/test_batching.py \
  tests/test_call.py tests/test_report.py tests/test_sweep_gpu.py tests/test_soak.py >"$OUT/tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|tests wall" "$OUT/tests.log" | tail -12
warm_caches
T="remap_ab.backend:triton_key_ready remap_ab.inputs:hashing_started remap_ab.inputs:flattened remap_ab.inputs:_hashing
 remap_ab.call:prepare_fresh_inputs remap_ab.layouts:apply_all remap_ab.call:PrivateInputs.__init__
 remap_ab.call:production_findings remap_ab.call:_graph_check remap_ab.call:_stream_check remap_ab.call:fresh_inputs
 remap_ab.batch:_proofs remap_ab.runner:reference_batch remap_ab.inputs:generate_inputs_batch remap_ab.sweep:Sweep.record"
for checks in sample off; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$checks --call-checks $checks --time $T > "$OUT/first-$checks.log" 2>&1
  head -30 "$OUT/first-$checks.log"
done
cost_turns 3
soaks 1 0.5
