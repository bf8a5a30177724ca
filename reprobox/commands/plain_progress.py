"""Plain progress on stderr: `reprobox: ...` lines, and an image build's output as a one-line spinner.

What scripts and logs get, and what the live view (`live_progress`) keeps for the build's headlines. It
needs nothing beyond the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from reprobox import progress


def is_terminal(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


class TerminalProgress:
    """Plain progress: notices as `reprobox: ...` lines; of an image build's output, each build step
    (`Step N/M : ...`) as a line and, on a terminal, the output in between as a one-line spinner, so a
    long pip install visibly moves without flooding. Runs show through the notices their callers write."""

    FRAMES = "|/-\\"
    WIDTH = 100
    HEADLINES = ("Step ", "building ", "image ", "pulling ")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = is_terminal(stream)
        self.frame = 0
        # Side-by-side runs report from several threads: one lock and one write per line keep
        # their notices whole lines (print writes the text and its newline apart).
        self.lock = threading.Lock()

    def notice(self, text: str) -> None:
        self.announce(f"reprobox: {text}")

    def announce(self, text: str) -> None:
        with self.lock:
            self._clear()
            self.stream.write(f"{text}\n")
            self.stream.flush()

    def build_output(self, line: str) -> None:
        text = line.rstrip()
        if not text:
            return
        if text.startswith(self.HEADLINES):
            self.notice(text)
        elif self.tty:
            with self.lock:
                self.frame += 1
                status = f"{self.FRAMES[self.frame % len(self.FRAMES)]} {text}"[: self.WIDTH]
                self.stream.write("\r" + status.ljust(self.WIDTH))
                self.stream.flush()

    def run_started(self, run: progress.RunSeen) -> None:
        pass

    def run_step(self, run: progress.RunSeen, step: int) -> None:
        pass

    def run_ended(self, run: progress.RunSeen, status: str) -> None:
        pass

    def job_echo(self) -> Callable[[bytes], None] | None:
        return None

    def close(self) -> None:
        with self.lock:
            self._clear()

    def _clear(self) -> None:
        if self.tty and self.frame:
            self.stream.write("\r" + " " * self.WIDTH + "\r")
            self.frame = 0
