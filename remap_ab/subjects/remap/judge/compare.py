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

The order rule is written here once, twice over: ``is_segment_permutation`` is the
plain, exhaustive statement of it, and ``rows_witnessed`` a fast, vectorised proof
(no host sync) that lets the batch runner skip ``compare`` for outputs that provably
pass (``proof_of_pass`` is that proof for one output; batch.py builds it for a whole
batch at once). The proof is exact in one direction only: True means ``compare``
passes the output; False means "ask ``compare``". A property test
(tests/test_judge_order.py) holds the two together, and tests/test_report.py the
batch's proof and ``compare``.

This module needs torch only: no Triton, no device.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from remap_ab.errors import ReportError
from remap_ab.status import Check, Status, plural
from remap_ab.subjects.remap.case.checks import AnyCheck, RemapCheck, check_of


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


@dataclass(frozen=True)
class CallFinding:
    """Something a call did that breaks the production contract beyond the values
    (call.py finds them; ``compare`` makes each a failure of its implementation)."""

    check: Check
    message: str
    # What a report shows of it (plain JSON data: tensor names, elements, frames);
    # each check's section in report_sections.py reads its own keys.
    evidence: dict = field(default_factory=dict)


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
    # (call.PrivateInputs, case index): the inputs this implementation was given, to
    # look for bytes it wrote; None when the call was not made through call.py.
    guard: Optional[tuple] = None
    findings: list = field(default_factory=list)  # CallFinding: sync, stream, graph, aliasing
    checks: tuple = ()  # the production checks that ran on this call ("sync", "stream", "graph")
    span: Optional[tuple] = None  # the batch clock's (start, end) of the call


@dataclass(frozen=True)
class Reference:
    """The oracle's view of a case: per-lane values before placement, and the result."""

    lanes: torch.Tensor  # [T, K] int32, -1 where invalid
    valid: torch.Tensor  # [T, K] bool
    out: torch.Tensor  # [T, K] what the wrapper must return (compacted or in place)
    counts: torch.Tensor  # [T] int32


@dataclass(frozen=True)
class Mismatch:
    """The first place where one implementation departs from the contract.

    ``values`` holds every implementation's value (and the oracle's) at (row, col);
    the failing implementation's value there always differs from the oracle's, so
    the lane named is a lane that really differs."""

    check: AnyCheck
    impl: str
    row: int
    col: int  # -1 for a per-row quantity (counts)
    values: dict  # implementation name -> value at (row, col), None where absent
    lanes: int  # how many lanes differ
    rows: int  # how many rows differ
    message: str
    # The failure's evidence for its report section (plain JSON data; empty for the
    # value checks, whose evidence is the outputs themselves).
    evidence: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        # Callers may name the check by its plain word; an unknown word is refused here.
        object.__setattr__(self, "check", check_of(self.check))

    @property
    def status(self) -> Status:
        """The verdict word this failure stands for: an exception or a wrong return is
        an error, a dead worker a crash, a case out of time a timeout; the rest fail."""
        if self.check in (Check.ERROR, Check.SHAPE):
            return Status.ERROR
        if self.check in (Check.CRASH, Check.TIMEOUT):
            return Status(self.check.value)
        return Status.FAIL

    def line(self) -> str:
        """One line: what failed, where, and how much. Only lane checks count lanes; a
        count check counts rows whose count differs; a failure with no output behind it
        (an exception, a wrong return, a crash, a timeout) says what happened, no more."""
        head = f"[{self.check}] {self.impl}"
        if self.check is Check.ERROR:
            return f"{head} raised {self.message}"
        if self.row < 0:  # no lane to name (an exception, a rejection, a wrong return)
            vals = ", ".join(f"{k}={v}" for k, v in self.values.items())
            return f"{head}: {self.message}" + (f" ({vals})" if vals else "")
        where = f"row {self.row}" + (f", col {self.col}" if self.col >= 0 else "")
        vals = ", ".join(f"{k}={v}" for k, v in self.values.items())
        at = f"{head}: {self.message} at {where}" + (f" ({vals})" if vals else "")
        if self.check is Check.COUNTS:
            return f"{at}; {count_rows(self.rows)}"
        if self.check is Check.MEMCHECK:
            return f"{at}; {plural(self.lanes, 'access', 'accesses')} in {plural(self.rows, 'row')} outside every argument tensor"
        if self.col < 0:
            return f"{at}; {plural(self.rows, 'row')} {differ(self.rows)}"
        return f"{at}; {plural(self.lanes, 'lane')} in {plural(self.rows, 'row')} {differ(self.lanes)}"


def differ(n: int) -> str:
    """The verb after a count: "1 lane differs", "2 lanes differ"."""
    return "differs" if n == 1 else "differ"


def count_rows(n: int) -> str:
    """The one wording of a count failure's size, the same in every place that shows it
    (the verdict line, diff.md, diff.html, the run's summary)."""
    return f"{plural(n, 'row')} whose count differs"


@dataclass
class Verdict:
    case_id: str
    status: Status
    failures: list = field(default_factory=list)
    info: list = field(default_factory=list)
    order_differs: bool = False
    order_differs_rows: int = 0
    caller: str = ""  # the attention backend's call, in words ("" when the case names none)
    hazard_rows: int = 0  # rows where the backend's rule and the kernel's contract disagree for both sides
    backend_view: str = ""  # "same" / "differs" between A and B; "" where not checked (no backend, or no outputs)

    def __post_init__(self):
        self.status = Status(self.status)

    def first_line(self) -> str:
        """The first failure's line, after the caller when the case names one:
        "FlashInfer SM100, DCP 4, rank 1, …: [out] new: …"."""
        if self.first is None:
            return ""
        return (f"{self.caller}: " if self.caller else "") + self.first.line()

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS

    @property
    def first(self) -> Optional[Mismatch]:
        return self.failures[0] if self.failures else None

    @property
    def mismatch_lanes(self) -> int:
        """Output lanes that differ (a count failure differs in rows, not lanes)."""
        return max((m.lanes for m in self.failures if m.check is not Check.COUNTS), default=0)

    @property
    def mismatch_rows(self) -> int:
        return max((m.rows for m in self.failures), default=0)

    def summary(self) -> str:
        head = f"{self.case_id}: {self.status.value.upper()}"
        if self.failures:
            head += f" — {self.first_line()}"
            if len(self.failures) > 1:
                head += f" (+{len(self.failures) - 1} more)"
        elif self.info:
            head += f" ({'; '.join(self.info)})"
        return head

    def describe(self) -> str:
        lines = [f"case {self.case_id}: {self.status.value.upper()}" + (f" ({self.caller})" if self.caller else "")]
        lines += [f"  {m.status.value.upper()} {m.line()}" for m in self.failures]
        lines += ["  info " + i for i in self.info]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "case_id": self.case_id,
            "status": self.status.value,
            "failures": [
                {
                    "check": m.check.value,
                    "impl": m.impl,
                    "row": m.row,
                    "col": m.col,
                    "values": dict(m.values),
                    "lanes": m.lanes,
                    "rows": m.rows,
                    "message": m.message,
                    **({"evidence": m.evidence} if m.evidence else {}),
                }
                for m in self.failures
            ],
            "info": list(self.info),
            "order_differs": self.order_differs,
            "order_differs_rows": self.order_differs_rows,
            "caller": self.caller,
            "hazard_rows": self.hazard_rows,
            "backend_view": self.backend_view,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Verdict:
        """The verdict ``to_dict`` wrote. Strict (schema.VerdictData): a missing or
        wrong-typed field raises ``ReportError`` naming it (the caller adds the file)."""
        from remap_ab.subjects.remap.case import schema  # pydantic is loaded only when a file is read

        data = schema.load(schema.VerdictData, d, where="verdict", error=ReportError)
        return cls(
            case_id=data.case_id, status=data.status,
            failures=[Mismatch(m.check, m.impl, m.row, m.col, dict(m.values), m.lanes, m.rows, m.message,
                               dict(m.evidence)) for m in data.failures],
            info=list(data.info), order_differs=data.order_differs, order_differs_rows=data.order_differs_rows,
            # Reports written before the backend views have none of the three.
            caller=data.caller, hazard_rows=data.hazard_rows, backend_view=data.backend_view,
        )


def _value(t: Optional[torch.Tensor], row: int, col: int):
    if not isinstance(t, torch.Tensor):
        return None
    try:
        return int(t[row, col]) if col >= 0 else int(t[row])
    except IndexError:
        return None


def _out_problem(o: Output, ref: Reference) -> Optional[str]:
    """Why ``o.out`` cannot be compared with the oracle's (None when it can)."""
    want = f"int32 {tuple(ref.out.shape)} on {ref.out.device}"
    if not isinstance(o.out, torch.Tensor):
        return f"returned {'nothing' if o.out is None else type(o.out).__name__}, expected {want}"
    if tuple(o.out.shape) != tuple(ref.out.shape) or o.out.dtype != torch.int32 or o.out.device != ref.out.device:
        return f"returned {o.out.dtype} {tuple(o.out.shape)} on {o.out.device}, expected {want}"
    return None


def _counts_problem(o: Output, ref: Reference) -> Optional[str]:
    """Why ``o.counts`` cannot be compared with the oracle's (None when it can)."""
    want = f"int32 {tuple(ref.counts.shape)} on {ref.counts.device}"
    c = o.counts
    if not isinstance(c, torch.Tensor):
        return f"returned counts {'nothing' if c is None else type(c).__name__}, expected {want}"
    if tuple(c.shape) != tuple(ref.counts.shape) or c.dtype != torch.int32 or c.device != ref.counts.device:
        return f"returned counts {c.dtype} {tuple(c.shape)} on {c.device}, expected {want}"
    return None


def shape_ok(o: Output, ref: Reference, counts_returned: bool) -> bool:
    """Whether ``o`` raised nothing and returned what ``compare`` can compare lane by
    lane (type, shape, dtype, device of the output and, when returned, the counts)."""
    if o.error is not None or _out_problem(o, ref) is not None:
        return False
    return not counts_returned or _counts_problem(o, ref) is None


def _surplus(got_sorted: torch.Tensor, want_sorted: torch.Tensor) -> torch.Tensor:
    """For rows of sorted values: True at each element of ``got_sorted`` that is one
    occurrence more of its value than ``want_sorted`` holds (the multiset difference
    got − want, lane by lane). Its row sums are the lanes that would have to change."""
    first_of_run = torch.searchsorted(got_sorted, got_sorted)
    occurrence = torch.arange(got_sorted.shape[1], device=got_sorted.device) - first_of_run
    in_want = torch.searchsorted(want_sorted, got_sorted, right=True) - torch.searchsorted(want_sorted, got_sorted)
    return occurrence >= in_want


def _first_surplus_lane(got: list, want: list) -> int:
    """The first column where ``got`` holds a value that ``want`` holds fewer times,
    among the columns where the two differ. One always exists when the multisets
    differ: the columns that agree contribute equally to both, so the difference lies
    entirely in the differing ones; at the column returned, got and want differ."""
    differing = [c for c, (g, w) in enumerate(zip(got, want)) if g != w]
    have = Counter(got[c] for c in differing)
    lack = Counter(want[c] for c in differing)
    return next(c for c in differing if have[got[c]] > lack[got[c]])


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

    def _record(self, check: Check, impl: str, row: int, col: int, lanes: int, rows: int, message: str,
                field_name: str = "out") -> None:
        self.failures.append(
            Mismatch(check, impl, row, col, self._values_at(row, col, field_name), lanes, rows, message)
        )

    def _add(self, check: Check, impl: str, bad: torch.Tensor, message: str, field_name: str = "out") -> None:
        """Record a mismatch from a boolean mask of bad lanes ([T, K]) or rows ([T]):
        the first bad lane of the first bad row is the one named."""
        rows_bad = bad if bad.dim() == 1 else bad.any(dim=1)
        row = int(torch.nonzero(rows_bad)[0, 0])
        col = -1 if bad.dim() == 1 else int(torch.nonzero(bad[row])[0, 0])
        self._record(check, impl, row, col, int(bad.sum()), int(rows_bad.sum()), message, field_name)

    def _problem(self, impl: str, message: str, check: Check = Check.SHAPE) -> None:
        self.failures.append(Mismatch(check, impl, -1, -1, {}, 0, 0, message))

    def check(self, o: Output) -> None:
        ref = self.ref
        if o.error is not None:
            self._problem(o.name, o.error, Check.ERROR)
            return
        problem = _out_problem(o, ref)
        if problem is not None:
            self._problem(o.name, problem)
            return
        assert isinstance(o.out, torch.Tensor)  # _out_problem found none: the output is a tensor
        if self.counts_returned:
            problem = _counts_problem(o, ref)
            if problem is not None:
                self._problem(o.name, problem)
            else:
                assert isinstance(o.counts, torch.Tensor)  # _counts_problem found none
                bad = o.counts != ref.counts
                if bad.any():
                    self._add(Check.COUNTS, o.name, bad, "valid count differs from the oracle", field_name="counts")
        if self.compacted:
            self._check_compacted(o)
        else:
            bad = o.out != ref.out
            if bad.any():
                self._add(Check.OUT, o.name, bad, "output differs from the oracle")

    def _check_compacted(self, o: Output) -> None:
        ref = self.ref
        assert isinstance(o.out, torch.Tensor)  # check() comes here only after _out_problem found none
        t, k = ref.out.shape
        cols = torch.arange(k, device=ref.out.device)
        count = ref.counts.view(t, 1)
        in_prefix = cols < count

        tail_bad = (~in_prefix) & (o.out != -1)
        if tail_bad.any():
            self._add(Check.TAIL, o.name, tail_bad, "lane past the valid count is not -1")

        # Past the count both rows hold the oracle's lanes, so the sorted rows are equal
        # exactly when the prefixes hold the same multiset of values.
        got = torch.sort(torch.where(in_prefix, o.out, ref.out)).values
        want = torch.sort(ref.out).values
        set_bad_rows = (got != want).any(dim=1)
        if set_bad_rows.any():
            # Name a lane that really differs: a value the oracle's prefix holds fewer
            # times, where the two rows disagree. (Membership alone is not enough: a
            # padded block table makes -1 a legitimate value of a valid lane, so a
            # dropped lane's -1 can be "in" the oracle's prefix too.)
            row = int(torch.nonzero(set_bad_rows)[0, 0])
            n = int(count[row])
            got_row, want_row = o.out[row, :n].tolist(), ref.out[row, :n].tolist()
            col = _first_surplus_lane(got_row, want_row)
            value = got_row[col]
            message = (
                f"compacted prefix holds other values than the oracle's "
                f"(value {value}: {got_row.count(value)}× here, {want_row.count(value)}× in the oracle's prefix)"
            )
            lanes = int(_surplus(got, want).sum())
            self._record(Check.PREFIX_SET, o.name, row, col, lanes, int(set_bad_rows.sum()), message)
            return  # order is meaningless when the set is already wrong

        order_bad = in_prefix & (o.out != ref.out)
        if not order_bad.any():
            return
        if o.contract.ordered:
            self._add(Check.ORDER, o.name, order_bad, f"compacted prefix is not in column order ({o.contract.why})")
            return
        inadmissible = torch.zeros(t, dtype=torch.bool, device=order_bad.device)
        # The fast proof settles most rows at once (a racing tiled kernel on a GPU
        # reorders nearly every row); the exhaustive search decides the rest.
        unproven = order_bad.any(dim=1) & ~rows_witnessed(o.out, ref, o.contract.segment)
        for row in torch.nonzero(unproven).flatten().tolist():
            inadmissible[row] = not is_segment_permutation(
                o.out[row].tolist(), ref.lanes[row].tolist(), ref.valid[row].tolist(), o.contract.segment
            )
        if inadmissible.any():
            self._add(
                Check.ORDER,
                o.name,
                order_bad & inadmissible.view(t, 1),
                f"compacted prefix is no concatenation of {o.contract.segment}-wide tile segments ({o.contract.why})",
            )


# ----------------------------------------------------------------------------------
# The order rule of a tiled compaction, stated plainly (exhaustive search) ...


def tile_segments(lanes: list, valid: list, segment: int) -> list:
    """The valid values of each ``segment``-wide tile, in column order; empty ones dropped."""
    segs = []
    for start in range(0, len(lanes), segment):
        seg = [v for v, ok in zip(lanes[start : start + segment], valid[start : start + segment]) if ok]
        if seg:
            segs.append(seg)
    return segs


def is_segment_permutation(row_out: list, lanes: list, valid: list, segment: int) -> bool:
    """Is ``row_out``'s prefix some ordering of the row's tile segments, back to back?"""
    segs = tile_segments(lanes, valid, segment)
    total = sum(len(s) for s in segs)
    prefix = row_out[:total]

    def place(pos: int, unused: tuple) -> bool:
        if pos == total:
            return True
        tried = set()  # segments with equal values are interchangeable: try one of them
        for i in unused:
            seg = segs[i]
            key = tuple(seg)
            if key in tried:
                continue
            tried.add(key)
            if prefix[pos : pos + len(seg)] == seg and place(pos + len(seg), tuple(u for u in unused if u != i)):
                return True
        return False

    return place(0, tuple(range(len(segs))))




# ... and proved fast (vectorised over rows, no host sync) for the batch runner.


def proof_of_pass(o: Output, ref: Reference, config, witness: bool = True) -> Optional[torch.Tensor]:
    """A 0-dim bool tensor, True only if ``compare`` would find no failure for ``o``;
    None when the host already knows it would (error, shape, dtype, device).
    ``config`` is the case's ``CaseConfig`` (its ``compacts`` and ``counts_returned``).
    ``witness=False`` leaves out the search for a tile order (exact equality only)."""
    if not shape_ok(o, ref, config.counts_returned):
        return None
    assert isinstance(o.out, torch.Tensor)  # shape_ok held: the output is a tensor
    ok = (o.out == ref.out).all()
    if witness and config.compacts and not o.contract.ordered:
        ok = ok | segment_witness(o.out, ref, o.contract.segment)
    if config.counts_returned:
        assert isinstance(o.counts, torch.Tensor)  # shape_ok held with counts returned
        ok = ok & (o.counts == ref.counts).all()
    return ok


def segment_witness(out: torch.Tensor, ref: Reference, seg: int) -> torch.Tensor:
    """True if ``out``'s rows are, provably, -1-tailed concatenations of their tile
    segments in some order (the tiled compaction's contract); see ``rows_witnessed``."""
    return rows_witnessed(out, ref, seg).all()


def rows_witnessed(out: torch.Tensor, ref: Reference, seg: int) -> torch.Tensor:
    """Per row ([T] bool): True if the row is, provably, a -1-tailed concatenation of
    its tile segments in some order; all False when ``seg`` does not tile the row.

    A greedy walk, vectorised over rows: at the current position, take the first
    unused segment that the output holds there lane by lane, and move past it. At most
    ``K / seg`` steps, no host sync. Greedy can miss an order only when one segment's
    values are a proper prefix of another's (segments with equal values are
    interchangeable); ``compare`` then decides."""
    t, k = out.shape
    if seg <= 0 or k % seg:
        return out.new_zeros(t, dtype=torch.bool)
    tiles = k // seg
    valid = ref.valid.view(t, tiles, seg)
    lanes = ref.lanes.view(t, tiles, seg)
    vi = valid.to(torch.int64)
    n = vi.sum(2)  # [t, tiles] segment lengths
    e = torch.cumsum(vi, 2) - vi  # exclusive rank of each valid lane in its tile
    count = ref.counts.view(t, 1)
    cols = torch.arange(k, device=out.device)
    tail_ok = torch.where(cols < count, True, out == -1).all(1)
    used = n == 0
    pos = n.new_zeros(t, 1)
    tile_ids = torch.arange(tiles, device=out.device)
    # A row where no unused segment matches keeps its state, so it matches nothing at
    # every later step too and ends with a segment unused: no separate failure flag.
    # Nor can a match overrun the count: the unused segments' lengths sum to what is
    # left of it.
    for _ in range(tiles):
        # Never past k - 1 in fact (a row's unused segments and invalid lanes leave room
        # for it); the clamp keeps a device gather in bounds all the same.
        idx = (pos.view(t, 1, 1) + e).clamp(max=k - 1).view(t, -1)
        got = out.gather(1, idx).view(t, tiles, seg)
        match = (~valid | (got == lanes)).all(2) & ~used
        take = match.any(1, keepdim=True)
        j = torch.argmax(match.to(torch.int64), dim=1, keepdim=True)  # first match
        pos = pos + torch.where(take, n.gather(1, j), 0)
        used = used | ((tile_ids == j) & take)
    return tail_ok & used.all(1) & (pos == count).view(t)


def compare(
    case_id: str,
    a: Output,
    b: Output,
    ref: Reference,
    *,
    compacted: bool,
    counts_returned: bool,
    proven: tuple = (False, False),
    inputs_unchanged: tuple = (False, False),
    differing_rows: Optional[int] = None,
    oracle_problem: Optional[str] = None,
    memchecked: bool = False,
    replay: str = "",
    views=None,
    caller: str = "",
) -> Verdict:
    """The verdict for one case — the only place a verdict is built.

    Each of ``a`` and ``b`` is checked against the reference (skipped for a side whose
    output the batch engine ``proven`` to pass on the device), then for what its call
    did beyond the values: bytes written into its inputs (skipped where the device
    showed ``inputs_unchanged``), outputs sharing an input's storage, and the
    production checks' findings; with ``memchecked``, its memcheck report (an output
    without one is said to be not checked). ``oracle_problem``: the oracle's public API
    raised or disagreed with its reference — a remap-ab bug, an ERROR naming the oracle.
    A passing compacted case notes rows whose order differs between ``a`` and ``b``
    (``differing_rows`` when the batch counted them already). ``views`` (a
    ``backend_views.Views``, when the case names an attention backend) adds the
    backend-view check; ``caller`` names the backend's call on the verdict's lines."""
    if oracle_problem is not None:
        return Verdict(case_id, Status.ERROR, [Mismatch(
            Check.ERROR, "oracle", -1, -1, {}, 0, 0, f"internal: {oracle_problem} (a remap-ab bug: please file it)"
        )])
    checker = _Checker([a, b], ref, compacted, counts_returned)
    info: list[str] = []
    for o, skip_values, clean in zip((a, b), proven, inputs_unchanged):
        if not skip_values:
            checker.check(o)
        for f in _call_findings(o, clean):
            checker.failures.append(Mismatch(f.check, o.name, -1, -1, {}, 0, 0, f.message, dict(f.evidence)))
        if memchecked:
            info.append(_memcheck_failures(o, replay, checker.failures))
    failures = checker.failures
    hazard_rows = 0
    if views is not None:
        hazard_rows = _backend_view_check(views, a, b, ref, failures, info)
    if any(m.check is Check.ERROR for m in failures):
        status = Status.ERROR
    else:
        status = Status.FAIL if failures else Status.PASS
    checks = sorted({c for o in (a, b) for c in o.checks})
    if checks and status is not Status.ERROR:
        info.append(f"checked on the GPU as vLLM calls it: {', '.join(checks)} ({a.name}, {b.name})")
    verdict = Verdict(case_id=case_id, status=status, failures=failures, info=info, caller=caller,
                      hazard_rows=hazard_rows,
                      backend_view="" if views is None else ("differs" if bool(views.differs.any()) else "same"))
    if compacted and status is Status.PASS:
        if differing_rows is None:
            # A pass means both outputs were compared lane by lane, so both are tensors.
            assert isinstance(a.out, torch.Tensor) and isinstance(b.out, torch.Tensor)
            differs = (a.out != b.out).any(dim=1)
            differing_rows = int(differs.sum())
        note_order_differs(verdict, a, b, differing_rows, ref.counts.numel())
    return verdict


def lost_verdict(case_id: str, status: Status, impls: str, message: str) -> Verdict:
    """The verdict of a case that produced no outputs: the process running it died
    (``CRASH``) or it ran past its time limit (``TIMEOUT``)."""
    status = Status(status)
    if status not in (Status.CRASH, Status.TIMEOUT):
        raise ValueError(f"a lost case's status is crash or timeout, not {status}")
    check = Check.CRASH if status is Status.CRASH else Check.TIMEOUT
    return Verdict(case_id, status, [Mismatch(check, impls, -1, -1, {}, 0, 0, message)])


def _call_findings(o: Output, inputs_unchanged: bool) -> list:
    """Everything ``o``'s call did wrong beyond its values: input writes (looked for
    unless the device already showed none), aliasing and the production findings."""
    found = []
    if o.guard is not None and not inputs_unchanged:
        private, index = o.guard
        found += private.writes(index, o.name)
    return found + list(o.findings)


def _memcheck_failures(o: Output, replay: str, failures: list) -> str:
    """Append ``o``'s memcheck findings to ``failures`` (one ``memcheck`` failure per
    kind, kernel and nearest tensor, naming its first lane) and return the info line
    saying what was checked; an output without a report was not checked."""
    report: Any = o.memcheck
    if report is None:
        return f"memcheck {o.name}: not checked"
    failures += memcheck_mismatches(report, replay)
    return report.summary()


def memcheck_mismatches(report: Any, replay: str) -> list[Mismatch]:
    """One ``memcheck`` failure per kind, kernel and nearest tensor of a
    ``memcheck.MemcheckReport``, naming its first lane and the replay command."""
    failures = []
    for (kind, kernel, nearest), lanes in report.bad_by_group.items():
        first = next((f for f in report.findings if (f.kind, f.kernel, f.nearest) == (kind, kernel, nearest)), None)
        if first is None:  # beyond the detailed findings: say what is known
            message = f"{lanes} {kind} lanes outside every argument tensor in kernel {kernel}, nearest {nearest}"
            row, col = -1, -1
        else:
            message = first.describe()
            row, col = first.row, first.col
        rows = len(report.rows_by_group.get((kind, kernel, nearest), ()))
        failures.append(Mismatch(Check.MEMCHECK, report.label, row, col, {}, lanes, max(rows, 1),
                                 f"{message}; replay: {replay}"))
    return failures


def _backend_view_check(views, a: Output, b: Output, ref: Reference, failures: list, info: list) -> int:
    """The backend-view check (``RemapCheck.BACKEND_VIEW``) from ``views``: a row whose view
    differs between A and B fails, naming the backend, whether or not the wrapper-level
    checks allowed it; a wrapper-level failure the backend cannot see is said as info;
    caller hazards (both sides' views miss the intended KV rows) are info and counted.
    Returns the hazard rows."""
    model = views.model
    wrapper_failed = bool(failures)
    if bool(views.differs.any()):
        row = int(torch.nonzero(views.differs)[0, 0])
        assert isinstance(a.out, torch.Tensor) and isinstance(b.out, torch.Tensor)
        lanes = torch.nonzero(a.out[row] != b.out[row])
        # The lane named is one where the outputs really differ; equal rows differ in their counts.
        col = int(lanes[0, 0]) if lanes.numel() else -1
        values = ({a.name: _value(a.out, row, col), b.name: _value(b.out, row, col), "oracle": _value(ref.out, row, col)}
                  if col >= 0 else
                  {a.name: _value(a.counts, row, -1), b.name: _value(b.counts, row, -1), "oracle": _value(ref.counts, row, -1)})
        allowed = "" if wrapper_failed else " (a difference the wrapper-level contract allows)"
        rows = int(views.differs.sum())
        from remap_ab.subjects.remap.case.backend_views import (
            row_evidence,  # the judge's one import of the remap subject, kept to this check
        )

        failures.append(Mismatch(
            RemapCheck.BACKEND_VIEW, f"{a.name} vs {b.name}", row, col, values,
            int((a.out != b.out)[views.differs].sum()), rows,
            f"{model.name} would attend to other KV rows with {b.name} than with {a.name}{allowed}; it {model.rule}",
            {**row_evidence(model, a, b, row), "rows": rows, "allowed_by_wrapper": not wrapper_failed},
        ))
    elif wrapper_failed:
        info.append(f"{model.name} sees the same from both sides: the difference above is invisible to it ({model.rule})")
    hazard_rows = int(views.hazard.sum())
    if hazard_rows:
        info.append(
            f"caller hazard ({model.name}; the same for {a.name} and {b.name}, not an A/B difference): in "
            f"{plural(hazard_rows, 'row')} it {model.rule} but does not read the lanes the kernel marks valid — "
            f"{views.hazard_why}"
        )
    return hazard_rows


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


def judge_rejection(case_id: str, call: str, a, b, *, replay: str = "", memchecked: bool = False,
                    checked: Sequence[str] = (), precondition: str = "", wrapper: str = "",
                    arguments: Optional[dict] = None, what: str = "") -> Verdict:
    """The verdict of a call that breaks a SPEC §6 precondition (rejections.py): ``a``
    and ``b`` are what each implementation did with it (``rejections.Attempt``).

    Where ``a`` rejects the call, ``b`` must reject it with the same exception type or
    a subclass (so code that catches ``a``'s exception catches ``b``'s): a ``b`` that
    accepts it, or raises another type, fails the ``rejects`` check. With ``memchecked``,
    every out-of-bounds group in an attempt's memcheck report is a failure too;
    ``checked``: what memcheck checked, one line each. Where ``a`` accepts, nothing is
    judged, and the verdict says so. ``precondition``, ``wrapper``, ``arguments``
    (name -> the argument in words) and ``what`` (the change, in words) are the
    rejects failure's evidence, with what each side did (``Attempt.evidence``)."""
    failures: list[Mismatch] = []
    again = f"; replay: {replay}" if replay else ""
    evidence = {"precondition": precondition, "call": what or call, "wrapper": wrapper, "arguments": dict(arguments or {}),
                "a": a.evidence(), "b": b.evidence()}
    info = [f"call: {call}", a.said(), b.said()]
    if not a.rejected:
        info.append(f"not judged: {a.name} accepts this call, so {b.name} need not reject it")
    elif not b.rejected:
        failures.append(Mismatch(Check.REJECTS, b.name, -1, -1, {}, 0, 0,
                                 f"accepts a call {a.name} rejects: {call}; {a.said()}{again}", evidence))
    elif a.raised not in b.bases:
        failures.append(Mismatch(Check.REJECTS, b.name, -1, -1, {}, 0, 0,
                                 f"rejects with {b.raised}, {a.name} with {a.raised} (code that catches "
                                 f"{a.raised} would not catch it): {call}; {b.said()}{again}", evidence))
    if memchecked:
        for o in (a, b):
            if o.memcheck is not None and o.memcheck.launches:
                failures += memcheck_mismatches(o.memcheck, replay)
    info += checked
    return Verdict(case_id=case_id, status=Status.FAIL if failures else Status.PASS, failures=failures, info=info)
