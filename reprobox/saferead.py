"""Reading files that someone else may have planted: bounded, never following links, never blocking.

The controller often runs as root and reads what the job wrote in its run directory (the guest's
result, the trail, fingerprints). A job can put anything there: a symlink to /dev/zero, a FIFO no one
writes to, a device node, a directory, a file of many gigabytes. Every such read goes through here: the
file is opened without following a final symlink (and, below a trusted `root`, without following any
link on the way), without blocking on a FIFO, checked by fstat to be a regular file, and read up to a cap.
Whatever is wrong is one `UnsafeFile` naming the path and what was found there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reprobox.errors import EXIT_JOB_FAILED, ReproboxError
from reprobox.fileio import JsonTooDeep, loads_bounded

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(ReproboxError):
    """A file reprobox reads is not what it should be: not a regular file, too large, or unreadable.

    `found` names what is there instead of a regular file ("a FIFO", "a symlink"), else None.
    """

    exit_code = EXIT_JOB_FAILED

    def __init__(self, path: Path, problem: str, *, found: str | None = None) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem
        self.found = found


def kind_of(mode: int) -> str:
    """What a file is, in words: "a regular file", "a FIFO", "a directory", ..."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def open_regular(path: Path, *, root: Path | None = None) -> int:
    """An fd of `path` opened for reading, only if it is a regular file; raises UnsafeFile otherwise.

    FileNotFoundError passes through: a missing file is the caller's ordinary case. With `root`,
    `path` must lie below it and no folder between them may be a symlink either.
    """
    try:
        info = os.lstat(path)  # refuse a special file before opening it: opening a device can act
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnsafeFile(path, f"cannot be examined ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        _refuse(path, info.st_mode)
    try:
        fd = _open_below(path, root) if root is not None else os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(path, "is a symlink, not a regular file", found="a symlink") from None
        raise UnsafeFile(path, f"cannot be opened ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode  # the lstat above raced with the job: this is what was opened
        if not stat.S_ISREG(mode):
            _refuse(path, mode)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, limit: int, *, root: Path | None = None) -> bytes:
    """The whole of a regular file of at most `limit` bytes."""
    fd = open_regular(path, root=root)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise _too_large(path, size, limit)
        parts: list[bytes] = []
        total = 0
        while chunk := _read(fd, path, min(_CHUNK, limit + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while we read
                raise _too_large(path, total, limit)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_json(
    path: Path,
    limit: int,
    *,
    root: Path | None = None,
    check: Callable[[Any], str | None] | None = None,
) -> Any:
    """A JSON document of at most `limit` bytes; `check` returns what is wrong with it, or None."""
    raw = read_bytes(path, limit, root=root)
    try:
        data = loads_bounded(raw.decode("utf-8"))
    except JsonTooDeep:
        raise UnsafeFile(path, "nests JSON too deeply to be a record of reprobox's") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UnsafeFile(path, f"is not valid JSON ({exc})") from None
    problem = check(data) if check is not None else None
    if problem is not None:
        raise UnsafeFile(path, problem)
    return data


def iter_lines(
    path: Path, *, limit: int, line_limit: int, root: Path | None = None
) -> Iterator[bytes | None]:
    """The lines of a file (without their newline), streamed; None stands for a line over `line_limit`
    bytes, which is skipped without being held in memory. Reading stops with UnsafeFile at `limit`."""
    fd = open_regular(path, root=root)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise _too_large(path, size, limit)
        pending = bytearray()
        overlong = False
        total = 0
        while chunk := _read(fd, path, _CHUNK):
            total += len(chunk)
            if total > limit:
                raise _too_large(path, total, limit)
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if overlong or len(pending) + end - start > line_limit:
                    yield None
                else:
                    yield bytes(pending + chunk[start:end])
                pending.clear()
                overlong = False
                start = end + 1
            if not overlong:
                pending += chunk[start:]
                if len(pending) > line_limit:
                    pending.clear()
                    overlong = True
        if overlong:
            yield None
        elif pending:
            yield bytes(pending)
    finally:
        os.close(fd)


def read_tail(path: Path, size: int, *, root: Path | None = None) -> bytes:
    """The last `size` bytes of a regular file (a log's end), however large the file is."""
    fd = open_regular(path, root=root)
    try:
        end = os.fstat(fd).st_size
        os.lseek(fd, max(0, end - size), os.SEEK_SET)
        parts: list[bytes] = []
        total = 0
        while total < size and (chunk := _read(fd, path, min(_CHUNK, size - total))):
            parts.append(chunk)
            total += len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _open_below(path: Path, root: Path) -> int:
    """Open `path` one component at a time from `root`, refusing a symlink anywhere below `root`."""
    try:
        parts = Path(path).absolute().relative_to(Path(root).absolute()).parts
    except ValueError:
        raise UnsafeFile(path, f"is not inside {root}") from None
    if not parts or ".." in parts:
        raise UnsafeFile(path, f"is not a file inside {root}")
    folder = os.open(root, _FOLDER_FLAGS)
    try:
        for index, name in enumerate(parts[:-1]):
            try:
                inner = os.open(name, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = Path(root, *parts[: index + 1])
                    found = _kind_at(name, folder)
                    raise UnsafeFile(
                        path, f"lies below {where}, which is {found}, not a folder", found=found
                    ) from None
                raise
            os.close(folder)
            folder = inner
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=folder)
    finally:
        os.close(folder)


def _kind_at(name: str, folder: int) -> str:
    try:
        return kind_of(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return "gone"


def _read(fd: int, path: Path, size: int) -> bytes:
    try:
        return os.read(fd, size)
    except OSError as exc:
        raise UnsafeFile(path, f"cannot be read ({exc.strerror})") from None


def _refuse(path: Path, mode: int) -> None:
    found = kind_of(mode)
    raise UnsafeFile(path, f"is {found}, not a regular file", found=found)


def _too_large(path: Path, size: int, limit: int) -> UnsafeFile:
    return UnsafeFile(path, f"is {size} bytes, more than the {limit} bytes reprobox reads from it")
