"""The host side of a process that runs kernels: which GPU it is pinned to (gpus), how
it takes Ctrl-C (interrupts), and what a process remap-ab started may change in itself
(tuning: the batched interpreter, malloc's thresholds (heap), the GIL's switch
interval (gil)). Low-level: these import nothing of remap-ab above errors and the
interpreter; the processes remap-ab starts are ``remap_ab.processes``."""
