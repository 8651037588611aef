#!/usr/bin/env bash
# On one H200 (~8.5 min), the session's closing run on the final tree: hashing_started
# timed (its pinned host buffers now in 16 MB chunks), both trees' caches warmed, the
# first sweep function by function, two cost turns against cfacc42 (.old/, carried), a
# 45 s soak from a cold Triton cache, and the whole suite last. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
python3 scripts/gpu/private_inputs_bench.py > "$OUT/private-inputs.log" 2>&1
grep -E "best|batch" "$OUT/private-inputs.log" | head -12
warm_caches
T="remap_ab.inputs:hashing_started remap_ab.inputs:flattened remap_ab.call:production_findings
 remap_ab.call:PrivateInputs.__init__ remap_ab.batch:_proofs remap_ab.inputs:generate_inputs_batch"
python3 scripts/gpu/first_sweep_profile.py /tmp/p-sample --time $T > "$OUT/first-sample.log" 2>&1
head -12 "$OUT/first-sample.log"
cost_turns 2
cold_soak
timeout 330 bash -c '. scripts/gpu/cost.sh; OUT='"$OUT"' whole_suite'
