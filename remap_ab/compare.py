"""Comparators: what each implementation returned, against the oracle and each other,
turned into a structured verdict.

The rules are SPEC §7's:
- in-place outputs and counts are compared bit for bit;
- a compacted row must have the oracle's count, the same multiset of values in its
  first ``count`` columns, and -1 after them;
- the order of a compacted prefix depends on who wrote it: an implementation that runs
  the row as one program promises column order (checked exactly); a tiled one may
  emit its tile segments in any order (each segment itself in column order), so its
  prefix must be *some* concatenation of the row's tile segments;
- two implementations whose compacted orders differ, each within its own contract, is
  reported as information ("order differs, allowed"), never as a failure.

This module needs torch only: no Triton, no device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

import torch

_SENTINEL = 2**40  # sorts after every int32


@dataclass(frozen=True)
class OrderContract:
    """What an implementation promises about the order of a compacted row.

    ordered   True when the whole row is one program (column order is promised).
    segment   the tile width: a tiled implementation's prefix is a permutation of
              these column segments.
    why       one phrase for reports, e.g. "single tile (K=2048 is a power of two)".
    """

    ordered: bool
    segment: int
    why: str = ""


@dataclass
class Output:
    """One implementation's result for a case, as plain data."""

    name: str
    out: Optional[torch.Tensor]
    counts: Optional[torch.Tensor]
    contract: OrderContract
    error: Optional[str] = None
    seconds: float = 0.0
    memcheck: Optional[object] = None  # --memcheck: a memcheck.MemcheckReport; None = not checked


@dataclass(frozen=True)
class Reference:
    """The oracle's view of a case: per-lane values before placement, and the result."""

    lanes: torch.Tensor  # [T, K] int32, -1 where invalid
    valid: torch.Tensor  # [T, K] bool
    out: torch.Tensor  # [T, K] what the wrapper must return (compacted or in place)
    counts: torch.Tensor  # [T] int32


@dataclass(frozen=True)
class Mismatch:
    """The first place where one implementation departs from the contract."""

    check: str  # "out", "counts", "prefix_set", "tail", "order", "shape", "error"
    impl: str
    row: int
    col: int  # -1 for a per-row quantity (counts)
    values: dict  # implementation name -> value at (row, col), None where absent
    lanes: int  # how many lanes differ
    rows: int  # how many rows differ
    message: str

    def line(self) -> str:
        where = f"row {self.row}" + (f", col {self.col}" if self.col >= 0 else "")
        vals = ", ".join(f"{k}={v}" for k, v in self.values.items())
        return f"[{self.check}] {self.impl}: {self.message} at {where} ({vals}); {self.lanes} lanes in {self.rows} rows differ"


@dataclass
class Verdict:
    case_id: str
    status: str  # "pass" | "fail" | "error"
    failures: list = field(default_factory=list)
    info: list = field(default_factory=list)
    order_differs: bool = False
    order_differs_rows: int = 0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def first(self) -> Optional[Mismatch]:
        return self.failures[0] if self.failures else None

    @property
    def mismatch_lanes(self) -> int:
        return max((m.lanes for m in self.failures), default=0)

    @property
    def mismatch_rows(self) -> int:
        return max((m.rows for m in self.failures), default=0)

    def summary(self) -> str:
        head = f"{self.case_id}: {self.status.upper()}"
        if self.failures:
            head += f" — {self.failures[0].line()}"
            if len(self.failures) > 1:
                head += f" (+{len(self.failures) - 1} more)"
        elif self.info:
            head += f" ({'; '.join(self.info)})"
        return head

    def describe(self) -> str:
        lines = [f"case {self.case_id}: {self.status.upper()}"]
        lines += ["  FAIL " + m.line() for m in self.failures]
        lines += ["  info " + i for i in self.info]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["failures"] = [asdict(m) for m in self.failures]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        failures = [Mismatch(**m) for m in d.get("failures", [])]
        return cls(
            case_id=d["case_id"],
            status=d["status"],
            failures=failures,
            info=list(d.get("info", [])),
            order_differs=bool(d.get("order_differs", False)),
            order_differs_rows=int(d.get("order_differs_rows", 0)),
        )


def _value(t: Optional[torch.Tensor], row: int, col: int):
    if t is None:
        return None
    try:
        return int(t[row, col]) if col >= 0 else int(t[row])
    except IndexError:
        return None


class _Checker:
    """Collects mismatches of the outputs against the reference, for one case."""

    def __init__(self, outputs: list[Output], ref: Reference, compacted: bool, counts_returned: bool):
        self.outputs = outputs
        self.ref = ref
        self.compacted = compacted
        self.counts_returned = counts_returned
        self.failures: list[Mismatch] = []

    def _values_at(self, row: int, col: int, field_name: str) -> dict:
        vals = {o.name: _value(getattr(o, field_name), row, col) for o in self.outputs}
        vals["oracle"] = _value(getattr(self.ref, field_name), row, col)
        return vals

    def _add(self, check: str, impl: str, bad: torch.Tensor, message: str, field_name: str = "out", col_of=None):
        """Record a mismatch from a boolean mask of bad lanes ([T, K]) or rows ([T])."""
        rows_bad = bad if bad.dim() == 1 else bad.any(dim=1)
        lanes = int(bad.sum())
        row = int(torch.nonzero(rows_bad)[0, 0])
        if bad.dim() == 1:
            col = -1
        elif col_of is not None:
            col = col_of(row)
        else:
            col = int(torch.nonzero(bad[row])[0, 0])
        self.failures.append(
            Mismatch(
                check=check,
                impl=impl,
                row=row,
                col=col,
                values=self._values_at(row, col, field_name),
                lanes=lanes,
                rows=int(rows_bad.sum()),
                message=message,
            )
        )

    def check(self, o: Output) -> None:
        ref = self.ref
        if o.error is not None:
            self.failures.append(Mismatch("error", o.name, -1, -1, {}, 0, 0, o.error))
            return
        if o.out is None or tuple(o.out.shape) != tuple(ref.out.shape) or o.out.dtype != torch.int32:
            got = "nothing" if o.out is None else f"{o.out.dtype} {tuple(o.out.shape)}"
            self.failures.append(
                Mismatch("shape", o.name, -1, -1, {}, 0, 0, f"returned {got}, expected int32 {tuple(ref.out.shape)}")
            )
            return
        if self.counts_returned:
            if o.counts is None or tuple(o.counts.shape) != tuple(ref.counts.shape) or o.counts.dtype != torch.int32:
                got = "nothing" if o.counts is None else f"{o.counts.dtype} {tuple(o.counts.shape)}"
                self.failures.append(
                    Mismatch("shape", o.name, -1, -1, {}, 0, 0, f"returned counts {got}, expected int32 {tuple(ref.counts.shape)}")
                )
            else:
                bad = o.counts != ref.counts
                if bad.any():
                    self._add("counts", o.name, bad, "valid count differs from the oracle", field_name="counts")
        if self.compacted:
            self._check_compacted(o)
        else:
            bad = o.out != ref.out
            if bad.any():
                self._add("out", o.name, bad, "output differs from the oracle")

    def _check_compacted(self, o: Output) -> None:
        ref = self.ref
        t, k = ref.out.shape
        cols = torch.arange(k, device=ref.out.device).expand(t, k)
        count = ref.counts.to(torch.int64).view(t, 1)
        in_prefix = cols < count

        tail_bad = (~in_prefix) & (o.out != -1)
        if tail_bad.any():
            self._add("tail", o.name, tail_bad, "lane past the valid count is not -1")

        got = torch.sort(torch.where(in_prefix, o.out.to(torch.int64), _SENTINEL), dim=1).values
        want = torch.sort(torch.where(in_prefix, ref.out.to(torch.int64), _SENTINEL), dim=1).values
        set_bad_rows = (got != want).any(dim=1)
        if set_bad_rows.any():
            # Point at the first prefix lane whose value the oracle's prefix lacks.
            def first_stranger(row: int) -> int:
                n = int(count[row])
                stranger = ~torch.isin(o.out[row, :n], ref.out[row, :n])
                hits = torch.nonzero(stranger)
                return int(hits[0, 0]) if len(hits) else int(torch.nonzero(got[row] != want[row])[0, 0])

            lanes_bad = in_prefix & set_bad_rows.view(t, 1) & (o.out != ref.out)
            # Equal prefixes have equal sets, so every row in set_bad_rows has a bad lane.
            self._add("prefix_set", o.name, lanes_bad, "compacted prefix holds other values than the oracle's",
                      col_of=first_stranger)
            return  # order is meaningless when the set is already wrong

        order_bad = in_prefix & (o.out != ref.out)
        if not order_bad.any():
            return
        if o.contract.ordered:
            self._add("order", o.name, order_bad, f"compacted prefix is not in column order ({o.contract.why})")
            return
        inadmissible = torch.zeros(t, dtype=torch.bool)
        for row in torch.nonzero(order_bad.any(dim=1)).flatten().tolist():
            inadmissible[row] = not _is_segment_permutation(
                o.out[row].tolist(), ref.lanes[row].tolist(), ref.valid[row].tolist(), o.contract.segment
            )
        if inadmissible.any():
            self._add(
                "order",
                o.name,
                order_bad & inadmissible.to(order_bad.device).view(t, 1),
                f"compacted prefix is no concatenation of {o.contract.segment}-wide tile segments ({o.contract.why})",
            )


def tile_segments(lanes: list, valid: list, segment: int) -> list:
    """The valid values of each ``segment``-wide tile, in column order; empty ones dropped."""
    segs = []
    for start in range(0, len(lanes), segment):
        seg = [v for v, ok in zip(lanes[start : start + segment], valid[start : start + segment]) if ok]
        if seg:
            segs.append(seg)
    return segs


def _is_segment_permutation(row_out: list, lanes: list, valid: list, segment: int) -> bool:
    """Is ``row_out``'s prefix some ordering of the row's tile segments, back to back?"""
    segs = tile_segments(lanes, valid, segment)
    total = sum(len(s) for s in segs)
    prefix = row_out[:total]
    used = [False] * len(segs)

    def place(pos: int) -> bool:
        if pos == total:
            return True
        tried = set()
        for i, seg in enumerate(segs):
            key = tuple(seg)
            if used[i] or key in tried:
                continue
            tried.add(key)
            if prefix[pos : pos + len(seg)] == seg:
                used[i] = True
                if place(pos + len(seg)):
                    return True
                used[i] = False
        return False

    return place(0)


def compare(
    case_id: str,
    a: Output,
    b: Output,
    ref: Reference,
    *,
    compacted: bool,
    counts_returned: bool,
) -> Verdict:
    """The verdict for one case: ``a`` and ``b`` each against the reference, then
    against each other for the order information."""
    checker = _Checker([a, b], ref, compacted, counts_returned)
    checker.check(a)
    checker.check(b)
    failures = checker.failures
    status = "error" if any(m.check == "error" for m in failures) else ("fail" if failures else "pass")
    verdict = Verdict(case_id=case_id, status=status, failures=failures)
    if compacted and status == "pass":
        differs = (a.out != b.out).any(dim=1)
        note_order_differs(verdict, a, b, int(differs.sum()), differs.numel())
    return verdict


def note_order_differs(verdict: Verdict, a: Output, b: Output, rows: int, total: int) -> None:
    """Record on a passing compacted verdict that ``a`` and ``b`` order ``rows`` of
    the ``total`` rows differently, each within its contract (information, not a failure)."""
    if not rows:
        return
    verdict.order_differs = True
    verdict.order_differs_rows = rows
    verdict.info.append(
        f"prefix order differs between {a.name} and {b.name} in {rows} of {total} rows "
        f"(allowed: {a.name}: {a.contract.why or 'tiled'}; {b.name}: {b.contract.why or 'tiled'})"
    )
