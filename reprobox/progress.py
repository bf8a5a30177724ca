"""What reprobox is doing, for whoever listens: one reporter per command, held in a context variable.

Library code reports without being handed a callback: `progress.say("building image ...")` for a
notice, `progress.build_output(line)` for each line an image build or pull streams, and, for each run
(`reprobox.runprogress`, from the run loop every command shares), that it started, which optimizer step
its trail has reached, and how it ended. The CLI installs the reporter once per command
(`with progress.reporting(reporter): ...`) and decides how that looks; nothing is shown by default, so
library calls and tests stay silent unless they ask (as pypa/build does for its logger).

Threads do not inherit a context variable: code that reports from a worker thread starts it in a copy
of the caller's context (`contextvars.copy_context().run`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar


class Series:
    """Runs of one kind, numbered from 1 to `total` (None: not known in advance), such as a verify's runs
    or a drill-down's replays: they take about as long as each other, so a finished one's length
    estimates how long the others have left."""

    def __init__(self, total: int | None, what: str = "run") -> None:
        self.total = total
        self.what = what

    def label(self, index: int) -> RunLabel:
        """The label of run `index` (from 1) of the series: "run 2/3"."""
        return RunLabel(f"{self.what} {index}" + (f"/{self.total}" if self.total else ""), self)

    def __repr__(self) -> str:
        return f"Series({self.total}, {self.what!r})"


@dataclass(frozen=True)
class RunLabel:
    """How a run is named while it runs ("run 2/3", "vary threads"), and the series it belongs to."""

    text: str
    series: Series | None = None


@dataclass(frozen=True)
class RunSeen:
    """A run as its reporter hears of it: the job, its run directory (which tells runs apart), its label."""

    job: str
    run_dir: Path
    label: RunLabel | None = None


class Reporter(Protocol):
    """Receives progress: notices (one line each), the streamed output of image builds and pulls, and
    each run's start, the optimizer step its trail reached, and its end (the status it was recorded with)."""

    def notice(self, text: str) -> None: ...

    def build_output(self, line: str) -> None: ...

    def run_started(self, run: RunSeen) -> None: ...

    def run_step(self, run: RunSeen, step: int) -> None: ...

    def run_ended(self, run: RunSeen, status: str) -> None: ...


class Silent:
    """Shows nothing: the default, and what `--quiet` installs."""

    def notice(self, text: str) -> None:
        pass

    def build_output(self, line: str) -> None:
        pass

    def run_started(self, run: RunSeen) -> None:
        pass

    def run_step(self, run: RunSeen, step: int) -> None:
        pass

    def run_ended(self, run: RunSeen, status: str) -> None:
        pass


class Recorder:
    """Keeps every notice and build line in order (`lines`), and the runs' events apart (`events`:
    ("started" | "step" | "ended", run, step or status)), for callers that read them afterwards."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[tuple[str, RunSeen, int | str | None]] = []

    def notice(self, text: str) -> None:
        self.lines.append(text)

    def build_output(self, line: str) -> None:
        self.lines.append(line)

    def run_started(self, run: RunSeen) -> None:
        self.events.append(("started", run, None))

    def run_step(self, run: RunSeen, step: int) -> None:
        self.events.append(("step", run, step))

    def run_ended(self, run: RunSeen, status: str) -> None:
        self.events.append(("ended", run, status))


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


def listening() -> bool:
    """Whether anyone hears progress here: work done only to report (watching a trail) is skipped if not."""
    return not isinstance(current(), Silent)


@contextlib.contextmanager
def reporting(reporter: AnyReporter) -> Iterator[AnyReporter]:
    """Send progress in this context (and contexts copied from it) to `reporter` until the block ends."""
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)
