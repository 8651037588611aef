"""Subjects: the kernel pairs remap-ab tests, each declared as data plus a few
functions in a package of its own (issue 42). ``topology``: vLLM's topology-witness
merge (``kernels_topology``)."""
