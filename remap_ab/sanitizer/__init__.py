"""Memory checking: every interpreted access on the CPU (memcheck), compute-sanitizer on a GPU (compute, child)."""
