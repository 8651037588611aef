#!/usr/bin/env bash
# On one H200 (~1 min): a capture broken by a host sync, then everything that draws random
# numbers on the device afterwards in the same process (the side-stream load of the race
# witnesses), in one pytest process, test_call's GPU tests first.
. "$(dirname "$0")/setup.sh"
timeout 150 python3 -m pytest tests/test_call.py tests/test_mutants.py -q -n 0 -p no:cacheprovider \
  -k "capture or host_sync or private_stream or real_kernels or witness_case or race_mutants" 2>&1 | tail -15
