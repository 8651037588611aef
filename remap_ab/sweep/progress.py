"""The sweep's progress on stderr: bar, count, rate, ETA and verdict counts.

tqdm draws and formats it. Three things are ours:

- the ETA comes from the *cost* of the cases left, not their count: grid cases differ
  1000x in size (T 1 ... 1024, K 128 ... 2048), so a count-based ETA swings with
  whichever cases happen to finish. ``CostModel`` learns, as the run goes, seconds =
  a x cases + b x cost (the sum of the cases' ``Subject.cost``, handed in) by least
  squares over the results so far, and prices what is left with it;
- the first result is excluded (worker start-up, kernel compiles), for the ETA and for
  the rate shown (cases per second since then);
- when stderr is not a terminal (a CI log, ``2> file``), one plain line is written at
  each tenth of the run and at least every HEARTBEAT seconds, also while one slow case
  runs, instead of tqdm's carriage-return redraws.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Optional

from tqdm import tqdm

from remap_ab.status import Status

HEARTBEAT = 10.0


class CostModel:
    """seconds ~ a x cases + b x cost, fitted (least squares, no intercept) to the time
    since the first result against the cases and the cost finished since then. Where the
    two-term fit is degenerate (every case the same size) or gives a negative term, the
    better of the one-term fits (per case, per unit of cost) is used."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.origin: Optional[tuple[float, int, int]] = None  # the first result: (time, cases, cost)
        self.latest: Optional[tuple[float, int, int]] = None
        # Sums over the marks after the first of x1 = cases, x2 = cost, y = seconds (since the first).
        self._s = dict.fromkeys(("11", "12", "22", "1y", "2y", "yy"), 0.0)

    def add(self, cases: int, cost: int) -> None:
        """Record that ``cases`` cases of ``cost`` in all have finished so far."""
        now = self.clock()
        if self.origin is None:
            self.origin = (now, cases, cost)
            return
        t0, n0, u0 = self.origin
        x1, x2, y = float(cases - n0), float(cost - u0), now - t0
        s = self._s
        s["11"] += x1 * x1
        s["12"] += x1 * x2
        s["22"] += x2 * x2
        s["1y"] += x1 * y
        s["2y"] += x2 * y
        s["yy"] += y * y
        self.latest = (now, cases, cost)

    def coefficients(self) -> Optional[tuple[float, float]]:
        """(seconds per case, seconds per unit of cost), or None before there is anything to fit."""
        s = self._s
        if s["11"] <= 0:
            return None
        det = s["11"] * s["22"] - s["12"] ** 2
        if det > 1e-9 * s["11"] * s["22"]:
            a = (s["1y"] * s["22"] - s["2y"] * s["12"]) / det
            b = (s["2y"] * s["11"] - s["1y"] * s["12"]) / det
            if a >= 0 and b >= 0:
                return a, b
        per_case = (s["1y"] / s["11"], 0.0)
        if s["22"] <= 0:
            return per_case
        per_unit = (0.0, s["2y"] / s["22"])

        def sse(ab: tuple[float, float]) -> float:
            a, b = ab
            return (s["yy"] - 2 * a * s["1y"] - 2 * b * s["2y"] + a * a * s["11"] + 2 * a * b * s["12"]
                    + b * b * s["22"])

        return min((per_case, per_unit), key=sse)

    def remaining(self, cases_left: int, cost_left: int) -> Optional[float]:
        """Seconds for the cases left, priced by the fitted model (None: no fit yet)."""
        ab = self.coefficients()
        if ab is None:
            return None
        return max(0.0, ab[0] * cases_left + ab[1] * cost_left)

    def rate(self) -> Optional[float]:
        """Cases per second since the first result."""
        if self.origin is None or self.latest is None or self.latest[0] <= self.origin[0]:
            return None
        return (self.latest[1] - self.origin[1]) / (self.latest[0] - self.origin[0])


class _Bar(tqdm):
    """tqdm whose rate is the one since the first result and whose ETA is the cost model's."""

    def __init__(self, *args, progress: Progress, **kwargs):
        self.progress = progress  # read by the first refresh, inside tqdm's __init__
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self):
        d = super().format_dict
        d["rate"] = self.progress.model.rate()
        eta = self.progress.eta()
        d["eta"] = "?" if eta is None else tqdm.format_interval(eta)
        return d


class _Discard:
    def write(self, _text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class Progress:
    """``costs``: each case's size (``Subject.cost``), in the order they will be given to
    ``update``'s ``costs``; without them every case counts the same."""

    def __init__(self, total: int, enabled: bool = True, stream=None, heartbeat: float = HEARTBEAT,
                 clock: Callable[[], float] = time.monotonic, costs: Optional[Sequence[int]] = None):
        self.clock = clock
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.counts: Counter = Counter()
        self.total = total
        self.total_cost = int(sum(costs)) if costs is not None else total
        self.done = 0
        self.done_cost = 0
        self.model = CostModel(clock)
        self._lock = threading.Lock()
        self._last_line = clock()
        self._last_tenth = -1
        self._stop = threading.Event()
        self.bar = _Bar(
            total=total, unit="case", smoothing=0, dynamic_ncols=True, leave=True,
            file=self.stream if (self.tty and enabled) else _Discard(),
            mininterval=0.1 if self.tty else float("inf"), disable=False,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{eta}, {rate_fmt}{postfix}]",
            progress=self,
        )
        self._beat = None
        if enabled and not self.tty:
            self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat,), daemon=True,
                                          name="remap-ab-progress")
            self._beat.start()

    def eta(self) -> Optional[float]:
        """Seconds left: the cost model's price of the cases not yet done."""
        return self.model.remaining(self.total - self.done, self.total_cost - self.done_cost)

    def update(self, statuses, costs: Optional[Sequence[int]] = None) -> None:
        with self._lock:
            statuses = list(statuses)
            for s in statuses:
                self.counts[Status(str(s))] += 1
            self.done += len(statuses)
            self.done_cost += int(sum(costs)) if costs is not None else len(statuses)
            self.model.add(self.done, self.done_cost)
            self.bar.set_postfix_str(self.verdicts(), refresh=False)
            self.bar.update(len(statuses))
            if self.enabled and not self.tty:
                tenth = int(10 * self.done / self.total) if self.total else 10
                if tenth > self._last_tenth:
                    self._last_tenth = tenth
                    self._write_line()

    def verdicts(self) -> str:
        return " ".join(f"{s.value} {self.counts[s]}" for s in Status if self.counts[s])

    def line(self) -> str:
        return str(self.bar).strip()

    def _write_line(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._last_line = self.clock()

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(min(every, 1.0) / 4):
            with self._lock:
                if self.clock() - self._last_line >= every:
                    self._write_line()

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=2)
        with self._lock:
            if self.enabled and not self.tty and self._last_tenth < 10:
                self._write_line()
            self.bar.close()
