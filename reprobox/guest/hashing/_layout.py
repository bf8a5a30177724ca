"""Which bytes of a file its reader accounted for, and what is recorded of the bytes no reader did.

A content hash covers what a reader parsed out of a file: its tensors and values. Two files whose content
hashes are equal may still differ in bytes, and a verdict excuses that as "container bytes" only when
those bytes are the format's own framing, never bytes nobody read (a second payload after a zip's end
record, an earlier archive in a file of several, data between members, trailing bytes). So each reader
states a ``Layout``: the byte ranges it parsed as content and the ranges it knows to be framing (a zip's
local headers, directory and end record, a tar's headers and padding, a safetensors or .npy header).
What neither covers is unaccounted: hashing records its ranges and one digest over those bytes
(``Unaccounted``, the checkpoint record's ``unaccounted``), and comparison excuses a byte difference
only when both files' unaccounted bytes are the same bytes (none, in a file wholly accounted for).

A reader that states no layout (``None``) cannot say which bytes it read: a byte difference in its files
is never excused.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._filebytes import FileChanged

Span = tuple[int, int]
"""A byte range of a file: ``(start, end)``, end excluded."""

MAX_LISTED_RANGES = 16
"""Unaccounted ranges listed by place in the record; the digest and the count cover all of them."""


@dataclass(frozen=True)
class Layout:
    """A file's bytes as its reader accounted for them: ranges parsed as content, ranges of framing."""

    size: int
    content: tuple[Span, ...] = ()
    framing: tuple[Span, ...] = ()

    @classmethod
    def whole(cls, size: int) -> Layout:
        """A file its reader parsed from the first byte to the last (a text parser fails on any other)."""
        return cls(size, ((0, size),))

    @classmethod
    def of(cls, size: int, content: Iterable[Span], framing: Iterable[Span] = ()) -> Layout:
        return cls(size, tuple(content), tuple(framing))

    def gaps(self) -> list[Span]:
        """The ranges neither content nor framing covers, in file order."""
        return complement(self.size, [*self.content, *self.framing])

    @property
    def whole_file(self) -> bool:
        return not self.gaps()


def complement(size: int, spans: Iterable[Span]) -> list[Span]:
    """The ranges of ``[0, size)`` that no span covers (spans may overlap, or lie partly or wholly past
    the end: a gap never does)."""
    gaps: list[Span] = []
    position = 0
    for start, end in sorted((max(0, s), min(size, e)) for s, e in spans):
        if end <= start:  # empty, or wholly outside the file (a directory that points past its end)
            continue
        if start > position:
            gaps.append((position, start))
        position = max(position, end)
    if position < size:
        gaps.append((position, size))
    return gaps


@dataclass(frozen=True)
class Unaccounted:
    """The bytes of a file no reader accounted for: how many, where (the first ``MAX_LISTED_RANGES``
    ranges), and the sha256 over each range's length (8 bytes, little-endian) then its bytes, in file
    order. Equal digests mean the same bytes in the same pieces, wherever the framing put them."""

    bytes: int
    count: int
    ranges: tuple[Span, ...]
    sha256: str

    @property
    def none(self) -> bool:
        return self.count == 0

    def to_json(self) -> dict[str, object]:
        return {
            "bytes": self.bytes,
            "count": self.count,
            "ranges": [list(span) for span in self.ranges],
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, data: object) -> Unaccounted | None:
        """The record's ``unaccounted``; None when absent or null (not accounted), ValueError if malformed."""
        if data is None:
            return None
        if not isinstance(data, Mapping):
            raise ValueError("an object or null")
        size, count, ranges, digest = (data.get(k) for k in ("bytes", "count", "ranges", "sha256"))
        if not _natural(size) or not _natural(count) or not isinstance(digest, str):
            raise ValueError("an object with integer 'bytes' and 'count' and a string 'sha256'")
        if not isinstance(ranges, list) or not all(_span(r) for r in ranges):
            raise ValueError("an object whose 'ranges' are [start, end] pairs")
        return cls(size, count, tuple((r[0], r[1]) for r in ranges), digest)  # type: ignore[arg-type]


def _natural(value: object) -> bool:
    return type(value) is int and value >= 0


def _span(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_natural(v) for v in value)


def unaccounted_of(path: Path, layout: Layout) -> Unaccounted:
    """Read and digest the file's unaccounted bytes (FileChanged if it is no longer ``layout.size`` long)."""
    gaps = layout.gaps()
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        if os.fstat(stream.fileno()).st_size != layout.size:
            raise FileChanged(path)
        for start, end in gaps:
            digest.update(struct.pack("<Q", end - start))
            for piece in _pieces(path, stream.fileno(), start, end):
                digest.update(piece)
    return Unaccounted(
        bytes=sum(end - start for start, end in gaps),
        count=len(gaps),
        ranges=tuple(gaps[:MAX_LISTED_RANGES]),
        sha256=digest.hexdigest(),
    )


def _pieces(path: Path, fd: int, start: int, end: int) -> Iterable[bytes]:
    while start < end:
        piece = os.pread(fd, min(FILE_CHUNK_BYTES, end - start), start)
        if not piece:  # cut short since it was read
            raise FileChanged(path)
        start += len(piece)
        yield piece
