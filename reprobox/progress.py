"""What reprobox is doing, for whoever listens: one reporter per command, held in a context variable.

Library code reports without being handed a callback: `progress.say("building image ...")` for a
notice, `progress.build_output(line)` for each line an image build or pull streams. The CLI installs
the reporter once per command (`with progress.reporting(reporter): ...`); nothing is shown by default,
so library calls and tests stay silent unless they ask (as pypa/build does for its logger).

Threads do not inherit a context variable: code that reports from a worker thread starts it in a copy
of the caller's context (`contextvars.copy_context().run`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Protocol, TypeVar


class Reporter(Protocol):
    """Receives progress: notices (one line each) and the streamed output of image builds and pulls."""

    def notice(self, text: str) -> None: ...

    def build_output(self, line: str) -> None: ...


class Silent:
    """Shows nothing: the default, and what `--quiet` installs."""

    def notice(self, text: str) -> None:
        pass

    def build_output(self, line: str) -> None:
        pass


class Recorder:
    """Keeps every notice and build line in order, for callers that want to read them afterwards."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def notice(self, text: str) -> None:
        self.lines.append(text)

    def build_output(self, line: str) -> None:
        self.lines.append(line)


AnyReporter = TypeVar("AnyReporter", bound=Reporter)
_SILENT = Silent()
_CURRENT: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("reprobox_progress", default=None)


def say(text: str) -> None:
    """Report a notice (what reprobox is doing now) to the current reporter."""
    current().notice(text)


def build_output(line: str) -> None:
    """Report one line of an image build's or pull's output to the current reporter."""
    current().build_output(line)


def current() -> Reporter:
    """The reporter installed by the innermost `reporting` block of this context; silent when none."""
    return _CURRENT.get() or _SILENT


@contextlib.contextmanager
def reporting(reporter: AnyReporter) -> Iterator[AnyReporter]:
    """Send progress in this context (and contexts copied from it) to `reporter` until the block ends."""
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)
