"""Two results.csv compared by case ID on every column but the timings, ``worker`` and
``report`` (and any given as a third argument, comma-separated: ``order_differs`` varies
between two GPU runs of one tree). Exit 1 where a column differs.

    python scripts/compare_results.py BEFORE.csv AFTER.csv [COLUMN,...]
"""
import sys

import pandas as pd

a = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False).set_index("case_id")
b = pd.read_csv(sys.argv[2], dtype=str, keep_default_na=False).set_index("case_id")
skip = {"index", "worker", "report", "a_ms", "b_ms", "oracle_ms", "seconds", "a_us", "b_us"}
skip |= {c for c in a.columns if c.endswith("_ms") or c.endswith("_us") or "time" in c or c.endswith("_s")}
skip |= set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()
common = a.index.intersection(b.index)
cols = [c for c in a.columns if c in b.columns and c not in skip]
only_a, only_b = len(a.index.difference(b.index)), len(b.index.difference(a.index))
diff = {c: int((a.loc[common, c] != b.loc[common, c]).sum()) for c in cols}
bad = {c: n for c, n in diff.items() if n}
print(f"cases: {len(a)} vs {len(b)}; common {len(common)}; only before {only_a}; only after {only_b}")
print(f"columns compared ({len(cols)}): {', '.join(cols)}")
print(f"columns only before: {sorted(set(a.columns) - set(b.columns))}; only after: {sorted(set(b.columns) - set(a.columns))}")
print("differing columns:", bad or "none")
for c in bad:
    i = common[(a.loc[common, c] != b.loc[common, c]).values][0]
    print(f"  {c} first at {i}: {a.loc[i, c]!r} vs {b.loc[i, c]!r}")
sys.exit(1 if bad else 0)
