"""The command line: parse arguments, call the library, print, exit. Nothing else lives here."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reprobox import errors
from reprobox._version import __version__

MAIN_EPILOG = """\
examples:
  reprobox run examples/tiny-mlp/job.yaml             run a job once, record its checkpoints' hashes
  reprobox verify examples/tiny-mlp/job.yaml --runs 3 run it 3 times; exit 0 only if bit-identical
  reprobox compare runs/tiny-mlp/A runs/tiny-mlp/B    explain how two runs differ
  reprobox verify job.yaml --json | jq .verdict       machine-readable output

exit codes: 0 reproduced/succeeded, 1 not reproducible, 2 bad input,
            3 the job failed (non-zero exit, killed, timed out), 4 environment problem
"""


class Output:
    """Where text goes: human text to stdout, or to stderr when --json reserves stdout for one object."""

    def __init__(self, as_json: bool, quiet: bool = False) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.text_stream = sys.stderr if as_json else sys.stdout

    def say(self, text: str) -> None:
        print(text, file=self.text_stream, flush=True)

    def progress(self, text: str) -> None:
        if not self.quiet:
            print(f"reprobox: {text}", file=sys.stderr, flush=True)

    def build_progress(self) -> Callable[[str], None]:
        """Image build output: each build step on its own line; on a terminal, other output as a spinner."""
        if self.quiet:
            return lambda _line: None
        return BuildProgress(sys.stderr)

    def job_output(self) -> Callable[[bytes], None] | None:
        if self.quiet:
            return None
        stream = self.text_stream.buffer if hasattr(self.text_stream, "buffer") else None

        def echo(chunk: bytes) -> None:
            if stream is not None:
                stream.write(chunk)
                stream.flush()
            else:
                self.text_stream.write(chunk.decode(errors="replace"))

        return echo

    def result(self, data: dict[str, Any], text: str) -> None:
        if self.as_json:
            print(json.dumps(data, indent=2, sort_keys=True, default=str), flush=True)
        else:
            self.say(text)


class BuildProgress:
    """Shows build steps (`Step N/M : ...`) and reprobox's own notices as lines; on a terminal, the
    output in between as a one-line spinner, so a long pip install visibly moves without flooding."""

    FRAMES = "|/-\\"
    WIDTH = 100
    HEADLINES = ("Step ", "building ", "image ", "pulling ")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.frame = 0

    def __call__(self, line: str) -> None:
        text = line.rstrip()
        if not text:
            return
        if text.startswith(self.HEADLINES):
            self._clear()
            print(f"reprobox: {text}", file=self.stream, flush=True)
        elif self.tty:
            self.frame += 1
            status = f"{self.FRAMES[self.frame % len(self.FRAMES)]} {text}"[: self.WIDTH]
            self.stream.write("\r" + status.ljust(self.WIDTH))
            self.stream.flush()

    def _clear(self) -> None:
        if self.tty and self.frame:
            self.stream.write("\r" + " " * self.WIDTH + "\r")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reprobox",
        description="Run a PyTorch training job bit for bit reproducibly, and prove it.",
        epilog=MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reprobox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from reprobox import commands as command_modules

    for register in command_modules.REGISTRY:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return errors.EXIT_BAD_INPUT
    out = Output(getattr(args, "json", False), getattr(args, "quiet", False))
    try:
        return int(args.handler(args, out))
    except errors.ReproboxError as exc:
        return report_error(exc, out)
    except KeyboardInterrupt:
        return report_error(errors.Interrupted(), out)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def report_error(exc: errors.ReproboxError, out: Output) -> int:
    for line in exc.lines():
        print(f"error: {line}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)
    tail = getattr(exc, "log_tail", "")
    if tail:
        print(tail.rstrip(), file=sys.stderr)
    run_dir = getattr(exc, "run_dir", None)
    if out.as_json:
        payload: dict[str, Any] = {
            "error": {"message": exc.message, "lines": exc.lines(), "exit_code": exc.exit_code}
        }
        if run_dir is not None:
            payload["run_dir"] = str(run_dir)
        print(json.dumps(payload, indent=2, sort_keys=True))
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
