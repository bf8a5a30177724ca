"""The live view on a terminal: below the notices, one line per running run (which run of how many,
the step its trail reached, the time it has taken, and an estimate of the time left), drawn by rich.

Notices, the early verdict and the job's own output print above the live lines (rich's Live keeps
them there), so nothing that plain lines would show is lost; the live lines go when their runs end.
"""

from __future__ import annotations

import codecs
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TaskID
from rich.text import Text

from reprobox import progress
from reprobox.commands.plain_progress import TerminalProgress
from reprobox.records.manifest import STATUS_SUCCEEDED

PENDING_LIMIT = 64 << 10  # a job line longer than this (a progress bar redrawn with \r) is shown in parts
BUILD_ROW = "build"


def run_line(run: progress.RunSeen, step: int | None, elapsed: float, left: float | None) -> str:
    """The live line of a run: "run 2/3 of tiny-mlp: step 340, 0:12 elapsed, about 0:07 left"."""
    name = f"{run.label.text} of {run.job}" if run.label else run.job
    parts = [f"step {step}"] if step is not None else []
    parts.append(f"{clock(elapsed)} elapsed")
    if left is not None and left >= 1:
        parts.append(f"about {clock(left)} left")
    return f"{name}: {', '.join(parts)}"


def clock(seconds: float) -> str:
    """0:07, 12:30, 1:02:03."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Estimates:
    """How long the runs of each series took, to estimate the time left of those still running or to
    come: a run still running has the typical length less its elapsed time left, and each run of its
    series not started yet the typical length. Only runs that succeeded count (a failed one stops short)."""

    def __init__(self) -> None:
        self.lengths: dict[progress.Series, list[float]] = {}
        self.started: dict[progress.Series, int] = {}

    def run_started(self, label: progress.RunLabel | None) -> None:
        if label is not None and label.series is not None:
            self.started[label.series] = self.started.get(label.series, 0) + 1

    def run_ended(self, label: progress.RunLabel | None, status: str, seconds: float) -> None:
        if label is not None and label.series is not None and status == STATUS_SUCCEEDED:
            self.lengths.setdefault(label.series, []).append(seconds)

    def left(self, label: progress.RunLabel | None, elapsed: float) -> float | None:
        """Seconds left for this run and the runs of its series still to start; None before any
        run of the series has finished."""
        series = label.series if label is not None else None
        lengths = self.lengths.get(series) if series is not None else None
        if series is None or not lengths:
            return None
        typical = statistics.median(lengths)
        to_start = max(0, series.total - self.started.get(series, 0)) if series.total else 0
        return max(0.0, typical - elapsed) + to_start * typical


class _Lines:
    """The job's output, cut into whole lines as it comes (a line redrawn with \\r shows as drawn last)."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending = ""

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self.pending = (self.pending + self.decoder.decode(chunk)).split("\n")
        if len(self.pending) > PENDING_LIMIT:
            lines.append(self.pending)
            self.pending = ""
        return [line.rsplit("\r", 1)[-1] for line in lines]

    def rest(self) -> list[str]:
        rest, self.pending = self.pending + self.decoder.decode(b"", final=True), ""
        return [rest.rsplit("\r", 1)[-1]] if rest else []


class _LineColumn(ProgressColumn):
    """A row's text, rendered at every refresh (the elapsed time moves)."""

    def __init__(self, view: LiveProgress) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Task) -> Text:
        return Text(self.view.line_of(task), no_wrap=True, overflow="ellipsis")


class LiveProgress:
    """Progress on a terminal: notices above, a live line per running run (and one for an image
    build's latest output) below; the live area is drawn only while something runs."""

    def __init__(
        self, console: Console, *, clock: Callable[[], float] = time.monotonic, auto_refresh: bool = True
    ) -> None:
        self.console = console
        self.clock = clock
        self.lock = threading.RLock()  # runs side by side report from their own threads
        self.bar = Progress(
            SpinnerColumn(),
            _LineColumn(self),
            console=console,
            transient=True,
            auto_refresh=auto_refresh,
            refresh_per_second=4,
            redirect_stdout=False,  # stdout may be a file; the job's output reaches here by job_echo
            get_time=clock,
        )
        self.live = False
        self.rows: dict[Path | str, TaskID] = {}
        self.began: dict[Path, float] = {}
        self.estimates = Estimates()
        self.output = _Lines()

    @classmethod
    def on(cls, stream: Any) -> LiveProgress:
        return cls(Console(file=stream, highlight=False, soft_wrap=True))

    def notice(self, text: str) -> None:
        with self.lock:
            self._drop(BUILD_ROW)  # the build's chatter is over once reprobox speaks again
            self.announce(f"reprobox: {text}")

    def announce(self, text: str) -> None:
        with self.lock:
            self.console.print(Text(text), soft_wrap=True)

    def build_output(self, line: str) -> None:
        text = line.rstrip()
        if not text:
            return
        if text.startswith(TerminalProgress.HEADLINES):
            self.notice(text)
            return
        with self.lock:
            if BUILD_ROW not in self.rows:
                self._add(BUILD_ROW, line=text)
            self.bar.update(self.rows[BUILD_ROW], line=text)

    def run_started(self, run: progress.RunSeen) -> None:
        with self.lock:
            self.estimates.run_started(run.label)
            self.began[run.run_dir] = self.clock()
            self._add(run.run_dir, run=run, step=None)

    def run_step(self, run: progress.RunSeen, step: int) -> None:
        with self.lock:
            if run.run_dir in self.rows:
                self.bar.update(self.rows[run.run_dir], step=step)

    def run_ended(self, run: progress.RunSeen, status: str) -> None:
        with self.lock:
            began = self.began.pop(run.run_dir, None)
            if began is not None:
                self.estimates.run_ended(run.label, status, self.clock() - began)
            self._flush_output()
            self._drop(run.run_dir)

    def job_echo(self) -> Callable[[bytes], None]:
        return self.job_output

    def job_output(self, chunk: bytes) -> None:
        """The job's output, line by line, above the live lines (as it would show without them)."""
        with self.lock:
            for line in self.output.feed(chunk):
                self.console.print(Text.from_ansi(line), soft_wrap=True)

    def line_of(self, task: Task) -> str:
        run = task.fields.get("run")
        if not isinstance(run, progress.RunSeen):
            return f"{BUILD_ROW}: {task.fields.get('line', '')}"
        elapsed = task.elapsed or 0.0
        return run_line(run, task.fields.get("step"), elapsed, self.estimates.left(run.label, elapsed))

    def refresh(self) -> None:
        with self.lock:
            if self.live:
                self.bar.refresh()

    def close(self) -> None:
        with self.lock:
            self._flush_output()
            for key in list(self.rows):
                self._drop(key)

    def _add(self, key: Path | str, **fields: Any) -> None:
        self.rows[key] = self.bar.add_task("", total=None, **fields)
        if not self.live:
            self.bar.start()
            self.live = True

    def _drop(self, key: Path | str) -> None:
        row = self.rows.pop(key, None)
        if row is not None:
            self.bar.remove_task(row)
        if self.live and not self.rows:
            self.bar.stop()
            self.live = False

    def _flush_output(self) -> None:
        for line in self.output.rest():
            self.console.print(Text.from_ansi(line), soft_wrap=True)
