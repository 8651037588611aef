"""A subject's two implementations timed shape by shape (``remap-ab bench --subject
NAME``): A and B called eagerly on the same inputs, each shape gated (B's result equal
to A's before timing, and again on the last results of the timed calls), timed
interleaved (``timing.time_graphs``) and judged by the speed gate (``remap_ab/speed.py``).

The subject says what a shape is, how to call its sides and what "equal" means
(``TimedPair``); this module knows no subject. Each side is timed inside a CUDA graph of
``calls`` calls, as the remap's cells are, where it can be captured; a side that
synchronises with the host (a vectorised torch path that calls ``nonzero`` does) cannot
be, and is timed as ``calls`` eager calls instead (``timing.EagerLoop``), host overhead
included. A pair whose ``eager`` names a side ("a", "b") has that side timed eagerly
without trying: its call is host work (NumPy, say) that a capture would run once and a
replay would skip. The row says which (``a_method``, ``b_method``).

``main`` is such a subject's whole bench part (``remap-ab bench --subject NAME`` with the
shared options alone; remap_ab/subjects/topology/bench.py hands itself to it), and
``bench_pairs`` the run it makes: every shape timed, the page written, the exit status.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Optional, Protocol

import torch

from remap_ab import command_line, subjects
from remap_ab.bench import page
from remap_ab.bench.page import Section, Table
from remap_ab.bench.session import Session
from remap_ab.bench.timing import Budget, EagerLoop, capture, time_graphs
from remap_ab.errors import NeedsGPUError, exception_line
from remap_ab.speed import judge_speed, parse_fail_slower
from remap_ab.status import CellStatus, SectionStatus

DEFAULT_REPEATS = 20  # --repeats of a subject's pair bench when not given
METHOD = ("µs per call, the median over the repeats of a CUDA graph of the calls (a side that synchronises with the "
          "host cannot be captured: its calls run eagerly, host overhead included; a_method and b_method say which), "
          "A and B interleaved repeat by repeat")


class TimedPair(Protocol):
    """One shape of a subject, its inputs made on the device."""

    @property
    def labels(self) -> Mapping[str, object]:
        """The shape's columns, in order (the table's first columns)."""
        ...

    @property
    def a(self) -> Callable[[], object]:
        ...

    @property
    def b(self) -> Callable[[], object]:
        ...

    @property
    def replay(self) -> str:
        """The line that reruns this shape's inputs through the subject's judge."""
        ...

    @property
    def eager(self) -> tuple:
        """The sides ("a", "b") timed as eager calls without trying a capture."""
        ...

    def disagreement(self, a_out: object, b_out: object) -> Optional[str]:
        """None when B's result equals A's as the subject's contract says, else the first difference."""
        ...


def measure(pair: TimedPair, *, calls: int, repeats: int, fail_slower: Optional[float]) -> dict:
    """One shape's row: gated, timed, checked again, judged. A side that raises or a
    disagreement is the row's status (``error``, ``refused``): nothing wrong is timed."""
    row: dict = dict(pair.labels)
    row.update(status=CellStatus.TIMED.value, a_method="", b_method="", a_us=math.nan, b_us=math.nan, b_over_a=math.nan,
               b_over_a_ci_low=math.nan, b_over_a_ci_high=math.nan, speed_gate="", verified_after=None,
               why="", replay=pair.replay)
    try:
        why = pair.disagreement(pair.a(), pair.b())
    except Exception as exc:  # a side that raises costs its shape, not the run
        row.update(status=CellStatus.ERROR.value, why=f"an eager call raised {exception_line(exc)[:300]}")
        return row
    if why:
        row.update(status=CellStatus.REFUSED.value, why=f"refusing to time: B differs from A: {why}")
        return row
    try:
        loops, last = {}, {}
        for side, fn in (("a", pair.a), ("b", pair.b)):
            loops[side], last[side], row[f"{side}_method"] = ((EagerLoop(fn, calls), calls), None, "eager") \
                if side in pair.eager else _graph_or_loop(fn, calls)
        times = time_graphs(loops, repeats)
    except Exception as exc:  # a timed call that fails costs this shape, not the run
        row.update(status=CellStatus.ERROR.value, why=f"timing failed: {exception_line(exc)[:300]}")
        return row
    for side, (loop, _) in loops.items():
        if isinstance(loop, EagerLoop):
            last[side] = loop.last
    after = pair.disagreement(last["a"], last["b"])
    row["verified_after"] = after is None
    if after:
        row["why"] = f"the timed calls' last results differ: {after}"
    row["a_us"], row["b_us"] = times["a"].median, times["b"].median
    row["b_over_a"] = row["b_us"] / row["a_us"] if row["a_us"] > 0 else math.nan
    if fail_slower is None:
        row["speed_gate"] = "off"
        return row
    judged = judge_speed(times["a"].samples, times["b"].samples, fail_slower=fail_slower)
    row["b_over_a_ci_low"], row["b_over_a_ci_high"] = judged.low, judged.high
    row["speed_gate"] = "slower" if judged.slower else ("ok" if judged.judged else f"not judged: {judged.why}")
    return row


def _graph_or_loop(fn: Callable[[], object], calls: int) -> tuple[tuple, object, str]:
    """((graph, calls), its last call's result, "graph"), or an eager loop where the
    capture fails ((loop, calls), None, "eager")."""
    try:
        graph, result = capture(fn, calls)
        return (graph, calls), result, "graph"
    except Exception:  # a side that synchronises with the host cannot be captured: timed eagerly
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return (EagerLoop(fn, calls), calls), None, "eager"


def failed(row: dict) -> bool:
    """A row that fails the run: not timed, changed by the timed calls, or slower beyond noise."""
    return row["status"] != CellStatus.TIMED.value or row["verified_after"] is False or row["speed_gate"] == "slower"


def line(row: dict, labels: Iterable[str]) -> str:
    """The row as the command prints it."""
    shape = " ".join(f"{k}={row[k]}" for k in labels)
    if row["status"] != CellStatus.TIMED.value:
        return f"{shape}: {str(row['status']).upper()}: {row['why']} (replay: {row['replay']})"
    ci = (f" (95 % CI {row['b_over_a_ci_low']:.3f}-{row['b_over_a_ci_high']:.3f})"
          if not math.isnan(row["b_over_a_ci_low"]) else "")
    gate = "" if row["speed_gate"] in ("ok", "off") else f" {str(row['speed_gate']).upper()}"
    after = "" if row["verified_after"] else f" FAIL: {row['why']}"
    return (f"{shape}: A {row['a_us']:.2f} µs ({row['a_method']}), B {row['b_us']:.2f} µs ({row['b_method']}), "
            f"B/A {row['b_over_a']:.3f}{ci}{gate}{after}")


@dataclass
class PairRun:
    rows: list = field(default_factory=list)
    not_measured: list = field(default_factory=list)  # the shapes' labels the budget left out

    @property
    def failed(self) -> list:
        return [r for r in self.rows if failed(r)]


def run(shapes: Iterable, make: Callable[[object], TimedPair], *, calls: int, repeats: int,
        fail_slower: Optional[float], budget: Budget, labels: Callable[[object], Mapping[str, object]],
        say: Callable[[str], None] = print) -> PairRun:
    """Every shape in order, each made (its inputs on the device) only when it runs; a
    shape is not started once ``budget`` is spent."""
    out = PairRun()
    for shape in shapes:
        if budget.exhausted:
            out.not_measured.append(dict(labels(shape)))
            continue
        pair = make(shape)
        row = measure(pair, calls=calls, repeats=repeats, fail_slower=fail_slower)
        out.rows.append(row)
        say("  " + line(row, pair.labels))
        del pair  # its inputs go before the next shape's are made
    return out


def section(result: PairRun, key: str, title: str, question: str, a: str, b: str) -> Section:
    """The page's section: the table, what was not measured, and one line per finding."""
    timed = [r for r in result.rows if r["status"] == CellStatus.TIMED.value]
    findings = []
    if timed:
        ratios = sorted(r["b_over_a"] for r in timed)
        findings.append(f"B ({b}) over A ({a}): {ratios[0]:.3f} to {ratios[-1]:.3f} over {len(timed)} shapes "
                        f"(below 1: B is faster)")
    findings += [f"{r['status']}: {r['why']}" for r in result.rows if r["status"] != CellStatus.TIMED.value]
    findings += [f"slower beyond noise: {line(r, list(r)[:list(r).index('status')])}"  # the row's label columns
                 for r in result.rows if r["speed_gate"] == "slower"]
    status = SectionStatus.COMPLETE
    note = METHOD
    if result.not_measured:
        status = SectionStatus.PARTIAL if result.rows else SectionStatus.NOT_RUN
        note = f"{len(result.not_measured)} of {len(result.rows) + len(result.not_measured)} shapes not measured " \
               f"(--budget-s spent); {METHOD}"
    return Section(key, title, question, status=status, note=note, findings=findings,
                   tables=[Table(key, title, result.rows)])


# --------------------------------------------------------------------------- a pair-bench's run


def main(bench: ModuleType, args, session: Session) -> int:
    """``remap-ab bench --subject NAME`` for a subject whose bench part declares shapes
    and their pairs (``shapes()``, ``pair(shape, a, b, device)``, ``labels(shape)``,
    ``KEY``, ``TITLE``, ``QUESTION``): the shared options only."""
    fail_slower = parse_fail_slower(args.fail_slower)
    if session.device != "cuda":
        raise NeedsGPUError(f"bench --subject {args.subject} times A and B with CUDA events and needs a CUDA device; "
                            f"torch sees none (run it on the GPU machine; on the CPU "
                            f"`{command_line.line('sweep', options=[('--subject', args.subject)])}` checks them, "
                            f"untimed)")
    subject = subjects.get(args.subject)
    return bench_pairs(bench, args.a or subject.default_a, args.b or subject.default_b, session.device,
                       session.output_folder(), environment=session.environment, command=session.command,
                       calls=args.calls, repeats=args.repeats or DEFAULT_REPEATS, fail_slower=fail_slower, budget_s=args.budget_s)


def bench_pairs(bench: ModuleType, a: str, b: str, device: str, folder: Path, *, environment: dict, command: str,
                calls: int, repeats: int, fail_slower: Optional[float], budget_s: Optional[float] = None, shapes=None,
                say=print) -> int:
    """Time ``bench``'s shapes (``shapes``: a subset; default all), write the page and
    its files into ``folder``; the exit status (0 every shape timed, equal before and
    after and not slower beyond noise; 1 otherwise)."""
    shapes = bench.shapes() if shapes is None else tuple(shapes)
    where = environment.get("gpu") or "CPU"
    say(f"bench --subject {bench.KEY} on {where} (torch {environment['torch']}, triton {environment['triton']}): "
        f"{len(shapes)} shapes, A {a}, B {b}; {calls} calls x {repeats} repeats each, {METHOD}"
        + (f"; budget {budget_s:.0f} s" if budget_s else "") + f"; writing {folder}")
    result = run(shapes, lambda s: bench.pair(s, a, b, device), calls=calls, repeats=repeats,
                 fail_slower=fail_slower, budget=Budget(budget_s), labels=bench.labels, say=say)
    done = section(result, bench.KEY, bench.TITLE, bench.QUESTION, a, b)
    meta = {**environment, "command": command, "subject": bench.KEY, "a": a, "b": b,
            "calls": calls, "repeats": repeats, "method": METHOD}
    files = page.write(folder, [done], meta)
    for finding in done.findings:
        say(f"  - {finding}")
    say("wrote " + ", ".join(str(f) for f in files))
    if result.not_measured:
        say(f"INCOMPLETE: {done.note}")
    if result.failed:
        say(f"FAIL: {len(result.failed)} of {len(result.rows)} shapes not timed, changed by the timed calls, or B "
            "slower than A beyond noise (above)")
    return 1 if result.not_measured or result.failed else 0
