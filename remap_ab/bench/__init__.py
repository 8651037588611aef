"""remap-ab bench's toolkit, for any subject's bench part (which knows its kernels; this
package knows none):

  timing.py    CUDA-graph timing interleaved repeat by repeat, eager loops beside them,
               the empty kernel's launch floor, and the run's time budget
  cold_l2.py   rotating input copies so that every call misses L2
  measure.py   one timed cell: variants gated by the subject's judge, captured, timed
               beside their floors (warm and cold L2), verified after timing
  host.py      host µs per call, and the sweep timed in this process or a fresh one
  suite.py     sections run in order within the budget, the page rewritten after each
  page.py      the HTML page (Jinja2) holding every table and chart, and its files
               (figures.py: the charts)
  pairs.py     a subject's A and B timed shape by shape (its shapes and calls as data),
               judged by the speed gate (remap_ab/speed.py)
  session.py   what the command line hands a subject's bench part

The subjects' parts: remap_ab/subjects/remap/parts/bench/ (the default), remap_ab/subjects/
topology/bench.py (pairs.py's).
"""
