"""Where a command writes, checked before it does any work: exit 2 naming the path and why, not an
internal error after an hour of runs.

Every flag that names a file or folder to write (``--html``, ``--markdown``, ``--attestation``, ``-o``,
``--job-file``, ``--runs-dir``, ``--report-dir``, ``--wheelhouse``) goes through here. A target is refused
when it is a directory (for a file) or a file (for a folder), a FIFO, device or socket (a write would
block, or replace a device node), under ``/proc`` or ``/sys`` (kernel file systems, where creating a
file fails however permissive the folder looks to root), or when its folder is missing (unless the
command makes it), read-only or not writable to this user.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reprobox.errors import UsageError
from reprobox.saferead import kind_of

KERNEL_FOLDERS = (Path("/proc"), Path("/sys"))


def check_output_file(path: Path, flag: str, *, make_folders: bool = False, example: str = "") -> None:
    """Refuse a file a command would write when it cannot be written; ``make_folders``: the command
    creates missing folders, so only the nearest existing one must be writable."""
    fix = f"pass a file in a folder you can write, e.g. {flag} {example or './report.out'}"
    problem = _kernel(path)
    if problem is None:
        try:
            mode = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            mode = stat.S_IFREG  # a new file (its folders are judged below)
        except OSError as exc:
            problem = f"cannot be examined ({exc.strerror})"
        else:
            if stat.S_ISDIR(mode):
                problem = "is a directory"
            elif not stat.S_ISREG(mode):
                problem = f"is {kind_of(mode)}, not a file"
    if problem is not None:
        raise UsageError(f"{flag} {path} {problem}; {fix}")
    folder = _absolute(path).parent
    existing = _nearest(folder)
    if existing != folder and not make_folders:
        raise UsageError(f"{flag} {path}: folder {folder} does not exist; create it or {fix}")
    problem = _folder_problem(existing)
    if problem is not None:
        raise UsageError(f"{flag} {path}: {problem}; {fix}")


def check_output_folder(folder: Path, flag: str, fix: str) -> None:
    """Refuse a folder a command would create or write in: the folder, or the nearest part of it that
    exists, must be a writable directory (missing parts are made)."""
    problem = _kernel(folder)
    if problem is not None:
        raise UsageError(f"{flag} {folder} {problem}; {fix}")
    existing = _nearest(_absolute(folder))
    if not existing.is_dir():
        where = "" if existing == _absolute(folder) else f"is under {existing}, which "
        raise UsageError(f"{flag} {folder} {where}is {_kind(existing)}, not a folder; {fix}")
    problem = _folder_problem(existing)
    if problem is not None:
        raise UsageError(f"{flag} {folder}: {problem}; {fix}")


def _nearest(folder: Path) -> Path:
    """The folder itself, or its nearest ancestor that exists."""
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    return existing


def _absolute(path: Path) -> Path:
    """The path made absolute and normalised (``..`` folded), links left as they are."""
    return Path(os.path.normpath(path.absolute()))


def _kind(path: Path) -> str:
    try:
        return kind_of(path.stat().st_mode)
    except OSError:
        return "a broken link"


def _kernel(path: Path) -> str | None:
    """Whether the path lies in /proc or /sys (through links too): nothing there is a file reprobox writes."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of links: judged as written
        resolved = _absolute(path)
    for where in (_absolute(path), resolved):
        for root in KERNEL_FOLDERS:
            if where.is_relative_to(root):
                return f"is under {root}, a kernel file system where no file can be written"
    return None


def _folder_problem(existing: Path) -> str | None:
    """What keeps a file from being made in ``existing`` (the nearest existing folder), or None."""
    if not existing.is_dir():
        return f"{existing} is {_kind(existing)}, not a folder"
    problem = _kernel(existing)
    if problem is not None:
        return f"folder {existing} {problem}"
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return f"folder {existing} is on a read-only file system"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"folder {existing} is not writable"
    return None
