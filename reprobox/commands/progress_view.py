"""How a command shows progress on stderr: plain `reprobox: ...` lines, or, on a terminal, the same lines
with a live line per running run below them (`live_progress`, drawn by rich).

Plain lines are what scripts and logs get (stderr not a terminal, or --json); the live view is for
people. rich is imported only for the live view, so the CLI still starts where it is not installed (the
job image runs the guest side of reprobox).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from reprobox import progress
from reprobox.commands.plain_progress import TerminalProgress, is_terminal


class View(progress.Reporter, Protocol):
    """A command's reporter, plus what only the CLI asks of it."""

    def announce(self, text: str) -> None:
        """Show a line as it is (no `reprobox:` prefix): the verdict, as soon as it is known."""
        ...

    def job_echo(self) -> Callable[[bytes], None] | None:
        """Where the job's live output goes to stay clear of the live view; None: straight to stdout."""
        ...

    def close(self) -> None:
        """Take down whatever is drawn live, before the command's last words."""
        ...


def view_for(stream: Any, *, live: bool) -> View:
    """The live view on a terminal when `live` (and rich is there); plain lines otherwise."""
    if live and is_terminal(stream):
        try:
            from reprobox.commands.live_progress import LiveProgress
        except ImportError:  # rich is missing: plain lines still say everything
            return TerminalProgress(stream)
        return LiveProgress.on(stream)
    return TerminalProgress(stream)
