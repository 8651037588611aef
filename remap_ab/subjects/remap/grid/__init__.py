"""The remap's grids as data (grid.py, grid.toml, grids/), the call envelope
(envelope.py; its data, envelope.toml, sits at the package's top), which points a sweep
runs (selection.py) and A's and B's signatures compared (api_compat.py). Imports the case
and the judge."""
