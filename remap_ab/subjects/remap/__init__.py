"""vLLM's sparse-MLA index remap as a subject (docs/spec.md is its contract):
``subject.SUBJECT`` is what the machinery asks of it; the rest is the remap's own
pipeline, one folder per layer, each importing only the folders above it in this list
(docs/layout.md, "The remap's layers"; tests/test_layout.py):

    case/      the case (``CaseConfig``), its inputs and their layouts, the shapes of its files
    judge/     implementations by name, the one call, the oracle, one case and many, the verdict
    grid/      the grids and the call envelope as data, the selection, A's and B's signatures
    report/    a judged case's row and report folder, the run summary's part
    parts/     its parts of remap-ab's commands (run, replay, soak, bench, mutants, ...)

At the top: ``subject.py``, ``trace_subject.py`` (a trace as a sweep), ``public.py``
(its names on remap-ab's public surface), and the names-only modules the machinery reads
by module path (``traced.py``, ``shared_options.py``).
"""
