"""The remap's property suite: Hypothesis properties of A ≡ B ≡ oracle (SPEC §7) over the
configuration strategies (``strategies/``), for implementations ``--remap-a`` /
``--remap-b`` (env ``REMAP_AB_A``/``REMAP_AB_B``).

It ships inside the package because ``remap-ab mutants`` runs it against every
seeded mutant from an installed remap-ab as well as from a checkout; ``tests/``
collects it through thin ``tests/test_properties_*.py`` modules. To run it alone:

    pytest -p remap_ab.pytest.plugin --pyargs remap_ab.subjects.remap.parts.properties
"""
