"""``interrupts.Interrupts``, the one handler of Ctrl-C and SIGTERM: by default the
first signal raises ``Interrupted``; with ``first_asks`` (the soak) the first only asks
the work to stop after what is in flight, the second raises, later ones are noted."""

from __future__ import annotations

import os
import signal

import pytest

from remap_ab.host.interrupts import Interrupted, Interrupts


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # delivered to the main thread before the next bytecode


def test_the_first_signal_raises_by_default():
    with pytest.raises(Interrupted) as caught, Interrupts() as interrupts:
        _sigint()
    assert caught.value.exit_status == 130 and interrupts.asked


def test_with_first_asks_the_first_signal_asks_and_the_second_raises():
    said = []
    previous = signal.getsignal(signal.SIGINT)
    interrupts = Interrupts(first_asks=said.append, signals=(signal.SIGINT,))
    with interrupts:
        assert not interrupts.asked
        _sigint()
        assert interrupts.asked and said == ["SIGINT"]
        with pytest.raises(Interrupted) as caught:
            _sigint()
        assert caught.value.name == "SIGINT"
        _sigint()  # noted, not raised again: the clean-up runs
    assert said == ["SIGINT"]
    assert signal.getsignal(signal.SIGINT) is previous
