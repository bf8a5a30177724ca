"""Termination signals to the controller take the Ctrl-C path: the job is stopped and recorded.

Every runtime already stops its job and records the run as interrupted on KeyboardInterrupt; SIGTERM
and SIGHUP (a batch system ending us, a closed terminal) raise `SignalInterrupt`, a KeyboardInterrupt
that names its signal, so they take that same path and the exit code can say which signal it was.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SignalInterrupt(KeyboardInterrupt):
    """A termination signal arrived; caught wherever KeyboardInterrupt is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Caught:
    """The first termination signal received while `interrupting` was active, if any."""

    def __init__(self) -> None:
        self.first: int | None = None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """Raise on the first signal; later ones raise only for SIGINT (an impatient second Ctrl-C), so
        a supervisor repeating SIGTERM cannot break the clean-up the first one started."""
        if self.first is None:
            self.first = signum
            raise SignalInterrupt(signum)
        if signum == signal.SIGINT:
            raise SignalInterrupt(signum)

    def exit_code(self) -> int:
        return 128 + (self.first or signal.SIGINT)


@contextlib.contextmanager
def interrupting() -> Iterator[Caught]:
    """Install the handlers for the duration (main thread only: elsewhere Python refuses handlers)."""
    caught = Caught()
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {signum: signal.signal(signum, caught.handle) for signum in HANDLED}
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold termination signals for the block and deliver the first one as it ends.

    For a step whose result must reach the caller: a container create interrupted while the engine
    works on it leaves a container the engine finishes creating after we stopped waiting for its id,
    which nothing removes. A second SIGINT (an impatient Ctrl-C) is not held: it delivers at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous: dict[int, Any] = {}

    def deliver_first() -> None:
        first = pending[0]
        pending.clear()  # delivered once, whether from hold or as the block ends
        _deliver(first, previous.get(first, signal.SIG_DFL))

    def hold(signum: int, _frame: FrameType | None) -> None:
        if pending and signum == signal.SIGINT:
            deliver_first()
        pending.append(signum)

    for handled in HANDLED:
        previous[handled] = signal.signal(handled, hold)
    try:
        yield
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
        if pending:
            deliver_first()


def _deliver(signum: int, handler: Any) -> None:
    """Hand a held signal to the handler it would have reached: ours raise, the default one ends us."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


def exit_now(code: int) -> None:
    """End the process at once with ``code``, output flushed, without waiting for worker threads.

    For a command that only reads (``hash``): its pool's threads may be hashing a large file, and the
    interpreter's exit would wait for each to finish its task. Nothing is left half-written.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
