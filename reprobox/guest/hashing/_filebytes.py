"""A tensor's bytes read from its file by ``pread``, never through a memory map: streamed in bounded
chunks, or, for a strided view that needs them together, the span its elements cover (``FileSpan``).

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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class FileChanged(OSError):
    """The file was cut short, grown or replaced between reading its header and reading its bytes (to hash
    or to compare them)."""

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


@contextmanager
def _opened(path: Path, identity: FileIdentity) -> Iterator[int]:
    """A descriptor of ``path``, checked to be ``identity`` when opened and again when done with."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if FileIdentity.of(fd) != identity:
            raise FileChanged(path)
        yield fd
        if FileIdentity.of(fd) != identity:
            raise FileChanged(path)
    finally:
        os.close(fd)


def pread_chunks(path: Path, identity: FileIdentity, offset: int, nbytes: int, chunk: int) -> Iterator[bytes]:
    """``nbytes`` from ``offset``, at most ``chunk`` at a time; FileChanged if the file is not ``identity``
    before, during or after."""
    with _opened(path, identity) as fd:
        end = offset + nbytes
        while offset < end:
            piece = os.pread(fd, min(chunk, end - offset), offset)
            if not piece:
                raise FileChanged(path)
            offset += len(piece)
            yield piece


def check_unchanged(path: Path, identity: FileIdentity) -> None:
    """FileChanged unless the file at ``path`` is still ``identity``, so bytes read before stand for it."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise FileChanged(path) from None
    if FileIdentity(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != identity:
        raise FileChanged(path)


def pread_into(path: Path, identity: FileIdentity, offset: int, buffer: memoryview) -> None:
    """Fill ``buffer`` with the bytes from ``offset``; FileChanged if the file is not ``identity``."""
    with _opened(path, identity) as fd:
        done = 0
        while done < len(buffer):
            count = os.preadv(fd, [buffer[done:]], offset + done)
            if not count:
                raise FileChanged(path)
            done += count


@dataclass(frozen=True)
class FileSpan:
    """Bytes of a file at a known place, read by ``pread`` only when they are asked for."""

    path: Path
    identity: FileIdentity  # what the file was when it was opened
    offset: int
    nbytes: int

    def part(self, start: int, nbytes: int) -> FileSpan:
        """``nbytes`` from ``start`` within this span (the caller has checked they lie inside it)."""
        return FileSpan(self.path, self.identity, self.offset + start, nbytes)

    def chunks(self, chunk: int) -> Iterator[bytes]:
        """The bytes streamed, at most ``chunk`` at a time; FileChanged if the file changed."""
        return pread_chunks(self.path, self.identity, self.offset, self.nbytes, chunk)

    def read(self) -> np.ndarray[Any, Any]:
        """The bytes held in memory as a writable uint8 array; FileChanged if the file changed."""
        import numpy as np

        buffer = np.empty(self.nbytes, dtype=np.uint8)
        pread_into(self.path, self.identity, self.offset, memoryview(buffer.data))
        return buffer
