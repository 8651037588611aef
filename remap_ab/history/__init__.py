"""``remap-ab history``: every revision that touched a file, each A/B'd against the one
before it (or one fixed revision) by the sweep (docs/history.md).

  revisions.py  the revisions ``git log --follow`` lists for the file, oldest first, with
                the file's path and blob at each
  state.py      the history folder under --root: history.json (settings, finished rows,
                what each blob's load gave) and one sweep run folder per pair
  row.py        a pair's row from its sweep's summary (the verdict), printed and as JSON
  run.py        the walk: which pairs run, each through ``sweep.run.Sweep``
"""
