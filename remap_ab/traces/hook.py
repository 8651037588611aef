"""Record a process one does not control: with ``REMAP_AB_RECORD=DIR`` set, importing
this module starts a recorder (``recorder.from_environment``), and it stops, writing
what is pending, when the process exits. Unset, importing it does nothing.

The line to add, where the process imports it before the kernels' module (the top of
its entry script, or a ``sitecustomize.py`` on its ``PYTHONPATH``, which every Python
process and its spawned workers import at start-up)::

    import remap_ab.traces.hook

Settings: ``REMAP_AB_RECORD_EVERY`` (default 100), ``REMAP_AB_RECORD_MB`` (default
256), ``REMAP_AB_RECORD_MODULE`` (comma-separated modules the functions are looked up
in; default vLLM's ``vllm.v1.attention.backends.mla.sparse_utils``). Nothing is
imported early: a module not yet imported is wrapped the moment it is (docs/traces.md).
"""

import os

from remap_ab.traces.recorder import from_environment

RECORDER = from_environment(os.environ)
