"""TensorStore's OCDBT format decoded from bytes: the manifest, version tree nodes and B+tree nodes.

Each is an encoded unit (TensorStore's format documentation, ``kvstore/ocdbt/index.rst``): a header
(magic ``uint32be``, the unit's whole length ``uint64le``, a format version and a compression method,
both varints), a body (raw, or one zstd frame), and a CRC-32C (``uint32le``) of everything before it.
Bodies are columns of varints: a data file table (paths prefix-compressed against the previous one, each
split into a base path that its children inherit and a relative path), then the entries, column by column.
A reference to another unit or to a value is a data file (an index into the table), an offset and a
length: a pointer, like a zip's offsets, never a value itself.

Every count, length and index is checked against what the bytes hold and the limits here before it is
used; anything else is ValueError (OverLimit for a limit) in one sentence.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._crc32c import crc32c

MANIFEST_MAGIC = 0x0CDB3A2A
VERSION_NODE_MAGIC = 0x0CDB1234
BTREE_NODE_MAGIC = 0x0CDB20DE
MAX_KEY_BYTES = 65535  # TensorStore's own limits on a key and a data file's path
MAX_PATH_BYTES = 65535
MAX_NODE_ENTRIES = 1 << 20  # a B+tree node's arity, as TensorStore caps it
MAX_DECODED_BYTES = 128 << 20
"""What one manifest or node may decompress to (TensorStore's ``max_decoded_node_bytes`` caps nodes
further where a database sets it lower)."""
MISSING = (1 << 64) - 1  # a version with no root (an empty database) points at offset and length 2**64-1

_HEADER = struct.Struct("<Q")


class Cursor:
    """Bytes read front to back; each read names its field when the bytes end first."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, count: int, field: str) -> bytes:
        if count > len(self.data) - self.pos:
            raise ValueError(f"{self.what} ends inside its {field}")
        self.pos += count
        return self.data[self.pos - count : self.pos]

    def byte(self, field: str) -> int:
        return self.take(1, field)[0]

    def varint(self, field: str, limit: int = MISSING) -> int:
        value, shift = 0, 0
        while True:
            part = self.byte(field)
            value |= (part & 0x7F) << shift
            if not part & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError(f"{self.what} has a {field} longer than a 64-bit varint")
        if value > limit:
            raise OverLimit(f"{self.what} has a {field} of {value}, over the limit of {limit}")
        return value

    def u64(self, field: str) -> int:
        return int(_HEADER.unpack(self.take(8, field))[0])

    def column(self, count: int, field: str, limit: int = MISSING) -> list[int]:
        return [self.varint(field, limit) for _ in range(count)]

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{self.what} holds {len(self.data) - self.pos} bytes after its last field")


def unwrap(data: bytes, magic: int, what: str, max_decoded: int) -> bytes:
    """The body of one encoded unit, its header, length and CRC-32C checked and its zstd frame undone."""
    if len(data) < 16:
        raise ValueError(f"{what} is {len(data)} bytes, shorter than its header and checksum")
    if int.from_bytes(data[:4], "big") != magic:
        raise ValueError(f"{what} does not start with the magic number {magic:08x}")
    if _HEADER.unpack_from(data, 4)[0] != len(data):
        raise ValueError(f"{what}'s header gives another length than its {len(data)} bytes")
    if crc32c(data[:-4]) != int.from_bytes(data[-4:], "little"):
        raise ValueError(f"{what} fails its CRC-32C checksum")
    cursor = Cursor(data[:-4], what)
    cursor.pos = 12
    if cursor.varint("format version") != 0:
        raise ValueError(f"{what} has a format version other than 0, which reprobox does not read")
    method = cursor.varint("compression method")
    body = data[cursor.pos : -4]
    if method == 0:
        return body
    if method != 1:
        raise ValueError(f"{what} has compression method {method}, neither none (0) nor zstd (1)")
    from reprobox.guest.hashing._zstd import decompress

    return decompress(body, max_output=max_decoded)


@dataclass(frozen=True)
class Ref:
    """Where a unit or a value lies: a data file's path inside the database (``d/<id>``), the path its
    children's tables are relative to, an offset and a length."""

    path: str
    base: str
    offset: int
    length: int


def file_table(cursor: Cursor, transitive: str) -> list[tuple[str, str]]:
    """The data file table: for each file its full path and the transitive path its units pass on."""
    count = cursor.varint("data file count", MAX_NODE_ENTRIES)
    prefixes = [0, *cursor.column(count - 1, "path prefix length", MAX_PATH_BYTES)] if count else []
    suffixes = cursor.column(count, "path suffix length", MAX_PATH_BYTES)
    bases = cursor.column(count, "base path length", MAX_PATH_BYTES)
    files, previous = [], b""
    for prefix, suffix, base in zip(prefixes, suffixes, bases, strict=True):
        if prefix > len(previous):
            raise ValueError(f"{cursor.what} has a data file path sharing more than the previous path")
        path = previous[:prefix] + cursor.take(suffix, "data file path")
        if base > len(path) or len(transitive) + len(path) > MAX_PATH_BYTES:
            raise ValueError(f"{cursor.what} has a data file path of inconsistent lengths")
        try:
            text = path.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{cursor.what} names a data file by a path that is not UTF-8") from None
        files.append((transitive + text, transitive + path[:base].decode("utf-8", "replace")))
        previous = path
    return files


def refs(cursor: Cursor, table: list[tuple[str, str]], count: int, missing: bool = False) -> list[Ref | None]:
    """``count`` references, column by column: data file indexes, offsets, lengths (None: no root)."""
    ids = cursor.column(count, "data file id")
    offsets = cursor.column(count, "data file offset")
    lengths = cursor.column(count, "data file length")
    found: list[Ref | None] = []
    for index, offset, length in zip(ids, offsets, lengths, strict=True):
        if missing and offset == MISSING and length == MISSING:
            found.append(None)
            continue
        if index >= len(table):
            raise ValueError(f"{cursor.what} points at data file {index} of a table of {len(table)}")
        if offset + length > MISSING:
            raise ValueError(f"{cursor.what} points at bytes past 2**64")
        found.append(Ref(table[index][0], table[index][1], offset, length))
    return found


@dataclass(frozen=True)
class Version:
    """One generation of the database: its B+tree root (None when empty), the root's height and the
    commit time TensorStore stamped it with."""

    generation: int
    height: int
    root: Ref | None
    commit_time: int


@dataclass(frozen=True)
class VersionNode:
    """A reference to a version tree node holding older generations."""

    height: int
    ref: Ref


def versions(cursor: Cursor, table: list[tuple[str, str]]) -> list[Version]:
    """A version tree leaf's entries (or a manifest's inline versions)."""
    count = cursor.varint("version count", MAX_NODE_ENTRIES)
    generations = cursor.column(count, "generation number")
    heights = [cursor.byte("root height") for _ in range(count)]
    roots = refs(cursor, table, count, missing=True)
    for _ in range(3):  # each root's statistics: keys, tree bytes, indirect value bytes
        cursor.column(count, "root statistic")
    times = [cursor.u64("commit time") for _ in range(count)]
    if any(b <= a for a, b in itertools.pairwise(generations)) or 0 in generations:
        raise ValueError(f"{cursor.what} lists generation numbers that do not increase from 1")
    return [Version(*entry) for entry in zip(generations, heights, roots, times, strict=True)]


def version_nodes(cursor: Cursor, table: list[tuple[str, str]], height: int | None) -> list[VersionNode]:
    """An interior version tree node's children (``height`` its own), or a manifest's version nodes
    (``height`` None: each entry then carries its child's height)."""
    count = cursor.varint("version node count", 1 << 16)
    cursor.column(count, "generation number")
    found = refs(cursor, table, count)
    cursor.column(count, "generation count")
    for _ in range(count):
        cursor.u64("commit time")
    if height is None:
        heights = [cursor.byte("version node height") for _ in range(count)]
    else:
        heights = [height - 1] * count
    return [VersionNode(h, ref) for h, ref in zip(heights, found, strict=True) if ref is not None]


@dataclass(frozen=True)
class Config:
    """The manifest's configuration: the database's uuid (its own random name), whether the manifest is
    one file, and the bounds its writer kept."""

    uuid: bytes
    single: bool
    max_decoded_node_bytes: int
    arity_log2: int


def config(cursor: Cursor) -> Config:
    uuid = cursor.take(16, "uuid")
    kind = cursor.byte("manifest kind")
    cursor.varint("max inline value bytes")
    max_decoded = cursor.varint("max decoded node bytes")
    arity = cursor.byte("version tree arity")
    if not 1 <= arity <= 16 or kind > 1:
        raise ValueError(f"{cursor.what} has a version tree arity or manifest kind TensorStore never writes")
    method = cursor.varint("compression method")
    if method == 1:
        cursor.take(4, "zstd level")
    elif method != 0:
        raise ValueError(f"{cursor.what} configures compression method {method}, neither none nor zstd")
    return Config(uuid, kind == 0, max_decoded, arity)


def keys(cursor: Cursor, count: int, interior: bool) -> tuple[list[bytes], list[int]]:
    """A B+tree node's keys (relative to the prefix its path from the root gives), and for an interior
    node each child's subtree prefix length."""
    prefixes = [0, *cursor.column(count - 1, "key prefix length", MAX_KEY_BYTES)]
    suffixes = cursor.column(count, "key suffix length", MAX_KEY_BYTES)
    subtree = cursor.column(count, "subtree prefix length", MAX_KEY_BYTES) if interior else []
    found: list[bytes] = []
    for prefix, suffix in zip(prefixes, suffixes, strict=True):
        previous = found[-1] if found else b""
        if prefix > len(previous) or prefix + suffix > MAX_KEY_BYTES:
            raise ValueError(f"{cursor.what} has a key of inconsistent lengths")
        key = previous[:prefix] + cursor.take(suffix, "key")
        if found and key <= previous:
            raise ValueError(f"{cursor.what} lists its keys out of order")
        found.append(key)
    if any(length > len(key) for length, key in zip(subtree, found, strict=False)):
        raise ValueError(f"{cursor.what} has a subtree prefix longer than its key")
    return found, subtree


@dataclass(frozen=True)
class Node:
    """A decoded B+tree node: its height and keys; an interior node's children (each with the length
    of its key that prefixes its whole subtree), a leaf's values (inline bytes, or where they lie)."""

    height: int
    keys: list[bytes]
    children: list[tuple[int, Ref]]
    values: list[bytes | Ref]


def btree_node(data: bytes, what: str, transitive: str, max_decoded: int) -> Node:
    cursor = Cursor(unwrap(data, BTREE_NODE_MAGIC, what, max_decoded), what)
    height = cursor.byte("height")
    table = file_table(cursor, transitive)
    count = cursor.varint("entry count", MAX_NODE_ENTRIES)
    if not count:
        raise ValueError(f"{what} is a B+tree node without entries")
    found, subtree = keys(cursor, count, height > 0)
    if height:
        children = refs(cursor, table, count)
        for _ in range(3):  # statistics: keys, tree bytes, indirect value bytes
            cursor.column(count, "subtree statistic")
        cursor.finish()
        return Node(height, found, [(n, ref) for n, ref in zip(subtree, children, strict=True) if ref], [])
    lengths = cursor.column(count, "value length")
    kinds = [cursor.byte("value kind") for _ in range(count)]
    if any(kind > 1 for kind in kinds):
        raise ValueError(f"{what} has a value kind other than inline (0) or out of line (1)")
    indirect = [i for i, kind in enumerate(kinds) if kind]
    ids = cursor.column(len(indirect), "data file id")
    offsets = cursor.column(len(indirect), "data file offset")
    values: list[bytes | Ref] = [b""] * count
    for i, index, offset in zip(indirect, ids, offsets, strict=True):
        if index >= len(table) or offset + lengths[i] > MISSING:
            raise ValueError(f"{what} points a value at a data file or offset that does not exist")
        values[i] = Ref(table[index][0], table[index][1], offset, lengths[i])
    for i, kind in enumerate(kinds):
        if not kind:
            values[i] = cursor.take(lengths[i], "inline value")
    cursor.finish()
    return Node(height, found, [], values)


def manifest(data: bytes, what: str) -> tuple[Config, list[Version], list[VersionNode]]:
    """A single-file manifest's configuration, inline versions and version tree nodes."""
    cursor = Cursor(unwrap(data, MANIFEST_MAGIC, what, MAX_DECODED_BYTES), what)
    found = config(cursor)
    if not found.single:
        raise ValueError(
            f"{what} is a configuration-only manifest (numbered manifests), which reprobox does not read"
        )
    table = file_table(cursor, "")
    inline = versions(cursor, table)
    if not inline:
        raise ValueError(f"{what} lists no version")
    nodes = version_nodes(cursor, table, None)
    cursor.finish()
    return found, inline, nodes


def version_node(
    data: bytes, what: str, transitive: str, max_decoded: int
) -> tuple[int, list[Version], list[VersionNode]]:
    """A version tree node: its height, and its versions (a leaf) or its children (interior)."""
    cursor = Cursor(unwrap(data, VERSION_NODE_MAGIC, what, max_decoded), what)
    cursor.byte("version tree arity")
    height = cursor.byte("height")
    table = file_table(cursor, transitive)
    if not height:
        found = versions(cursor, table)
        cursor.finish()
        return 0, found, []
    children = version_nodes(cursor, table, height)
    cursor.finish()
    return height, [], children
