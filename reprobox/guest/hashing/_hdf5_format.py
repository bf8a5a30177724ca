"""HDF5's structures as h5py and Keras write them: the superblock, object headers and their messages,
old-style groups (a B-tree of symbol table nodes over a local heap) and link messages.

Layouts follow the HDF5 file format specification (version 3.0). Every structure is read through
``Source`` (inside the file); every count is bounded by what its bytes can hold; continuation blocks and
B-tree nodes already read are not read again, so a structure that points at itself ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget
from reprobox.guest.hashing._hdf5_bytes import SIGNATURE, Cursor, Source, Unsupported, Widths

MAX_MESSAGES = 1 << 16
"""Messages in one object header, continuation blocks included (a v1 header counts them in 16 bits)."""

MAX_BTREE_DEPTH = 32
"""Levels of a B-tree (a tree of fan-out 2 this deep indexes more than the limits allow anyway)."""

MAX_LINKS = 1_000_000
"""Links in one group."""

# message types (specification IV.A.2)
NIL, DATASPACE, LINK_INFO, DATATYPE, FILL_OLD, FILL, LINK = 0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6
LAYOUT, GROUP_INFO, FILTERS, ATTRIBUTE, CONTINUATION, SYMBOL_TABLE = 0x8, 0xA, 0xB, 0xC, 0x10, 0x11
ATTRIBUTE_INFO = 0x15
IGNORED_MESSAGES = frozenset({0x7, 0x9, 0xA, 0xD, 0xE, 0xF, 0x12, 0x13, 0x14, 0x16, 0x17, 0x18})
"""Messages that say nothing about a value: times, comments, B-tree tuning, reference counts, free space
(an external data files message, 0x7, is refused where a dataset holds one)."""


@dataclass(frozen=True)
class Message:
    kind: int
    flags: int
    data: bytes
    at: int = 0  # the address of its data


@dataclass(frozen=True)
class Link:
    name: str
    address: int | None  # a hard link's object header; None for a soft link
    soft: str | None = None  # a soft link's target path


def superblock(source: Source) -> int:
    """Read the superblock (setting the source's base and widths); the root group's object header."""
    cursor = Cursor(source.read_absolute(0, min(source.size, 256)), "the superblock", Widths())
    if cursor.take(min(8, cursor.left)) != SIGNATURE:  # a file after a user block is not recognised
        raise ValueError("it has no HDF5 signature at its start")
    version = cursor.u8()
    if version in (0, 1):
        cursor.skip(4)  # free-space, root group and shared header versions, reserved
        offset, length = cursor.u8(), cursor.u8()
        cursor.skip(1)
        leaf_k, internal_k = cursor.u16(), cursor.u16()
        cursor.skip(4)  # flags
        chunk_k = cursor.u16() if version == 1 else 32
        cursor.skip(2 if version == 1 else 0)
        if not (leaf_k and internal_k and chunk_k):
            raise ValueError("its superblock declares B-tree nodes of no entries")
        widths = _widths(offset, length, leaf_k, internal_k, chunk_k)
        cursor.widths = widths
        base = cursor.address() or 0
        cursor.skip(widths.offset)  # free space
        end = cursor.address()
        cursor.skip(widths.offset)  # driver information
        cursor.length()  # the root's symbol table entry: link name offset, object header address
        root = cursor.address()
        cursor.skip(4 + 4 + 16)  # and its cache type, reserved, scratch pad
    elif version in (2, 3):
        widths = _widths(cursor.u8(), cursor.u8())
        cursor.skip(1)
        cursor.widths = widths
        base = cursor.address() or 0
        cursor.skip(widths.offset)  # superblock extension
        end = cursor.address()
        root = cursor.address()
        cursor.skip(4)  # checksum
    else:
        raise Unsupported(f"its superblock has version {version}, which is not read (0 to 3 are)")
    if base != 0:
        raise ValueError(f"its superblock declares a base address ({base}) other than its start")
    source.widths = widths
    source.frame(0, cursor.position)
    if end is not None and end > source.size:
        raise OverLimit(f"it is cut short: its superblock says it ends at byte {end} of {source.size}")
    source.end = end  # bytes after it are no structure's
    if root is None:
        raise ValueError("its superblock names no root group")
    return root


def _widths(offset: int, length: int, *k: int) -> Widths:
    if offset not in (2, 4, 8) or length not in (2, 4, 8):
        raise ValueError(f"its superblock declares addresses of {offset} and lengths of {length} bytes")
    return Widths(offset, length, *k)


def object_header(source: Source, address: int, what: str) -> list[Message]:
    """The messages of the object header at ``address``, continuation blocks followed once each."""
    head = source.cursor(address, 16, f"the object header of {what}")
    if head.data[:4] == b"OHDR":
        return _header_v2(source, address, what)
    version = head.u8()
    if version != 1:
        raise ValueError(f"the object header of {what} has version {version} (1 and 2 are read)")
    head.skip(1 + 2 + 4)  # reserved, message count, reference count
    size = head.u32()
    source.frame(address, 16)  # its prefix, padded to 8 bytes
    blocks = [(address + 16, size)]
    messages: list[Message] = []
    seen: set[int] = set()
    while blocks:
        start, length = blocks.pop(0)
        cursor = source.cursor(start, length, f"the object header of {what}")
        if cursor.left < length:
            raise OverLimit(f"the object header of {what} lies past the end of the file")
        source.frame(start, length)
        while cursor.left >= 8:
            kind, size, flags = cursor.u16(), cursor.u16(), cursor.u8()
            cursor.skip(3)
            _add(
                messages,
                Message(kind, flags, cursor.take(size), start + cursor.position),
                blocks=blocks,
                seen=seen,
                source=source,
                what=what,
            )
    return messages


def _header_v2(source: Source, address: int, what: str) -> list[Message]:
    cursor = source.cursor(address, 4 + 2 + 16 + 4 + 8, f"the object header of {what}")
    cursor.expect(b"OHDR")
    version, flags = cursor.u8(), cursor.u8()
    if version != 2:
        raise ValueError(f"the object header of {what} has version {version} (1 and 2 are read)")
    cursor.skip((16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0))
    size = cursor.uint(1 << (flags & 0x3))
    source.frame(address, cursor.position)  # its prefix, times included; the block and checksum below
    blocks = [(address + cursor.position, size)]
    messages: list[Message] = []
    seen: set[int] = set()
    first = True
    while blocks:
        start, length = blocks.pop(0)
        block = source.cursor(start, length, f"the object header of {what}")
        if block.left < length:
            raise OverLimit(f"the object header of {what} lies past the end of the file")
        source.frame(start, length + (4 if first else 0))  # the first block's checksum follows it
        if not first:
            block.expect(b"OCHK")
            block = Cursor(block.data[: max(0, length - 4)], block.what, block.widths, 4)
        first = False
        header_size = 4 + (2 if flags & 0x4 else 0)
        while block.left >= header_size:
            kind, size, message_flags = block.u8(), block.u16(), block.u8()
            block.skip(header_size - 4)
            _add(
                messages,
                Message(kind, message_flags, block.take(size), start + block.position),
                blocks=blocks,
                seen=seen,
                source=source,
                what=what,
            )
    return messages


def _add(
    messages: list[Message],
    message: Message,
    *,
    blocks: list[tuple[int, int]],
    seen: set[int],
    source: Source,
    what: str,
) -> None:
    if len(messages) % 1024 == 1023:
        check_cpu_budget(f"{len(messages) + 1} messages of the object header of {what} read")
    if len(messages) >= MAX_MESSAGES:
        raise OverLimit(f"the object header of {what} holds more than the limit of {MAX_MESSAGES} messages")
    if message.kind == CONTINUATION:
        cursor = Cursor(message.data, f"a continuation message of {what}", source.widths)
        start, length = cursor.address(), cursor.length()
        if start is None or start in seen:
            raise ValueError(f"the object header of {what} continues where it has already been read")
        seen.add(start)
        blocks.append((start, length))
        return
    if message.flags & 0x2:
        raise Unsupported(f"{what} holds a shared message (type {message.kind}), which is not read")
    messages.append(message)


# --- old-style groups: a B-tree (version 1, type 0) of symbol table nodes, names in a local heap ---------


def symbol_table_links(source: Source, message: Message, what: str) -> list[Link]:
    cursor = Cursor(message.data, f"the symbol table of {what}", source.widths)
    tree, heap = cursor.address(), cursor.address()
    if tree is None or heap is None:
        raise ValueError(f"the symbol table of {what} has no B-tree or no heap")
    names = _local_heap(source, heap, what)
    links: list[Link] = []
    for node in _btree_v1_leaves(source, tree, 0, what):
        check_cpu_budget(f"{len(links)} links of {what} read")
        links.extend(_symbol_node(source, node, names, what))
        if len(links) > MAX_LINKS:
            raise OverLimit(f"{what} holds more than the limit of {MAX_LINKS} links")
    return links


def _local_heap(source: Source, address: int, what: str) -> bytes:
    cursor = source.cursor(address, 8 + 3 * 8, f"the local heap of {what}")
    cursor.expect(b"HEAP")
    cursor.skip(4)
    size = cursor.length()
    cursor.length()  # the free list
    data = cursor.address()
    if data is None:
        raise ValueError(f"the local heap of {what} has no data segment")
    names = source.read(data, size, f"the local heap of {what}")
    source.frame(address, cursor.position)
    source.frame(data, size)
    return names


def btree_v1_node(source: Source, address: int, node_type: int, what: str) -> tuple[int, int, Cursor]:
    """A version 1 B-tree node's level and entry count, and a cursor at its first key."""
    cursor = source.cursor(address, 8 + 2 * source.widths.offset, f"a B-tree node of {what}")
    cursor.expect(b"TREE")
    kind, level, entries = cursor.u8(), cursor.u8(), cursor.u16()
    if kind != node_type:
        raise ValueError(f"a B-tree node of {what} is of type {kind}, not {node_type}")
    return level, entries, cursor


def btree_v1_children(
    source: Source, address: int, node_type: int, key_size: int, what: str
) -> Iterator[tuple[bytes, int]]:
    """Each leaf entry of a version 1 B-tree as (key bytes, child address), depth first, nodes read once."""
    seen: set[int] = set()
    pending: list[tuple[int, int | None]] = [(address, None)]
    while pending:
        node, expected_level = pending.pop()
        if node in seen:
            raise ValueError(f"a B-tree of {what} reaches one node twice")
        seen.add(node)
        check_cpu_budget(f"{len(seen)} B-tree nodes of {what} read")
        level, entries, _ = btree_v1_node(source, node, node_type, what)
        if level > MAX_BTREE_DEPTH or (expected_level is not None and level != expected_level):
            raise ValueError(f"a B-tree of {what} has a node at the wrong level ({level})")
        span = 8 + 2 * source.widths.offset + entries * (key_size + source.widths.offset) + key_size
        cursor = source.cursor(node, span, f"a B-tree node of {what}")
        if cursor.left < span:
            raise OverLimit(f"a B-tree node of {what} lies past the end of the file")
        cursor.skip(8 + 2 * source.widths.offset)
        k = source.widths.chunk_k if node_type == 1 else source.widths.group_internal_k
        source.frame(node, span + max(0, 2 * k - entries) * (key_size + source.widths.offset))  # as allocated
        children = []
        for _ in range(entries):
            key = cursor.take(key_size)
            child = cursor.address()
            if child is None:
                raise ValueError(f"a B-tree node of {what} points at no child")
            children.append((key, child))
        if level == 0:
            yield from children
        else:
            pending.extend((child, level - 1) for _, child in reversed(children))


def _btree_v1_leaves(source: Source, address: int, node_type: int, what: str) -> list[int]:
    key_size = source.widths.length
    return [child for _, child in btree_v1_children(source, address, node_type, key_size, what)]


def _symbol_node(source: Source, address: int, names: bytes, what: str) -> list[Link]:
    entry_size = source.widths.length + source.widths.offset + 24
    head = source.cursor(address, 8, f"a symbol table node of {what}")
    head.expect(b"SNOD")
    head.skip(2)
    count = head.u16()
    cursor = source.cursor(address + 8, count * entry_size, f"a symbol table node of {what}")
    source.frame(address, 8 + max(count, 2 * source.widths.group_leaf_k) * entry_size)  # as allocated
    links = []
    for _ in range(count):
        offset = cursor.length()
        target = cursor.address()
        cache = cursor.u32()
        cursor.skip(4)
        scratch = cursor.take(16)
        name = _heap_name(names, offset, what)
        if cache == 2:  # a soft link: the scratch pad holds where its target's path is in the heap
            target_at = int.from_bytes(scratch[:4], "little")
            links.append(Link(name, None, soft=_heap_name(names, target_at, what)))
        else:
            links.append(Link(name, target))
    return links


def _heap_name(names: bytes, offset: int, what: str) -> str:
    end = names.find(b"\x00", offset)
    if offset >= len(names) or end < 0:
        raise ValueError(f"a symbol table node of {what} names a link outside its heap")
    return Cursor(names[offset:end], f"a link name in {what}", Widths()).text(end - offset)


# --- new-style groups: link messages --------------------------------------------------------------


def link_message(data: bytes, widths: Widths, what: str) -> Link:
    """A link message (in an object header, or an object of a group's fractal heap)."""
    cursor = Cursor(data, f"a link of {what}", widths)
    version, flags = cursor.u8(), cursor.u8()
    if version != 1:
        raise ValueError(f"a link of {what} has version {version} (1 is read)")
    kind = cursor.u8() if flags & 0x8 else 0
    cursor.skip((8 if flags & 0x4 else 0) + (1 if flags & 0x10 else 0))
    name = cursor.text(cursor.uint(1 << (flags & 0x3)))
    if kind == 0:
        return Link(name, cursor.address())
    if kind == 1:
        return Link(name, None, soft=cursor.text(cursor.u16()))
    target = "an external file" if kind == 64 else f"a link of type {kind}"
    raise Unsupported(f"'{name}' in {what} is a link to {target}, which is not followed")
