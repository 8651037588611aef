"""Processes remap-ab starts and runs its work in: the worker pool, ahead-of-time
compiles, and the child compute-sanitizer runs (memcheck_child). The low-level helpers
they and the runtime use (GPU pinning, interrupts, tuning) are ``remap_ab.host``."""
