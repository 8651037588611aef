"""What every subject's property suite shares: the named Hypothesis profiles
(``profiles.py``: examples and the size budget, ``--remap-profile``). The suites are
the subjects' own (the remap's: ``remap_ab/subjects/remap/parts/properties/``; the
topology's: ``remap_ab/subjects/topology/properties.py``).
"""
