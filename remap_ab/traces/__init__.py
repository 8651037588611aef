"""Traces: the calls a real process makes, recorded (``recorder.py``: ``remap_ab.record``,
and ``hook.py`` for ``REMAP_AB_RECORD=DIR``), one compressed file per sampled call
(``trace_file.py``), and replayed through A and B as cases of the subject
(the remap's ``subjects/remap/trace_subject.py``: ``remap-ab sweep --trace DIR``). docs/traces.md.
"""
