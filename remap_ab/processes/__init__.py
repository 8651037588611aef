"""Processes remap-ab starts and runs its work in: the worker pool, GPU pinning, interrupts,
ahead-of-time compiles, and the tuning a process remap-ab started may give itself."""
