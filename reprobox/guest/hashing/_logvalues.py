"""What the logging tools' readers share: a bounded read of the file, and the named values they collect.

A logged number is named ``<tag>.step_<n>`` (``loss/train.step_3``), so a verdict says which tag at which
step differs. The clock that stamps it is a field under that name whose last key is one that
``reprobox.runspecific`` calls a timestamp or a duration (``loss/train.step_3.wall_time``,
``loss.step_3.timestamp``), so it is listed as run-specific rather than counted. A tag logged twice at one
step gets ``#2``, ``#3`` ... in the order the file holds them: nothing else tells them apart, and the
names are then already unique, so the manifest's digests and the values read back at compare time agree.
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._canonical import _join, flatten

MAX_LOG_VALUES = 1_000_000
"""More values than this from one file are refused: the manifest keeps a digest for each. Half the value
limit of checkpoints (``_bounds.MAX_VALUES``), as for text files (``_textbounds.MAX_TEXT_VALUES``): each
value read from a log costs about 300 bytes on its way to its digest (its name, twice, its value, its
digest), and 2,000,000 of them take the reading process past 512 MiB."""

MAX_KEY_DEPTH = 64
"""Nested keys (W&B's ``nested_key``) deeper than this are refused: nothing logs deeper."""


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """The whole file, refused (ValueError) when it is not a regular file or holds more than ``limit``."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    if info.st_size > limit:
        raise ValueError(f"{info.st_size} bytes, more than the {limit >> 20} MiB {what} read as values")
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while we read
        raise ValueError(f"more than the {limit >> 20} MiB {what} read as values")
    return data


def sha256_hex(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


class LogValues:
    """Named values in the order a reader finds them, with unique names and a cap on their number."""

    def __init__(self, limit: int | None = None) -> None:
        self.pairs: list[tuple[str, object]] = []
        self._limit = MAX_LOG_VALUES if limit is None else limit
        self._seen: dict[str, int] = {}

    def unique(self, base: str) -> str:
        """``base`` the first time, then ``base#2``, ``base#3`` ... (a tag logged twice at one step)."""
        count = self._seen.get(base, 0) + 1
        self._seen[base] = count
        return base if count == 1 else f"{base}#{count}"

    def add(self, name: str, value: object) -> None:
        if len(self.pairs) >= self._limit:
            raise OverLimit(f"more than the limit of {self._limit} values")
        self.pairs.append((name, value))

    def add_tree(self, name: str, value: object) -> None:
        """A parsed JSON value under ``name``, named inside as JSON files' values are (``name.a.b``)."""
        arrays, values = flatten(value)
        if arrays:  # plain parsers never build arrays; a guard, not a case
            raise ValueError("holds arrays")
        for inner, leaf in values:
            self.add(_join(name, inner) if inner else name, leaf)
