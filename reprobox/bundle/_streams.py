"""File objects that hash what passes through them, so a bundle is digested in the same pass that
writes or unpacks it."""

from __future__ import annotations

import hashlib
import io
from typing import IO, Any


class HashingReader(io.RawIOBase):
    """Hashes what is read through it, so one pass both unpacks and digests the bundle."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self.raw.read(size)
        self.digest.update(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


class HashingWriter(io.RawIOBase):
    """Hashes and counts what is written through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.raw.write(chunk)
        self.digest.update(chunk)
        self.size += len(chunk)
        return len(chunk)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()
