#!/usr/bin/env bash
# On one H200 (~8 min): the whole suite; both trees' Triton caches warmed; the sweep's cost
# against cfacc42 (.old/, carried), fresh processes taking turns; the first sweep of a
# fresh process, its variant loads and what the sampled call checks cost function by
# function; a 45 s soak with the defaults. Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
whole_suite
warm_caches
cost_turns 2
python3 scripts/gpu/first_sweep_profile.py /tmp/prof --call-checks sample --time \
  remap_ab.call:production_findings remap_ab.call:_stream_check remap_ab.call:_graph_check \
  remap_ab.call:fresh_inputs remap_ab.call:_captured remap_ab.call:PrivateInputs.__init__ \
  remap_ab.layouts:apply_all remap_ab.recording:rejection_row remap_ab.batch:_proofs 2>&1 | tee "$OUT/profile.log"
cold_soak
