"""Where a zip file's framing and its members' data lie, for the readers of zip containers (torch's zip,
NumPy's .npz, zip archives) to account for every byte (``_layout``).

Framing is each member's local header and data descriptor, the central directory, the zip64 end record
and locator, and the end record with its comment. Each member's data is a span the reader accounts for
as it read it (or leaves unaccounted). Anything else (bytes before the first member, as in a file of
several archives written one after another, where Python's ``zipfile`` reads the last; bytes between
members; bytes after the end record) is left to no one: the reader's ``Layout`` leaves it a gap.
The end record is found as ``zipfile`` finds it, so the spans are those of the archive it read.
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest.hashing._layout import Span

_LOCAL_HEADER = b"PK\x03\x04"
_DESCRIPTOR = b"PK\x07\x08"
_END = b"PK\x05\x06"
_END64_LOCATOR = b"PK\x06\x07"
_END64 = b"PK\x06\x06"
_END_SIZE, _END64_LOCATOR_SIZE, _END64_SIZE = 22, 20, 56
_MAX_COMMENT = 0xFFFF


@dataclass(frozen=True)
class ZipLayout:
    """The framing of a zip file, and each member's data span in ``infolist()`` order (None: its local
    header is not where the directory says)."""

    size: int
    framing: tuple[Span, ...]
    data: tuple[Span | None, ...]

    def member(self, index: int) -> Span | None:
        return self.data[index]


def zip_layout(path: Path, archive: zipfile.ZipFile) -> ZipLayout:
    """The framing and member spans of ``archive``, opened on ``path``."""
    with path.open("rb") as stream:
        fd = stream.fileno()
        size = os.fstat(fd).st_size
        framing: list[Span] = []
        data: list[Span | None] = []
        for info in archive.infolist():
            span = _member(fd, size, info, framing)
            data.append(span)
        framing.extend(_directory_and_end(fd, size, archive.start_dir))
    return ZipLayout(size, tuple(framing), tuple(data))


def _member(fd: int, size: int, info: zipfile.ZipInfo, framing: list[Span]) -> Span | None:
    """The member's data span; its local header and data descriptor are added to ``framing``. None, and
    nothing framing, when its header and data do not fit inside the file: a header whose name or extra
    field runs past the end is damaged, and would otherwise claim what follows it as framing."""
    start = info.header_offset
    header = os.pread(fd, 30, start) if start >= 0 else b""
    if len(header) < 30 or not header.startswith(_LOCAL_HEADER):
        return None
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    data_start = start + 30 + name_length + extra_length
    data_end = data_start + info.compress_size
    if data_end > size:
        return None
    framing.append((start, data_start))
    if info.flag_bits & 0x08:
        descriptor = _descriptor_length(os.pread(fd, 24, data_end), info)
        if descriptor:
            framing.append((data_end, data_end + descriptor))
    return data_start, data_end


def _descriptor_length(raw: bytes, info: zipfile.ZipInfo) -> int:
    """The length of the data descriptor at the start of ``raw`` that matches the member's CRC and sizes
    (with or without its signature, 32- or 64-bit sizes), or 0 when none does."""
    for signature in (4, 0):
        if signature and not raw.startswith(_DESCRIPTOR):
            continue
        body = raw[signature:]
        if len(body) >= 12 and struct.unpack("<III", body[:12]) == (
            info.CRC,
            info.compress_size,
            info.file_size,
        ):
            return signature + 12
        if len(body) >= 20 and struct.unpack("<IQQ", body[:20]) == (
            info.CRC,
            info.compress_size,
            info.file_size,
        ):
            return signature + 20
    return 0


def _directory_and_end(fd: int, size: int, directory_start: int) -> list[Span]:
    """The central directory, the zip64 records and the end record with its comment, found as
    ``zipfile._EndRecData`` finds them (the last end record within reach of the file's end)."""
    location = _end_record(fd, size)
    if location is None:
        return []
    record = os.pread(fd, _END_SIZE, location)
    comment_length = struct.unpack("<H", record[20:22])[0]
    directory_size = struct.unpack("<I", record[12:16])[0]
    spans: list[Span] = [(location, min(size, location + _END_SIZE + comment_length))]
    locator_at = location - _END64_LOCATOR_SIZE
    if locator_at >= 0 and os.pread(fd, 4, locator_at) == _END64_LOCATOR:
        spans.append((locator_at, location))
        end64_at = locator_at - _END64_SIZE
        end64 = os.pread(fd, _END64_SIZE, end64_at) if end64_at >= 0 else b""
        if end64.startswith(_END64):
            spans.append((end64_at, locator_at))
            directory_size = struct.unpack("<Q", end64[40:48])[0]
    spans.append((directory_start, directory_start + directory_size))
    return spans


def _end_record(fd: int, size: int) -> int | None:
    if size >= _END_SIZE:
        tail = os.pread(fd, _END_SIZE, size - _END_SIZE)
        if tail.startswith(_END) and tail[-2:] == b"\x00\x00":
            return size - _END_SIZE
    reach = max(size - _MAX_COMMENT - _END_SIZE, 0)
    found = os.pread(fd, size - reach, reach).rfind(_END)
    if found < 0 or reach + found + _END_SIZE > size:
        return None
    return reach + found
