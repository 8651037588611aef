"""The topology-witness merge as a subject: what the machinery needs to test
``kernels_topology`` (contract: docs/topology.md). One module per job, data flowing
one way:

    config.py       the case (``TopologyCase``) and the value domains
    inputs.py       a case's tensors, from a counter-based hash (same bytes on any device)
    oracle.py       the independent per-row pure-Python implementation
    calls.py        the one way to call A, B or the oracle, and what "equal" means
    properties.py   the PR's stated properties, as checks returning findings
    check.py        one case end to end: mismatches (blame a side) and findings (on a property)
    report.py       a judged case's results row (the verdict) and, failing, its report folder
    subject.py      ``SUBJECT`` (remap_ab.subject.Subject): what the sweep, the worker pool and
                    the summary call (``remap-ab sweep --subject topology``)
    strategies.py   Hypothesis strategies: pattern cases, and explicit rows for shrinking
    replay.py       a case found by its report folder, JSON or ID, judged again beside its saved verdict
    replay_command.py, soak_command.py, bench.py, mutants.py
                    the subject's parts of ``remap-ab replay``, ``soak``, ``bench`` and ``mutants``
    __main__.py     ``python -m remap_ab.subjects.topology TARGET``: an alias of
                    ``remap-ab replay --subject topology TARGET``
    grid.toml       the grid, as data (grid.py expands it)
    rejections.toml the bad calls and the ValueError each must raise (rejections.py)
    mutants.toml    seeded bugs in the fused kernel (mutants.py builds them)

Importing this package loads no Triton: only ``calls`` imports the fused kernel, and
only when B is called or resolved.
"""
