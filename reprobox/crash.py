"""An internal error (a bug) leaves its full traceback in a file and the user one line pointing at it.

The file goes to the user's cache dir ($XDG_CACHE_HOME or ~/.cache, then reprobox/), or to the
temporary dir when that is not writable; a crash must never crash while reporting itself.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import traceback
from datetime import datetime, timezone
from pathlib import Path

from reprobox._version import __version__
from reprobox.fileio import write_text_atomic


def crash_dirs() -> list[Path]:
    """Where a crash report may go, best first."""
    dirs = []
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache:
        dirs.append(Path(cache) / "reprobox")
    home = os.environ.get("HOME")
    if home:
        dirs.append(Path(home) / ".cache" / "reprobox")
    dirs.append(Path(tempfile.gettempdir()))
    return dirs


def save_crash(exc: BaseException, argv: list[str] | None = None) -> Path | None:
    """Write the traceback with the version and arguments; the path written, or None when none could be."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    text = (
        f"reprobox {__version__} internal error at {stamp}Z\n"
        f"python {sys.version.split()[0]} on {sys.platform}\n"
        f"arguments: {argv if argv is not None else sys.argv[1:]!r}\n\n"
        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    for folder in crash_dirs():
        path = folder / f"crash-{stamp}-{secrets.token_hex(4)}.txt"
        try:
            write_text_atomic(path, text)
            return path
        except OSError:
            continue
    return None


def summary(exc: BaseException) -> str:
    """The exception as one short line, whatever its message holds."""
    message = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
