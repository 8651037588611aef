#!/usr/bin/env bash
# On one H200 (~7 min), between the suite runs: the GPU call-check tests that failed or
# were unverified (capture, streams, the hashing threads beside the sync check); both
# trees' Triton caches warmed by parallel sweeps; the cost against cfacc42 (two turns);
# what the sampled call checks cost, function by function; where a soak's time goes
# (soak_levers.sh). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
timeout 200 python3 -m pytest tests/test_call.py tests/test_mutants.py tests/test_report.py -q -n 4 -p no:cacheprovider \
  -k "capture or host_sync or private_stream or real_kernels or witness_case or race_mutants or batch_verdicts" \
  > "$OUT/recheck.log" 2>&1; tail -4 "$OUT/recheck.log"
warm_caches
cost_turns 2
python3 scripts/gpu/first_sweep_profile.py /tmp/prof-t --second --call-checks sample --time \
  remap_ab.call:production_findings remap_ab.call:_stream_check remap_ab.call:_graph_check \
  remap_ab.call:fresh_inputs remap_ab.call:_captured remap_ab.call:PrivateInputs.__init__ \
  remap_ab.layouts:apply_all remap_ab.recording:rejection_row remap_ab.batch:_proofs \
  remap_ab.runner:reference_batch remap_ab.inputs:hashing_started > "$OUT/timed-second.log" 2>&1
cat "$OUT/timed-second.log"
bash "$(dirname "$0")/soak_levers.sh"
