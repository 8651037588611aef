#!/usr/bin/env bash
# On one H200 (~6 min): the GPU tests of the two changes (Triton's background hash
# waited for; a batch's inputs hashed from one gathered host buffer), both trees'
# caches warmed, the first sweep of a fresh process function by function (call checks
# sampled and off), then three cost turns against cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
/usr/bin/time -f "tests wall %e s" timeout 200 python3 -m pytest -n auto -q -p no:cacheprovider tests/test_batching.py \
  tests/test_call.py tests/test_report.py tests/test_sweep_gpu.py >"$OUT/tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|tests wall" "$OUT/tests.log" | tail -12
warm_caches
T="remap_ab.backend:triton_key_ready remap_ab.inputs:hashing_started remap_ab.inputs:_digests remap_ab.inputs:flattened
 remap_ab.layouts:apply_all remap_ab.call:PrivateInputs.__init__ remap_ab.call:production_findings remap_ab.call:_graph_check
 remap_ab.call:_stream_check remap_ab.call:fresh_inputs remap_ab.batch:_proofs remap_ab.batch:run_batch
 remap_ab.recording:judge_and_record remap_ab.rejections:attempt remap_ab.runner:reference_batch
 remap_ab.inputs:generate_inputs_batch remap_ab.sweep:Sweep.record"
for checks in sample off; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$checks --call-checks $checks --time $T > "$OUT/first-$checks.log" 2>&1
  head -40 "$OUT/first-$checks.log"
done
python3 scripts/gpu/first_sweep_profile.py /tmp/p-prof --cprofile 45 > "$OUT/first-cprofile.log" 2>&1
head -3 "$OUT/first-cprofile.log"
cost_turns 3
