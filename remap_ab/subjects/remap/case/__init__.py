"""The remap's case and its inputs, the bottom of its layers: ``CaseConfig`` and its ID
(config.py), the tensors drawn from it (inputs.py, draw_kernel.py, layouts.py), what each
attention backend reads of them (backend_views.py), the remap's own check (checks.py) and
the declared shape of every file it reads back (schema.py). Imports no other folder of
the remap."""
