"""`signals.held`: a termination signal during a step whose result must reach the caller waits for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from reprobox import signals


def test_a_signal_during_the_block_is_delivered_after_it_and_counts_as_the_first() -> None:
    reached: list[str] = []
    with signals.interrupting() as caught:
        with pytest.raises(signals.SignalInterrupt) as raised, signals.held():
            os.kill(os.getpid(), signal.SIGTERM)
            reached.append("the id")  # the step's result is kept although the signal came first
        assert raised.value.signum == signal.SIGTERM
        assert caught.first == signal.SIGTERM and caught.exit_code() == 143
    assert reached == ["the id"]


def test_a_second_ctrl_c_during_the_block_delivers_the_first_signal_at_once() -> None:
    reached: list[str] = []
    with signals.interrupting() as caught:
        with pytest.raises(signals.SignalInterrupt) as raised, signals.held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("after the second signal")
        assert raised.value.signum == signal.SIGTERM and caught.first == signal.SIGTERM
    assert reached == []


def test_a_block_without_a_signal_restores_the_handlers_and_raises_nothing() -> None:
    with signals.interrupting():
        ours = {signum: signal.getsignal(signum) for signum in signals.HANDLED}
        with signals.held():
            assert all(signal.getsignal(signum) != ours[signum] for signum in signals.HANDLED)
        assert {signum: signal.getsignal(signum) for signum in signals.HANDLED} == ours


def test_a_held_signal_whose_handler_was_the_default_still_ends_the_process() -> None:
    code = (
        "import os, signal\n"
        "from reprobox import signals\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "with signals.held():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('block finished', flush=True)\n"
        "print('not reached', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGTERM
    assert done.stdout == "block finished\n"
