"""The remap's bench (``remap-ab bench``, the default subject): the performance story of
the two kernels, measured on a GPU, one module per question (issue 14):

  pr_table.py     the pull request's table: old vs new inside CUDA graphs (+ cold L2)
  contention.py   §1 the contention signature: tiles per row x tokens, floor split off
                  (contention_control.py: the same kernel without its atomics)
  resources.py    §2 registers, spills, shared memory, occupancy of each compiled variant
                  (cross_compile.py: every variant of A and B for each GPU target)
  width_scan.py   §2 one program per row at K = 256 ... 16384 against the tiled path
  decode.py       §3 µs per decode step for a model configuration, from measured calls
  attention.py    §5 a sparse-attention consumer of the compacted indices: end-to-end determinism
  host.py         §6 the sweep's kernels phase and the wrappers' host overhead per call
  suite.py        the sections, run by remap_ab/bench/suite.py within a time budget
  command.py      its options and their help, and its entry point (``add_arguments``, ``main``)
  tweaks.py       each performance tweak against the sweep it speeds (``python -m``)

Its own machinery: gate.py (nothing is timed that disagrees with the oracle), measure.py
(the remap's variants, gated by it). The timing, cold L2, the page and the section
runner are remap_ab/bench/'s, which knows no kernel.
"""

from remap_ab.subjects.remap.parts.bench.command import DESCRIPTION, REPEATS_HELP, add_arguments, main

__all__ = ["DESCRIPTION", "REPEATS_HELP", "add_arguments", "main"]
