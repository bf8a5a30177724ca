"""The bytes of an HDF5 file as its structures are read: every address checked against the file.

An HDF5 file is a graph of structures that point at each other by address. A hostile one points past its
end, at itself, or declares a length that would have the reader allocate the machine's memory. ``Source``
reads by ``pread`` only what lies inside the file (an address past it is ``OverLimit``, naming the
structure), and ``Cursor`` decodes a structure's fields from the bytes read, refusing one cut short.
Addresses and lengths are as wide as the superblock says (2, 4 or 8 bytes); an address of all ones is
HDF5's "undefined" and reads as None. As each structure is parsed, its byte range is noted on the
``Source`` (``framing``; a dataset's raw data and attribute messages as ``content``): the file's
``Layout`` (``_layout``), whose gaps are the bytes no structure declares.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._filebytes import FileChanged

MAX_STRUCTURE_BYTES = 64 << 20
"""One metadata structure read at once (an object header's block, a heap, a B-tree node): genuine ones are
kilobytes; a heap of names or a compact dataset stays far below."""

SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path: Path) -> bool:
    """An HDF5 file, by the superblock's signature at its start (recognised here, where the signature
    lives, so that choosing a file's reader does not import the HDF5 reader)."""
    return _sniff.head(path)[: len(SIGNATURE)] == SIGNATURE


class Unsupported(ValueError):
    """A structure this reader does not read (a filter, a layout, a datatype): the file is compared as
    bytes, with the sentence naming the object and the feature."""


@dataclass(frozen=True)
class Widths:
    """The widths of addresses and lengths, and the B-tree node sizes (K), from the superblock."""

    offset: int = 8
    length: int = 8
    group_leaf_k: int = 4  # a symbol table node holds up to twice this many entries
    group_internal_k: int = 16  # a group's B-tree node, up to twice this many children
    chunk_k: int = 32  # a chunk B-tree node's


class Cursor:
    """Fields decoded in order from one structure's bytes; a field past its end is a damaged structure."""

    def __init__(self, data: bytes, what: str, widths: Widths, position: int = 0) -> None:
        self.data = data
        self.what = what
        self.widths = widths
        self.position = position

    @property
    def left(self) -> int:
        return len(self.data) - self.position

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise ValueError(f"{self.what} is cut short")
        start = self.position
        self.position += count
        return self.data[start : self.position]

    def skip(self, count: int) -> None:
        self.take(count)

    def align(self, to: int) -> None:
        """Skip to the next multiple of ``to`` bytes from the structure's start."""
        self.take(-self.position % to)

    def uint(self, width: int) -> int:
        return int.from_bytes(self.take(width), "little")

    def u8(self) -> int:
        return self.uint(1)

    def u16(self) -> int:
        return self.uint(2)

    def u32(self) -> int:
        return self.uint(4)

    def u64(self) -> int:
        return self.uint(8)

    def address(self) -> int | None:
        """An address, or None for HDF5's undefined address (all ones)."""
        raw = self.take(self.widths.offset)
        return None if raw == b"\xff" * len(raw) else int.from_bytes(raw, "little")

    def length(self) -> int:
        return self.uint(self.widths.length)

    def expect(self, signature: bytes) -> None:
        if self.take(len(signature)) != signature:
            raise ValueError(f"{self.what} has no '{signature.decode('ascii')}' signature where it should be")

    def text(self, count: int) -> str:
        """A name of ``count`` bytes (its terminating NUL and padding dropped), UTF-8 or ASCII."""
        raw = self.take(count).split(b"\x00", 1)[0]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{self.what} holds a name that is not UTF-8") from None


class Source:
    """The file's bytes by ``pread``, at addresses relative to the superblock's base, inside the file."""

    def __init__(self, path: Path, fd: int, size: int, base: int = 0, widths: Widths | None = None) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        self.base = base
        self.widths = widths or Widths()
        self.end: int | None = None  # the superblock's end-of-file address, once read
        self.framing: list[tuple[int, int]] = []  # absolute byte ranges of the structures parsed
        self.content: list[tuple[int, int]] = []  # of raw data and attribute values

    def _span(self, address: int, count: int) -> tuple[int, int]:
        """The bytes noted: only those inside the file and before the end its superblock declares."""
        limit = self.size if self.end is None else min(self.size, self.base + self.end)
        start = min(self.base + address, limit)
        return start, min(limit, start + max(0, count))

    def frame(self, address: int, count: int) -> None:
        """Note ``count`` bytes at ``address`` as a structure's."""
        self.framing.append(self._span(address, count))

    def hold(self, address: int, count: int) -> None:
        """Note ``count`` bytes at ``address`` as values read."""
        self.content.append(self._span(address, count))

    def check(self, address: int, count: int, what: str) -> int:
        """The absolute offset of ``count`` bytes at ``address``; OverLimit when they leave the file."""
        start = self.base + address
        if count < 0 or start + count > self.size:
            raise OverLimit(
                f"{what} at address {address} ({count} bytes) lies past the end of the file "
                f"({self.size} bytes)"
            )
        return start

    def read(self, address: int, count: int, what: str) -> bytes:
        start = self.check(address, count, what)
        if count > MAX_STRUCTURE_BYTES:
            raise OverLimit(f"{what} declares {count} bytes, over the limit of {MAX_STRUCTURE_BYTES} for one")
        return self.read_absolute(start, count)

    def read_absolute(self, start: int, count: int) -> bytes:
        pieces: list[bytes] = []
        done = 0
        while done < count:
            piece = os.pread(self.fd, count - done, start + done)
            if not piece:
                raise FileChanged(self.path)
            pieces.append(piece)
            done += len(piece)
        return b"".join(pieces)

    def cursor(self, address: int, count: int, what: str) -> Cursor:
        """A cursor over ``count`` bytes at ``address`` (fewer when the file ends before, for structures
        whose length is known only once read: their own fields then say whether they are cut short)."""
        count = max(0, min(count, self.size - self.base - address))
        return Cursor(self.read(address, count, what), what, self.widths)
