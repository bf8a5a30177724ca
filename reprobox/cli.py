"""The command line: parse arguments, call the library, print, exit. Nothing else lives here."""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from reprobox import errors, progress, signals
from reprobox._version import __version__
from reprobox.commands.output import Output

MAIN_EPILOG = """\
examples:
  reprobox run examples/tiny-mlp/job.yaml             run a job once, record its checkpoints' hashes
  reprobox verify examples/tiny-mlp/job.yaml --runs 3 run it 3 times; exit 0 only if bit-identical
  reprobox compare runs/tiny-mlp/A runs/tiny-mlp/B    explain how two runs differ
  reprobox verify job.yaml --json | jq .verdict       machine-readable output

exit codes: 0 reproduced/succeeded, 1 not reproducible, 2 bad input,
            3 the job failed (non-zero exit, killed, timed out), 4 environment problem
            (no engine, build failed, a full disk: the run is recorded as failed for it),
            70 internal error (a bug in reprobox; the traceback is saved to a file),
            130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (the run is recorded as interrupted)
"""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given the arguments, only the subcommand they name (its module
    alone is imported; see reprobox.commands)."""
    parser = argparse.ArgumentParser(
        prog="reprobox",
        description="Run a PyTorch training job bit for bit reproducibly, and prove it.",
        epilog=MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reprobox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from reprobox import commands as command_modules

    command_modules.register(commands, command_modules.modules_for(_named_command(argv)))
    return parser


def _named_command(argv: Sequence[str] | None) -> str | None:
    """The subcommand the arguments name (their first one), if they start with one."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return arguments[0] if arguments and not arguments[0].startswith("-") else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return errors.EXIT_BAD_INPUT
    _never_fail_on_encoding()
    out = Output(getattr(args, "json", False), getattr(args, "quiet", False))
    with signals.interrupting() as caught, progress.reporting(out.reporter):
        code = _dispatch(args, out, caught, list(argv) if argv is not None else None)
    if caught.first is not None and getattr(args, "abandons_workers", False):
        signals.exit_now(code)  # worker threads still hashing would hold the interpreter's exit
    return code


def command() -> int:
    """The `reprobox` command (and `python -m reprobox`): ``main``, then an exit that skips the cyclic
    garbage collector's last walk over every object of every module imported (about 8 ms of CPU a
    command). atexit handlers, waiting for threads and flushing the standard streams happen as before;
    ``main`` itself is for callers that live on (tests, a notebook)."""
    code = main()
    gc.freeze()
    return code


def _never_fail_on_encoding() -> None:
    """A path whose name is not UTF-8 (bytes kept as surrogates) is printed escaped, never an error."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


def _dispatch(args: argparse.Namespace, out: Output, caught: signals.Caught, argv: list[str] | None) -> int:
    """Run the command's handler and turn how it ended into output and an exit code."""
    try:
        try:
            return int(args.handler(args, out))
        finally:
            out.close()
    except errors.Interrupted as exc:
        return report_error(_with_signal(exc, caught.first), out)
    except errors.ReproboxError as exc:
        return report_error(exc, out)
    except KeyboardInterrupt:
        return report_error(_with_signal(errors.Interrupted(), caught.first), out)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: say so once, keep the traceback
        return _unexpected(exc, out, argv)


def _with_signal(exc: errors.Interrupted, signum: int | None) -> errors.Interrupted:
    """The interruption with the exit code of the signal that caused it (SIGINT when none was caught)."""
    if signum is None or signum == signal.SIGINT or exc.signal_number is not None:
        return exc
    return errors.Interrupted(exc.run_dir, signal_number=signum)


def _unexpected(exc: Exception, out: Output, argv: list[str] | None) -> int:
    """An error no code expected: a full disk met on the way is the machine's state, said in one
    sentence (exit 4); anything else is a bug."""
    full = errors.DiskFull.from_error(exc)
    if full is not None:
        return report_error(full, out)
    return report_internal_error(exc, out, argv)


def report_internal_error(exc: Exception, out: Output, argv: list[str] | None) -> int:
    """One line on stderr: a bug, and where its traceback is; the traceback itself goes to a file."""
    from reprobox import crash  # its imports (traceback, secrets, tempfile) are paid only by a crash

    saved = crash.save_crash(exc, argv)
    where = f"the full traceback is in {saved}" if saved else "no traceback file could be written"
    print(
        f"error: internal error in reprobox (a bug, not your input): {crash.summary(exc)}; {where}; "
        "please report it with that file",
        file=sys.stderr,
    )
    if out.as_json:
        payload = {"error": {"message": crash.summary(exc), "exit_code": errors.EXIT_INTERNAL}}
        payload["error"]["crash_report"] = str(saved) if saved else None
        print(json.dumps(payload, indent=2, sort_keys=True))
    return errors.EXIT_INTERNAL


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
