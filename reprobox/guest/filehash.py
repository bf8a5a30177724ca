"""A file's sha256, streamed: the one hash every record uses for whole files.

Its own module so the controller can hash job files, code and data without importing the checkpoint
readers (``reprobox.guest.hashing`` and its pickle reader) on every command's start-up path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

FILE_CHUNK_BYTES = 1 << 20
"""Files are streamed through sha256 in pieces of this size, never read whole."""


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, streamed through one reused buffer."""
    digest = hashlib.sha256()
    buffer = bytearray(FILE_CHUNK_BYTES)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as f:
        while count := f.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()
