"""A subject with no kernel and no tensor, declared on the contract (remap_ab.declare):
the sum of ``0, step, 2 step, ... < n`` by a loop (A) and by Gauss's formula (B), Python's
sum() as the oracle. It shows that the sweep, the worker pool, the run folder, the
summary and the report caps run a subject they know nothing of (tests/test_subjects.py;
tests/ is on sys.path under pytest). ``B_WRONG_FROM`` (an environment variable, so that
worker processes see it too) makes B wrong from that n on."""

from __future__ import annotations

import os

from remap_ab.declare import Axis, Declared, Grid

B_WRONG_FROM = "SUMS_B_WRONG_FROM"


def loop(n: int, step: int) -> int:
    total = 0
    for i in range(0, n, step):
        total += i
    return total


def formula(n: int, step: int) -> int:
    terms = (n + step - 1) // step
    wrong = os.environ.get(B_WRONG_FROM)
    return step * terms * (terms - 1) // 2 + (1 if wrong is not None and n >= int(wrong) else 0)


class Sums(Declared):
    title = "the sum of an arithmetic progression"
    grid = Grid(axes=(Axis("n", (0, 1, 2, 7, 100, 1000)), Axis("step", (1, 2))), size="n", name="sums grid")
    implementations = {"loop": loop, "formula": formula}
    extra_columns = ("a_value", "b_value", "oracle_value")
    header = ("sums: A is a loop, B is the formula",)

    def inputs(self, case: dict, device: str) -> dict:
        return dict(case)

    def oracle(self, n: int, step: int) -> int:
        return sum(range(0, n, step))

    def extras(self, case: dict, judged) -> dict:
        return {f"{side}_value": out["out"] for side, out in judged.outputs.items()}

    def summary_findings(self, rows) -> list[str]:
        wrong = rows[rows["status"] != "pass"]["n"].astype(int)
        return [f"  largest n where B is wrong: {int(wrong.max()) if len(wrong) else None}"]


SUBJECT = Sums()
