#!/usr/bin/env bash
# On one H200 (~8 min): a batch's hashing_started timed and profiled (and PrivateInputs
# beside it), the whole suite, both trees' caches warmed, the first sweep function by
# function, two cost turns against cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
python3 scripts/gpu/private_inputs_bench.py > "$OUT/private-inputs.log" 2>&1
grep -E "best|batch" "$OUT/private-inputs.log" | head -12
whole_suite
warm_caches
T="remap_ab.backend:triton_key_ready remap_ab.inputs:hashing_started remap_ab.inputs:flattened remap_ab.inputs:_hashing
 remap_ab.layouts:apply_all remap_ab.call:PrivateInputs.__init__ remap_ab.call:production_findings remap_ab.call:_graph_check
 remap_ab.call:_stream_check remap_ab.batch:_proofs remap_ab.runner:reference_batch remap_ab.inputs:generate_inputs_batch"
for checks in sample off; do
  python3 scripts/gpu/first_sweep_profile.py /tmp/p-$checks --call-checks $checks --time $T > "$OUT/first-$checks.log" 2>&1
  head -24 "$OUT/first-$checks.log"
done
cost_turns 2
