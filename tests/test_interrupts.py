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


def test_the_command_lines_signals_raise_once_and_are_restored_after():
    from remap_ab.host.interrupts import command_line_signals

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(Interrupted) as caught, command_line_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # a second signal while the first unwinds: noted, not raised
    assert caught.value.exit_status == 143 and caught.value.name == "SIGTERM"
    assert {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == before


def test_a_moment_pauses_only_where_the_environment_names_it(tmp_path, monkeypatch):
    import time

    from remap_ab.host import interrupts

    marker = tmp_path / "here"
    interrupts.moment("row")  # no $REMAP_AB_PAUSE_AT: nothing
    monkeypatch.setenv(interrupts.PAUSE_VARIABLE, f"row:{marker}")
    monkeypatch.setattr(interrupts, "PAUSE_SECONDS", 0.2)
    monkeypatch.setattr(interrupts, "_paused", set())
    interrupts.moment("summary")  # another moment: nothing
    assert not marker.exists()
    start = time.monotonic()
    interrupts.moment("row")
    assert marker.read_text() == f"{os.getpid()}\n" and time.monotonic() - start >= 0.2
    marker.unlink()
    interrupts.moment("row")  # once only
    assert not marker.exists()


def test_ctrl_c_in_the_command_lines_first_imports_is_one_line(monkeypatch, capsys):
    # The signal arrives before any command machinery loaded: cli.main turns it into the one line.
    from remap_ab import cli
    from remap_ab.host import interrupts

    def stopped(*_):
        raise KeyboardInterrupt  # what Python's own handler raises mid-import

    monkeypatch.setattr(interrupts, "moment", stopped)
    assert cli.main(["sweep", "--list"]) == 130
    assert capsys.readouterr().err == "remap-ab sweep: interrupted by Ctrl-C\n"
