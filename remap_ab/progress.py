"""The sweep's progress on stderr: bar, count, rate, ETA and verdict counts.

tqdm draws and formats it. Two things are ours:

- the rate behind the ETA is the *recent* rate (the last RECENT results, start-up and
  the first result excluded), so the first cases — worker start-up, kernel compiles —
  do not inflate the ETA for the rest of the run (a 72 s sweep once showed "ETA 82:21");
- when stderr is not a terminal (a CI log, ``2> file``), one plain line is written at
  each tenth of the run and at least every HEARTBEAT seconds, also while one slow case
  runs, instead of tqdm's carriage-return redraws.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Optional

from tqdm import tqdm

from remap_ab.status import Status

HEARTBEAT = 10.0
RECENT = 32


class RecentRate:
    """Cases per second over the last ``window`` results, the first one excluded."""

    def __init__(self, window: int = RECENT, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.marks: deque = deque(maxlen=window + 1)  # (time, cases done)

    def add(self, done: int) -> None:
        self.marks.append((self.clock(), done))

    def rate(self) -> Optional[float]:
        if len(self.marks) < 2:
            return None  # only the first result (start-up, compiles): no estimate yet
        (t0, n0), (t1, n1) = self.marks[0], self.marks[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None


class _Bar(tqdm):
    """tqdm whose rate (and so ETA) is the recent one."""

    def __init__(self, *args, recent: RecentRate, **kwargs):
        self.recent = recent  # read by the first refresh, inside tqdm's __init__
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self):
        d = super().format_dict
        d["rate"] = self.recent.rate()
        return d


class _Discard:
    def write(self, _text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=None, heartbeat: float = HEARTBEAT,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.counts: Counter = Counter()
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._last_line = clock()
        self._last_tenth = -1
        self._stop = threading.Event()
        self.bar = _Bar(
            total=total, unit="case", smoothing=0, dynamic_ncols=True, leave=True,
            file=self.stream if (self.tty and enabled) else _Discard(),
            mininterval=0.1 if self.tty else float("inf"), disable=False,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]",
            recent=RecentRate(clock=clock),
        )
        self._beat = None
        if enabled and not self.tty:
            self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat,), daemon=True,
                                          name="remap-ab-progress")
            self._beat.start()

    def update(self, statuses) -> None:
        with self._lock:
            statuses = list(statuses)
            for s in statuses:
                self.counts[Status(str(s))] += 1
            self.done += len(statuses)
            self.bar.recent.add(self.done)
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
