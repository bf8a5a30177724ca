"""A tensor's bytes read from its file by ``pread`` into bounded buffers, never through a memory map.

A memory-mapped file that is cut short while it is read (a job's leftover process, a shared folder)
kills the reading process with SIGBUS, which no Python code can catch. Read by ``pread``, the same cut
is a short read: the file's size and identity (device, inode, size, modification time) are taken when
its header is read and checked again before and after its bytes are, and a file that changed raises
``FileChanged``, an OSError with an errno, so hashing names the file and says the job changed it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class FileChanged(OSError):
    """The file was cut short, grown or replaced between reading its header and hashing its bytes."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ESTALE, "it changed while it was hashed (cut short, rewritten or replaced)")
        self.filename = str(path)


@dataclass(frozen=True)
class FileIdentity:
    """What a file was when its header was read."""

    device: int
    inode: int
    size: int
    modified_ns: int

    @classmethod
    def of(cls, fd: int) -> FileIdentity:
        info = os.fstat(fd)
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def pread_chunks(path: Path, identity: FileIdentity, offset: int, nbytes: int, chunk: int) -> Iterator[bytes]:
    """``nbytes`` from ``offset``, at most ``chunk`` at a time; FileChanged if the file is not ``identity``
    before, during or after."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if FileIdentity.of(fd) != identity:
            raise FileChanged(path)
        end = offset + nbytes
        while offset < end:
            piece = os.pread(fd, min(chunk, end - offset), offset)
            if not piece:
                raise FileChanged(path)
            offset += len(piece)
            yield piece
        if FileIdentity.of(fd) != identity:
            raise FileChanged(path)
    finally:
        os.close(fd)
