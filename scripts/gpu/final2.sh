#!/usr/bin/env bash
# On one H200 (~6 min), the last device time of a session: the whole suite; a 45 s soak
# with the defaults (cold Triton cache); then, if time is left, one cost turn against
# cfacc42 (.old/, carried). Logs under $OUT.
. "$(dirname "$0")/setup.sh"
. "$(dirname "$0")/cost.sh"
whole_suite
cold_soak
warm_caches
cost_turns 1
