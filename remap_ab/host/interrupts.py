"""Ctrl-C (SIGINT) and SIGTERM as one exception, so that a stopped sweep still says what
ran, what failed and how to resume, and leaves no process or semaphore behind.

While ``Interrupts`` is installed, either signal raises ``Interrupted`` in the main
thread, once: a second signal during the clean-up is noted, not raised again. Inside a
``held()`` block (a results row being written) the exception waits for the block to
end, so a signal never cuts a row in half.

``Interrupts(first_asks=say)`` (the soak) lets the work finish what is in flight: the
first signal only sets ``asked`` and says so, the second raises ``Interrupted``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal: a KeyboardInterrupt, so that whatever handles
    Ctrl-C (and no ``except Exception`` that records a failed case) handles SIGTERM too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

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


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises ``Interrupted`` (exit status 143) in the main thread,
    once, instead of ending the process on the spot (no clean-up, no atexit: worker
    processes and semaphores left behind). The command line calls it for every command."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    fired: list[int] = []

    def on_term(signum: int, _frame) -> None:
        if not fired:
            fired.append(signum)
            raise Interrupted(signum)

    signal.signal(signal.SIGTERM, on_term)
