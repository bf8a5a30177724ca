"""Which bytes of a zip or tar archive its reader accounted for (``_layout``): the format's framing, and
each member's bytes when the reader that read the member accounted for all of its own; of a member
stored as is (a zip's stored member, an uncompressed tar's), the content and framing its reader
accounted for, at their place in the archive (a Keras ``.keras`` zip's HDF5 weights, whose unused slack
stays unaccounted in the archive as in the file).

A zip's framing is found by ``_ziplayout``. A tar's is each member's header blocks (long names and pax
headers included), the padding of its data to the next 512-byte block, and the zero blocks that end the
archive; anything after them that is not zero (a second archive appended: ``tarfile`` stops at the
first end) is a gap. A compressed tar's offsets are those of the decompressed stream, which the file's
bytes do not show: a gzipped tar is accounted for whole when every member was and what follows the end
blocks decompresses to zeros (gzip reads to the file's end: bytes after its streams are an error, never
skipped); otherwise, and for bzip2 and xz, whose readers stop silently at bytes after their streams,
its reader cannot say where its gaps lie (no layout).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._bounds import check_archive_total
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._ziplayout import zip_layout

_BLOCK = tarfile.BLOCKSIZE


@dataclass
class TarWalk:
    """A tar's headers as they were read: where each lies and the span of each member's data, in
    order; the offset where the end blocks begin; whether anything but zeros follows them."""

    compressed: bool = False  # the offsets are the decompressed stream's, not the file's
    reads_to_end: bool = True  # the decompressor refuses bytes after its streams (it would skip them)
    framing: list[Span] = field(default_factory=list)
    data: list[Span | None] = field(default_factory=list)  # one per member the reader lists
    end: int = 0
    tail_is_zero: bool = False
    _stream: _LastRead = field(init=False, repr=False)

    def add(self, info: tarfile.TarInfo, listed: bool) -> None:
        """A header read; ``listed`` when the reader lists it as a member (not a directory)."""
        framing_end = info.offset_data
        data: Span | None = None
        if info.isreg() and not info.issparse():
            data = (info.offset_data, info.offset_data + info.size)
            framing_end = data[1] + (-info.size) % _BLOCK  # its padding to the next block
            self.framing.append((data[1], framing_end))
        self.framing.append((info.offset, info.offset_data))
        if listed:
            self.data.append(data)

    def watch(self, archive: tarfile.TarFile) -> None:
        """Remember what ``archive`` reads last: the block at its end, read as the headers are."""
        assert archive.fileobj is not None  # an archive opened for reading has one
        self.compressed = not isinstance(archive.fileobj, io.BufferedReader)  # a gzip, bzip2 or xz stream
        # gzip refuses anything but zeros after its streams; bzip2 and xz readers stop there silently
        self.reads_to_end = not self.compressed or isinstance(archive.fileobj, gzip.GzipFile)
        self._stream = _LastRead(archive.fileobj)
        archive.fileobj = self._stream

    def finish(self, archive: tarfile.TarFile, path: Path, members_total: int) -> None:
        """Where the end blocks begin, and whether only zeros follow: the block the archive stopped at
        (``tarfile`` stops at one of zeros, and at one it cannot read as a header) and every byte after
        it to the end of the stream (decompressed within the archive's expansion limit)."""
        self.end = archive.offset
        stream = self._stream
        stopped_at = stream.tell() - len(stream.last)
        self.tail_is_zero = stopped_at == self.end and not stream.last.strip(b"\0")
        total = members_total
        while self.tail_is_zero and (chunk := stream.read(FILE_CHUNK_BYTES)):
            total += len(chunk)
            if self.compressed:
                check_archive_total(total, path.stat().st_size)
            self.tail_is_zero = not chunk.strip(b"\0")


class _LastRead:
    """A stream that keeps the bytes of its last read."""

    def __init__(self, stream: Any) -> None:  # tarfile's file object: a file, or a decompressing one
        self.stream = stream
        self.last = b""

    def read(self, size: int = -1) -> bytes:
        self.last = self.stream.read(size)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def archive_layout(path: Path, kind: str, walk: TarWalk, accounted: list[Layout | None]) -> Layout | None:
    """The layout of a ``kind`` ("zip", "tar" or "compressed") archive whose listed members' bytes were
    ``accounted`` for as each layout says by what read them (None: it could not say); a tar's headers
    and end as ``walk`` noted them."""
    if kind == "zip":
        return zip_archive_layout(path, accounted)
    if kind == "compressed":
        return compressed_layout(path, accounted)
    return tar_layout(walk, path.stat().st_size, accounted)


def _whole(member: Layout | None) -> bool:
    return member is not None and member.whole_file


def _within(span: Span | None, member: Layout | None, stored: bool) -> list[Span]:
    """The archive's bytes that a member's reader accounted for: all of its data when it accounted for
    every byte; when the member is stored as is, its own content and framing at their place in the
    archive; otherwise none."""
    if span is None or member is None:
        return []
    if member.whole_file:
        return [span]
    start, end = span
    if not stored or member.size != end - start:
        return []
    return [(start + first, start + last) for first, last in (*member.content, *member.framing)]


def compressed_layout(path: Path, accounted: list[Layout | None]) -> Layout | None:
    """A gzip file is accounted for whole when what it holds was: gzip reads to the file's end (headers
    and trailers are framing, zeros after the last member its padding, anything else refused). bzip2 and
    xz readers stop silently at bytes after their streams, so theirs cannot be told (no layout)."""
    with path.open("rb") as file:
        gzip_magic = file.read(2) == b"\x1f\x8b"
    return Layout.whole(path.stat().st_size) if gzip_magic and all(map(_whole, accounted)) else None


def tar_layout(walk: TarWalk, size: int, accounted: list[Layout | None]) -> Layout | None:
    """The tar's layout, given which listed members' bytes their readers accounted for."""
    pairs = list(zip(walk.data, accounted, strict=True))
    content = [inner for span, member in pairs for inner in _within(span, member, not walk.compressed)]
    every_member = all(_whole(member) for span, member in pairs if span is not None)
    if walk.compressed:
        whole = every_member and walk.tail_is_zero and walk.reads_to_end
        return Layout.whole(size) if whole else None
    framing = [*walk.framing, (walk.end, size)] if walk.tail_is_zero else walk.framing
    return Layout.of(size, content, framing)


def zip_archive_layout(path: Path, accounted: list[Layout | None]) -> Layout:
    """A zip archive's layout, given what its readers accounted for of the listed members (the files,
    in directory order); a directory entry's data, which it should not have, is a gap."""
    with zipfile.ZipFile(path) as archive:
        zipped = zip_layout(path, archive)
        infos = archive.infolist()
        files = [
            (span, _stored(info)) for info, span in zip(infos, zipped.data, strict=True) if not info.is_dir()
        ]
    pairs = zip(files, accounted, strict=True)
    content = [inner for (span, stored), member in pairs for inner in _within(span, member, stored)]
    return Layout.of(zipped.size, content, zipped.framing)


def _stored(info: zipfile.ZipInfo) -> bool:
    """A member whose data is its bytes as they are (not compressed, not encrypted)."""
    return info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1
