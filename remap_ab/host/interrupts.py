"""Ctrl-C (SIGINT) and SIGTERM as one exception, so that a stopped sweep still says what
ran, what failed and how to resume, and leaves no process or semaphore behind.

While ``Interrupts`` is installed, either signal raises ``Interrupted`` in the main
thread, once: a second signal during the clean-up is noted, not raised again. Inside a
``held()`` block (a results row being written) the exception waits for the block to
end, so a signal never cuts a row in half.

``Interrupts(first_asks=say)`` (the soak) lets the work finish what is in flight: the
first signal only sets ``asked`` and says so, the second raises ``Interrupted``.

``command_line_signals()`` is the command line's: installed before its first heavy
import, so a signal at any moment of a command (its imports included) is one
``Interrupted`` that ``cli.py`` turns into one line. ``moment(NAME)`` marks the moments
the interrupt tests stop a command at (``REMAP_AB_PAUSE_AT``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal: a KeyboardInterrupt, so that whatever handles
    Ctrl-C (and no ``except Exception`` that records a failed case) handles SIGTERM too.
    ``then``: what the one line says after "interrupted by ..." (e.g. the resume line of
    the run folder the command was writing), set by whoever knows it."""

    def __init__(self, signum: int, then: str = ""):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.then = then

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """128 + the signal number: 130 for SIGINT, 143 for SIGTERM, as a shell reports it."""
        return 128 + self.signum


class Interrupts:
    def __init__(self, first_asks: Optional[Callable[[str], None]] = None, signals: tuple = SIGNALS) -> None:
        self.signum: Optional[int] = None
        self._raised = False
        self._depth = 0
        self._previous: dict[int, Any] = {}
        self._first_asks = first_asks
        self._signals = signals

    def __enter__(self) -> Interrupts:
        for s in self._signals:
            self._previous[s] = signal.signal(s, self._on_signal)
        return self

    @property
    def asked(self) -> bool:
        """A signal arrived (with ``first_asks``: the work is asked to stop after what is in flight)."""
        return self.signum is not None

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, _frame) -> None:
        if self.signum is None:
            self.signum = signum
            if self._first_asks is not None:
                self._first_asks(signal.Signals(signum).name)
                return
        if self._depth == 0:
            self._raise()

    def _raise(self) -> None:
        if self.signum is not None and not self._raised:
            self._raised = True
            raise Interrupted(self.signum)

    @contextmanager
    def held(self) -> Iterator[None]:
        """No ``Interrupted`` inside this block; one that arrived is raised at its end."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0:
            self._raise()


@contextmanager
def command_line_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread (once: a second
    signal while the first unwinds is noted, not raised), from the block's first line
    to its last; the handlers before it are back after it (a test may call the command
    line in its own process)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def on_signal(signum: int, _frame) -> None:
        if not fired:
            fired.append(signum)
            raise Interrupted(signum)

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """``exc`` as an ``Interrupted`` (a KeyboardInterrupt raised by Python's own handler is SIGINT's)."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


# A test's pause at a named moment of a command: ``REMAP_AB_PAUSE_AT=MOMENT:FILE``.
PAUSE_VARIABLE = "REMAP_AB_PAUSE_AT"
MOMENTS = ("imports", "prepared", "pool", "row", "summary")
PAUSE_SECONDS = 60.0
_paused: set[str] = set()


def moment(name: str) -> None:
    """The command reached the moment ``name`` (one of ``MOMENTS``). Where
    ``$REMAP_AB_PAUSE_AT`` is ``NAME:FILE``, the first time: FILE is written and the
    process waits there (up to a minute) for the signal a test sends it
    (tests/test_interrupt_moments.py). Otherwise nothing."""
    spec = os.environ.get(PAUSE_VARIABLE, "")
    wanted, _, marker = spec.partition(":")
    if wanted != name or name in _paused or not marker:
        return
    _paused.add(name)
    with open(marker, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + PAUSE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.02)
