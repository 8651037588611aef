"""A subject with no kernel at all: the sum of ``0..n-1`` by a loop (A) and by Gauss's
formula (B), with the formula's result as the oracle. Its only use is to show that the
sweep, the worker pool, the run folder and the summary run a subject they know nothing
of (tests/test_subjects.py; tests/ is on sys.path under pytest). ``B_WRONG_FROM`` (an environment variable, so that worker
processes see it too) makes B wrong from that n on.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from remap_ab.errors import ConfigError
from remap_ab.status import Status
from remap_ab.subject import JudgeSettings, Point, Selection, Subject, SummaryLines

GRID = [{"n": n, "step": step} for n in (0, 1, 2, 7, 100, 1000) for step in (1, 2)]
B_WRONG_FROM = "SUMS_B_WRONG_FROM"


def _id(case: dict) -> str:
    return hashlib.sha256(json.dumps(case, sort_keys=True).encode()).hexdigest()[:12]


def _loop(n: int, step: int) -> int:
    total = 0
    for i in range(0, n, step):
        total += i
    return total


def _formula(n: int, step: int) -> int:
    terms = (n + step - 1) // step
    wrong = os.environ.get(B_WRONG_FROM)
    return step * terms * (terms - 1) // 2 + (1 if wrong is not None and n >= int(wrong) else 0)


class Sums(Subject):
    name = "sums_subject:SUBJECT"
    title = "the sum of an arithmetic progression"
    default_a = "loop"
    default_b = "formula"
    columns = ("status", "check", "first_mismatch", "a_value", "b_value", "oracle_value", "report")

    def select(self, grid: Optional[str], filters: list, max_size: Optional[int], a: str, b: str,
               device: str, resume: Optional[dict]) -> Selection:
        if grid not in (None, "pr"):
            raise ConfigError(f"--grid {grid!r}: the sums subject has one grid")
        cases = [c for c in GRID if max_size is None or c["n"] <= max_size]
        for f in filters:
            name, _, values = f.partition("=")
            if name not in ("n", "step", "case"):
                raise ConfigError(f"--filter {f!r}: no dimension {name!r}")
            keep = set(values.split(","))
            cases = [c for c in cases if (_id(c) if name == "case" else str(c[name])) in keep]
        points = [Point(i, _id(c), c, (("n", str(c["n"])), ("step", str(c["step"])))) for i, c in enumerate(cases)]
        return Selection(points=points, grid_points=len(points), grid_total=len(GRID), grid_version=1,
                         axes=["n", "step"], a=a, b=b, note="" if max_size is None else f"n <= {max_size}",
                         meta={"sums": True}, header=["sums: A is a loop, B is the formula"])

    def case_dict(self, config: Any) -> dict:
        return dict(config)

    def case_from_dict(self, d: dict) -> Any:
        return dict(d)

    def judge(self, configs: list, settings: JudgeSettings, times: Any) -> list[dict]:
        rows = []
        for c in configs:
            a, b, oracle = _loop(c["n"], c["step"]), _formula(c["n"], c["step"]), sum(range(0, c["n"], c["step"]))
            ok = a == oracle and b == oracle
            check = "" if ok else ("a-vs-oracle" if a != oracle else "b-vs-oracle")
            report = ""
            if not ok and settings.folder:
                report = _id(c)
                folder = Path(settings.folder) / report
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "report.md").write_text(f"# {report}\n\nA {a}, B {b}, oracle {oracle}\n")
            rows.append({"case_id": _id(c), "status": Status.PASS if ok else Status.FAIL, "check": check,
                         "first_mismatch": "" if ok else f"sum: A {a}, B {b}, oracle {oracle}",
                         "a_value": a, "b_value": b, "oracle_value": oracle, "report": report})
        times.seconds["kernels"] += 0.0
        return rows

    def lost_row(self, config: Any, settings: JudgeSettings, message: str, status: Any) -> dict:
        return {"case_id": _id(config), "status": Status(status), "check": str(status), "first_mismatch": message}

    def cost(self, config: Any) -> int:
        return 1 + int(config["n"])

    def variant(self, config: Any) -> None:
        return None

    def summarise(self, rows: Any, meta: dict, grid: Any) -> dict:
        failed = rows[rows["status"] != Status.PASS.value]
        by_n = {str(n): [int((failed["n"].astype(str) == str(n)).sum()), int((rows["n"].astype(str) == str(n)).sum())]
                for n in sorted({c["n"] for c in GRID})}
        return {"failures_by_dimension": {"n": by_n}, "coverage": "the sums grid", "largest_wrong_b": (
            int(failed["n"].max()) if len(failed) else None)}

    def summary_lines(self, summary: dict) -> SummaryLines:
        return SummaryLines(setup=["  sums: the oracle is Python's sum()"],
                            findings=[f"  largest n where B is wrong: {summary.get('largest_wrong_b')}"],
                            report_file="report.md")


SUBJECT = Sums()
