"""remap-ab bench: the performance story of the two kernels, measured on a GPU.

One module per question (issue 14):

  pr_table.py     the pull request's table: old vs new inside CUDA graphs (+ cold L2)
  contention.py   §1 the contention signature: tiles per row x tokens, floor split off
  resources.py    §2 registers, spills, shared memory, occupancy of each compiled variant
  width_scan.py   §2 one program per row at K = 256 ... 16384 against the tiled path
  decode.py       §3 µs per decode step for a model configuration, from measured calls
  cold_l2.py      §4 rotating input copies so that every call misses L2
  attention.py    §5 a sparse-attention consumer of the compacted indices: end-to-end determinism
  host.py         §6 the sweep's phase split and the wrappers' host overhead per call
  page.py         the HTML page (Jinja2) holding every table and chart, and its files
  suite.py        runs the sections within a time budget, writing each as it completes

Shared machinery: timing.py (CUDA-graph timing, floors, the budget), gate.py (nothing
is timed that disagrees with the oracle), measure.py (one gated, timed cell).
"""
