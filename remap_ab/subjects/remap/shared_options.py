"""The remap's words in the options every subject shares (remap_ab/options.py reads
the default subject's): the grid's size cap, the dimensions ``--filter`` names and what
a report folder holds. The flags stay the command line's and the plugin's for every
subject; the topology reads the size cap as its rows."""

from __future__ import annotations

# The grid's size cap: a point's token rows (CaseConfig.tokens).
SIZE_CAP = {
    "flag": "--max-tokens",
    "plugin": "--remap-grid-max-tokens",
    "help": "skip grid points with more than N token rows (default: {default})",
    "default_text": "none; 3 keeps 576 of 1728",
}
# The grid's dimensions (grid.toml), as --filter's help lists them.
FILTER_DIMENSIONS = "path, k, tokens, invalid, oor, dcp, rank, flags, layout, table, negatives, requests"
# What a failing case's report folder holds (report.py).
REPORT_FOLDER = "inputs, outputs, lane picture, diff"
