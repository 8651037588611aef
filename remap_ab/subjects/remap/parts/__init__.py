"""The remap's parts of remap-ab's commands (its subject's ``parts`` name them): run,
replay, soak, nondet, resources, bench/, mutants/ and the property suite (properties/),
the soak's draws, the pytest grid's hooks, a recorded call as a case (trace_case.py,
trace_workload.py) and a compute-sanitizer child's cases (memcheck.py). Imports any
folder below; no folder below imports it."""
