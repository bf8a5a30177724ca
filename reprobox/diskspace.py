"""A full disk: told apart from other write failures, said in one sentence, and met with a reserve.

ENOSPC (no block left) and EDQUOT (the user's quota used up) are the machine's state, not a bug and not
the job's fault: the run is failed for it and the user told how many bytes were free where. A job that
fills the disk to the last byte would leave reprobox no room for the records that say so; a reserve
(bytes set aside in the run dir before the job starts, given back when a record meets a full disk)
keeps that room.

A leaf on the standard library only: the guest imports it in the job's processes.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

TYPE_CHECKING = False  # typing costs more to import than this module: the guest imports it
if TYPE_CHECKING:
    from typing import IO, Any

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
GUEST_RESERVE_BYTES = 256 << 10  # guest.json: the fingerprint, environment and hashes (~5 KiB)
RUN_RESERVE_BYTES = 1 << 20  # manifest.json: the same plus the code tree's digests (~10 KiB)
RESERVE_NAME = ".reprobox-reserve"
_CHUNK = 64 << 10


def is_full(exc: BaseException | None) -> bool:
    """Whether an error is a full disk or a used-up quota."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the disk holding `path` (or its nearest existing
    parent); None when that cannot be asked."""
    for folder in (path, *path.parents):
        try:
            info = os.statvfs(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        return info.f_bavail * info.f_frsize
    return None


class DiskFullFact:
    """A full disk as met: the folder written to, the bytes then free (None: unknown), and whether it
    was the quota (EDQUOT) rather than the disk (ENOSPC); `needed`, the room a run could not set aside
    before it started."""

    def __init__(
        self, folder: Path | str, free: int | None, *, quota: bool = False, needed: int | None = None
    ) -> None:
        self.folder = str(folder)
        self.free = free
        self.quota = quota
        self.needed = needed

    @classmethod
    def met(cls, exc: OSError, folder: Path) -> DiskFullFact:
        """The fact of `exc`, with the free bytes measured now (before any reserve is given back)."""
        return cls(folder, free_bytes(folder), quota=exc.errno == errno.EDQUOT)

    def sentence(self) -> str:
        if not self.folder:  # an error that named no file
            what = "a disk quota" if self.quota else "a disk"
            state = "used up" if self.quota else "full"
            return f"{what} reprobox was writing to is {state}; free space and rerun"
        free = "an unknown number of" if self.free is None else str(self.free)
        short = (
            "" if self.needed is None else f", fewer than the {self.needed} a run sets aside for its records"
        )
        if self.quota:
            return (
                f"the disk quota for {self.folder} is used up: {free} bytes free on its disk{short}; "
                "free space and rerun"
            )
        return f"the disk holding {self.folder} is full: {free} bytes free{short}; free space and rerun"

    def at(self, folder: Path | str) -> DiskFullFact:
        """The same fact, told of another path (the host's path of a folder the guest saw elsewhere)."""
        return DiskFullFact(folder, self.free, quota=self.quota, needed=self.needed)

    def to_json(self) -> dict[str, Any]:
        return {"free": self.free, "quota": self.quota}

    @classmethod
    def from_json(cls, data: Any, folder: Path | str) -> DiskFullFact | None:
        """The fact a record holds (written by the guest, so checked), told of `folder`."""
        if not isinstance(data, dict):
            return None
        free = data.get("free")
        free = free if isinstance(free, int) and not isinstance(free, bool) and free >= 0 else None
        return cls(folder, free, quota=data.get("quota") is True)


def stop_job(exc: OSError, path: Path, handle: IO[Any] | None = None) -> BaseException:
    """What to raise in a job whose record (`path`, written by reprobox's code inside the job: the trail)
    met a full disk: a SystemExit whose one line names the disk, not a traceback from reprobox's code;
    any other error as it is. `handle`, the record's open file, is closed: what it still buffers could
    not be written at exit either."""
    if not is_full(exc):
        return exc
    if handle is not None:
        with contextlib.suppress(OSError):
            handle.close()
    fact = DiskFullFact.met(exc, path.parent)
    return SystemExit(f"reprobox: {path.name} could not be written, so the job stops here: {fact.sentence()}")


def make_reserve(path: Path, size: int) -> None:
    """Set `size` bytes aside at `path`; where that cannot be, its OSError, and nothing left.

    The bytes are random so that a compressing file system stores them in full.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        written = 0
        while written < size:
            written += os.write(fd, os.urandom(min(_CHUNK, size - written)))
    except BaseException:
        os.close(fd)
        release_reserve(path)
        raise
    os.close(fd)


def release_reserve(path: Path) -> bool:
    """Give the reserve's bytes back; whether there was one to give."""
    try:
        path.unlink()
    except OSError:  # none there (never made, or already given back), or not ours to remove
        return False
    return True
