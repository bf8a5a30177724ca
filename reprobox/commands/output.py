"""Where a command's text goes: human text to stdout, or to stderr when --json keeps stdout for one
object; progress to stderr. The commands write through it; the CLI makes one per invocation."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from reprobox import progress
from reprobox.commands.plain_progress import is_terminal
from reprobox.commands.progress_view import View, view_for


class Output:
    """Where text goes: human text to stdout, or to stderr when --json reserves stdout for one object.

    Progress goes to stderr: on a terminal with text output, as a live view (a line per running run);
    otherwise, and with --json, as plain lines; with --quiet, not at all.
    """

    def __init__(self, as_json: bool, quiet: bool = False) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.text_stream = sys.stderr if as_json else sys.stdout
        self.view: View | None = None if quiet else view_for(sys.stderr, live=not as_json)
        self.reporter: progress.Reporter = self.view or progress.Silent()

    def say(self, text: str) -> None:
        print(text, file=self.text_stream, flush=True)

    def progress(self, text: str) -> None:
        self.reporter.notice(text)

    def early(self, text: str) -> None:
        """A line of the result said before the rest is known (the verdict, before a drill-down's
        replays), on stderr with the progress (never on stdout, which --json keeps for one object);
        --quiet prints only the result itself."""
        if self.view is not None:
            self.view.announce(text)

    def close(self) -> None:
        """Take down the live view before the result or an error is printed."""
        if self.view is not None:
            self.view.close()

    def job_output(self) -> Callable[[bytes], None] | None:
        if self.quiet:
            return None
        through = self.view.job_echo() if self.view is not None else None
        if through is not None and is_terminal(self.text_stream):  # the same terminal as the live view
            return through
        stream = self.text_stream.buffer if hasattr(self.text_stream, "buffer") else None

        def echo(chunk: bytes) -> None:
            if stream is not None:
                stream.write(chunk)
                stream.flush()
            else:
                self.text_stream.write(chunk.decode(errors="replace"))

        return echo

    def result(self, data: dict[str, Any], text: str) -> None:
        self.close()
        if self.as_json:
            print(json.dumps(data, indent=2, sort_keys=True, default=str), flush=True)
        else:
            self.say(text)
