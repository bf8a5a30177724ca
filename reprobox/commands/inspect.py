"""`report`, `fingerprint` and `hash`: looking at runs, machines and checkpoint files."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from reprobox import runtimes
from reprobox.commands.common import (
    add_command,
    add_image_flags,
    add_output_flags,
    check_report_targets,
    runtime_options,
)
from reprobox.errors import EXIT_OK, ReproboxError, UsageError
from reprobox.records.manifest import read_record

if TYPE_CHECKING:
    from reprobox.commands.output import Output
    from reprobox.guest.hashing import CheckpointDigest

T = TypeVar("T")

REPORT_EPILOG = """\
examples:
  reprobox report runs/tiny-mlp/A runs/tiny-mlp/B --html review.html
  reprobox report runs/tiny-mlp/* --markdown REPRODUCIBILITY.md     (the plot goes to REPRODUCIBILITY.png)

The report states the verdict, explains it (stack differences ranked by their effect on numerics,
differing tensors, the first diverging optimizer step when trails were recorded), and plots the
per-step divergence and the runs' loss curves.
"""

FINGERPRINT_EPILOG = """\
examples:
  reprobox fingerprint                          this machine, as a table
  reprobox fingerprint --runtime docker --json   inside the reprobox image
  reprobox fingerprint --runtime docker --image reprobox/env:0123456789abcdef
"""

HASH_EPILOG = """\
examples:
  reprobox hash out/model.pt                    file sha256 and canonical content hash
  reprobox hash a.pt b.safetensors --json       equal tensors give equal content hashes across formats

The content hash covers what the file holds: a checkpoint's tensors (each one's name, dtype, shape and
bytes; its other values are digested apart), the values of a file of values (JSON, YAML, CSV, logs), and for a
file the readers cannot take apart (not a checkpoint, or an unreadable one) its bytes: its file sha256,
with a note. The `covers` line says which.

A file that declares more than it holds or more than the readers' limits (a shape over 2**48
elements, a header nested over 64 levels, an archive that would expand over 1100 times, an array over
1 GiB to reorder in memory) is refused: exit 2, naming the file and the limit.
A file changed or cut short while it is hashed is named with exit 4; Ctrl-C or SIGTERM stops hashing at
once (exit 130 or 143).
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = add_command(
        commands,
        "report",
        "write a Markdown or HTML report of runs (verdict, stack diff, tensors, plot)",
        REPORT_EPILOG,
        description="Write a report explaining a set of runs, for humans (a paper review, a CI artifact).",
    )
    report.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="run directories (the first is the reference)"
    )
    report.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML report")
    report.add_argument(
        "--markdown", type=Path, metavar="FILE", help="write a Markdown report (+ a PNG plot)"
    )
    add_output_flags(report)
    report.set_defaults(handler=report_command)

    fingerprint = add_command(
        commands,
        "fingerprint",
        "show the hardware and software stack that decides a run's numerics",
        FINGERPRINT_EPILOG,
        description="Fingerprint the stack: hardware (CPU ISA, GPUs via NVML) and software (torch, cuDNN as "
        "loaded, BLAS, threads, determinism flags), with a stack digest over the fields that change "
        "numerics.",
    )
    fingerprint.add_argument(
        "--runtime", choices=runtimes.names(), default="local", help="where to probe (default: local)"
    )
    fingerprint.add_argument(
        "--image", help="image to probe with --runtime docker (default: the reprobox image)"
    )
    add_image_flags(fingerprint)
    add_output_flags(fingerprint)
    fingerprint.set_defaults(handler=fingerprint_command)

    hasher = add_command(
        commands,
        "hash",
        "print a checkpoint's file sha256 and canonical content hash",
        HASH_EPILOG,
        description="Hash checkpoint files the way reprobox does after a run.",
    )
    hasher.add_argument("files", nargs="+", type=Path, metavar="FILE")
    add_output_flags(hasher)
    hasher.set_defaults(handler=hash_command, abandons_workers=True)


class HashStopped(ReproboxError):
    """Ctrl-C or a termination signal while files were hashed: nothing was written, nothing to record."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"hashing stopped by {name}; no hash was printed and no file was written")
        self.exit_code = 128 + signum


def _while_listening(work: Callable[[], T]) -> T:
    """``work()`` on a thread of its own while this (main) thread waits, so that Ctrl-C or SIGTERM is
    taken at once rather than after the task the hashing pool is on; the CLI then exits without
    waiting for the pool (``signals.exit_now``)."""
    done = threading.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again on the main thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="reprobox-hash", daemon=True).start()
    while not done.wait(0.5):  # a signal interrupts the wait: its handler raises here
        pass
    if failure:
        raise failure[0]
    return outcome[0]


def report_command(args: argparse.Namespace, out: Output) -> int:
    if args.html is None and args.markdown is None:
        raise UsageError("say where to write the report: --html FILE or --markdown FILE (or both)")
    from reprobox.render.document import headline
    from reprobox.render.report_files import write_report

    check_report_targets(args.html, args.markdown)  # before reading runs: a bad path costs nothing
    records = [read_record(path) for path in args.runs]
    data = write_report(records, html_path=args.html, markdown_path=args.markdown)
    written = [str(p) for p in (args.html, args.markdown) if p is not None]
    payload = {"verdict": data.comparison.verdict, "written": written, **data.comparison.to_json()}
    out.result(payload, f"{headline(data)}\nwrote {', '.join(written)}")
    return EXIT_OK


def fingerprint_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox.guest.fingerprint import format_table

    fp = runtimes.open_runtime(args.runtime, runtime_options(args)).fingerprint()
    out.result(fp, format_table(fp))
    return EXIT_OK


def hash_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox.guest.hashing import hash_checkpoint

    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        raise UsageError(f"{missing[0]}: no such file; pass checkpoint files such as out/model.pt")
    try:
        digests = _while_listening(
            lambda: [hash_checkpoint(path, relative_to=path.parent, strict=True) for path in args.files]
        )
    except KeyboardInterrupt as exc:
        raise HashStopped(getattr(exc, "signum", signal.SIGINT)) from None
    lines, files = [], {}
    for path, digest in zip(args.files, digests, strict=True):
        data = digest.to_json()
        what, covers = _covers(data)
        files[str(path)] = {**data, "covers": {"what": what, "text": covers}}
        counts = f"{_count(len(digest.tensors), 'tensor')}" + (
            f", {_count(len(digest.metadata), 'value')}" if digest.metadata else ""
        )
        apart = digest.metadata and digest.metadata_sha256 != digest.content_sha256
        lines.append(
            f"{path}\n  file     {digest.file_sha256}\n"
            f"  content  {digest.content_sha256}  ({counts})\n  covers   {covers}\n"
            + (f"  values   {digest.metadata_sha256}\n" if apart else "")
            + f"  read by  {digest.reader}"
            + (f"\n  unread   {_unread(digest)}" if digest.format != "file" else "")
            + (f"\n  note     {digest.note}" if digest.note else "")
        )
    out.result({"files": files}, "\n".join(lines))
    return EXIT_OK


def _covers(digest: dict[str, Any]) -> tuple[str, str]:
    """What a file's content digest covers (``tensors``, ``values``, ``bytes`` or ``nothing``), in a
    sentence: equal digests mean equal tensors for a checkpoint, equal values for a file of values, and
    only equal bytes for a file the readers do not take apart."""
    tensors, values = len(digest["tensors"]), len(digest["metadata"])
    if digest["format"] == "file":
        why = (
            "its content could not be read (see note)"
            if digest.get("note")
            else "not a format read as tensors or values"
        )
        return "bytes", f"the file's bytes (the digest is its sha256): {why}"
    if values and not tensors and digest["content_sha256"] == digest["metadata_sha256"]:
        return "values", f"{_count(values, 'value')}, each by its dotted name; the file holds no tensors"
    held = (
        f"{_count(tensors, 'tensor')}: each one's name, dtype, shape and bytes" if tensors else "no tensors"
    )
    apart = "; not its values, digested apart" if values else ""
    return ("tensors" if tensors else "nothing"), held + apart


def _unread(digest: CheckpointDigest) -> str:
    """The bytes no reader accounted for, which container bytes never excuse."""
    unread = digest.unaccounted
    if unread is None:
        return "not said: its reader does not say which bytes it read, so no byte difference is excused"
    if unread.none:
        return "none: every byte is content or the format's framing"
    where = ", ".join(f"{start}-{end}" for start, end in unread.ranges[:3])
    more = f" and {unread.count - 3} more ranges" if unread.count > 3 else ""
    return f"{unread.bytes:,} bytes at {where}{more}: compared by their digest, never excused"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
