"""vLLM's sparse-MLA index remap as a subject (docs/spec.md is its contract):
``subject.SUBJECT`` is what the machinery asks of it; the rest is the remap's own
pipeline, one module per step:

    config.py        the case (``CaseConfig``), its fields' domains and its 12-hex-digit ID
    inputs.py        a case's tensors, from a counter-based hash (same bytes on any device)
    layouts.py       the memory layouts a case's inputs take
    registry.py      implementations by name, module, file or REV:PATH; vllm_shim.py, features.py
    runner.py        one case: A, B and the oracle's reference (oracle.py)
    batch.py         many cases with few host syncs (the sweep's, the soak's and the plugin's engine)
    rejections.py    SPEC §6's violating calls (rejections.toml)
    recording.py     what a judged case leaves in a run folder: its row, and a report folder
    grid.py          the grids as data (grid.toml, grids/), and the call envelope (envelope.py)
    selection.py     which grid points a sweep runs (filters, the token cap)
    summary.py       the remap's part of a run's summary
"""
