"""Dense storage of links and attributes: objects in a fractal heap, found through a version 2 B-tree.

A group with more links (or an object with more attributes) than its header holds keeps them as objects
of a fractal heap, indexed by name hash in a version 2 B-tree. The B-tree's records give each object's
heap ID; the heap's doubling table of direct blocks (through indirect blocks) says where the object's
bytes are. Only what libhdf5 writes for links and attributes is read: managed and tiny objects of an
unfiltered heap; a heap with I/O filters or huge objects is refused in a sentence. Variable-length
strings are objects of a global heap collection, each collection read once.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget
from reprobox.guest.hashing._hdf5_bytes import Cursor, Source, Unsupported
from reprobox.guest.hashing._hdf5_format import MAX_BTREE_DEPTH, MAX_LINKS

_MAX_INDIRECT_DEPTH = 16
"""Indirect blocks inside indirect blocks (each level at least doubles the block size)."""


def _bytes_for(value: int) -> int:
    return max(1, (value.bit_length() + 7) // 8)


def _log2(value: int, what: str) -> int:
    if value <= 0 or value & (value - 1):
        raise ValueError(f"{what} is not a power of two")
    return value.bit_length() - 1


@dataclass
class FractalHeap:
    """Where a fractal heap's direct blocks lie: (heap offset, address, size) of each."""

    blocks: list[tuple[int, int, int]]
    offset_bytes: int  # a managed heap ID's offset field
    length_bytes: int  # and its length field
    what: str

    def object(self, source: Source, heap_id: bytes) -> bytes:
        if not heap_id:
            raise ValueError(f"{self.what} names an empty heap ID")
        kind = (heap_id[0] >> 4) & 0x3
        if heap_id[0] >> 6:
            raise ValueError(f"{self.what} holds a heap ID of version {heap_id[0] >> 6}")
        if kind == 2:  # tiny: the object is inside the ID
            size = (heap_id[0] & 0xF) + 1
            if 1 + size > len(heap_id):
                raise ValueError(f"{self.what} holds a tiny object longer than its heap ID")
            return heap_id[1 : 1 + size]
        if kind != 0:
            raise Unsupported(f"{self.what} holds a huge object, which is not read")
        cursor = Cursor(heap_id, self.what, source.widths, 1)
        offset, size = cursor.uint(self.offset_bytes), cursor.uint(self.length_bytes)
        at = bisect.bisect_right(self.blocks, (offset, 1 << 64)) - 1  # the last block starting at or before
        if at >= 0:
            start, address, block_size = self.blocks[at]
            if offset + size <= start + block_size:
                return source.read(address + offset - start, size, self.what)
        raise ValueError(f"{self.what} names an object outside its heap's blocks")


def fractal_heap(source: Source, address: int, what: str) -> FractalHeap:
    widths = source.widths
    o, n = widths.offset, widths.length
    cursor = source.cursor(address, 16 + 16 * max(o, n) + 16, what)
    cursor.expect(b"FRHP")
    cursor.skip(1)
    cursor.u16()  # heap ID length
    if cursor.u16():
        raise Unsupported(f"{what} is a fractal heap with I/O filters, which is not read")
    cursor.skip(1)
    max_managed = cursor.u32()
    cursor.length()
    if cursor.address() is not None:
        raise Unsupported(f"{what} is a fractal heap with huge objects, which is not read")
    cursor.skip(n)  # free space
    manager = cursor.address()
    cursor.skip(3 * n + 5 * n)  # managed sizes, object counts
    width = cursor.u16()
    start_size, max_direct = cursor.length(), cursor.length()
    max_heap_bits = cursor.u16()
    cursor.u16()  # starting rows of the root indirect block
    root = cursor.address()
    rows = cursor.u16()
    source.frame(address, cursor.position + 4)  # and its checksum
    if manager is not None:
        _free_space_manager(source, manager, what)
    if max_heap_bits > 64 or not width:
        raise ValueError(f"{what} declares a heap of {max_heap_bits} bits and {width} columns")
    table = _Table(
        width, start_size, _log2(start_size, what), _log2(max_direct, what), (max_heap_bits + 7) // 8
    )
    _log2(width, what)
    blocks: list[tuple[int, int, int]] = []
    if root is not None:
        if rows == 0:
            source.frame(root, start_size)
            blocks.append((0, root, start_size))
        else:
            _indirect(
                source, table, address=root, rows=rows, heap_offset=0, blocks=blocks, seen=set(), what=what
            )
    return FractalHeap(blocks, table.offset_bytes, _bytes_for(min(max_direct, max_managed)), what)


def _free_space_manager(source: Source, address: int, what: str) -> None:
    """Note a heap's free-space manager (its header, and the section list it allocates) as framing: the
    free space it lists lies in the heap's blocks, so it holds no value of its own."""
    o, n = source.widths.offset, source.widths.length
    cursor = source.cursor(address, 6 + 5 * n + 8 + o + 2 * n + 4, f"the free space of {what}")
    if cursor.left < len(cursor.data) or cursor.take(4) != b"FSHD":
        return  # not a manager this reader knows: its bytes stay unaccounted
    cursor.skip(2 + 4 * n + 8 + n)  # version, client, space and section counts, classes, sizes
    sections, _used, allocated = cursor.address(), cursor.length(), cursor.length()
    source.frame(address, len(cursor.data))
    if sections is not None and source.cursor(sections, 4, f"the free space of {what}").data == b"FSSE":
        source.frame(sections, allocated)


@dataclass(frozen=True)
class _Table:
    width: int
    start_size: int
    log2_start: int
    log2_max_direct: int
    offset_bytes: int

    def row_size(self, row: int) -> int:
        return self.start_size << max(row - 1, 0)

    @property
    def max_direct_rows(self) -> int:
        return self.log2_max_direct - self.log2_start + 2


def _indirect(
    source: Source,
    table: _Table,
    *,
    address: int,
    rows: int,
    heap_offset: int,
    blocks: list[tuple[int, int, int]],
    seen: set[int],
    what: str,
    depth: int = 0,
) -> None:
    if address in seen:
        raise ValueError(f"{what} reaches one of its indirect blocks twice")
    if depth > _MAX_INDIRECT_DEPTH:
        raise OverLimit(f"{what} nests indirect blocks deeper than the limit of {_MAX_INDIRECT_DEPTH}")
    seen.add(address)
    direct_rows = min(rows, table.max_direct_rows)
    entries = rows * table.width
    span = 4 + 1 + source.widths.offset + table.offset_bytes + entries * source.widths.offset
    cursor = source.cursor(address, span, what)
    if cursor.left < span:
        raise OverLimit(f"an indirect block of {what} lies past the end of the file")
    cursor.expect(b"FHIB")
    source.frame(address, span + 4)  # and its checksum
    cursor.skip(1 + source.widths.offset + table.offset_bytes)
    for entry in range(entries):
        check_cpu_budget(f"{len(blocks)} heap blocks of {what} read")
        row = entry // table.width
        size = table.row_size(row)
        child = cursor.address()
        if child is not None and row < direct_rows:
            source.frame(child, size)
            blocks.append((heap_offset, child, size))
        elif child is not None:
            child_rows = _log2(size, what) - _log2(table.start_size * table.width, what) + 1
            if child_rows <= 0 or child_rows >= rows:
                raise ValueError(f"{what} has an indirect block of {child_rows} rows inside one of {rows}")
            _indirect(
                source,
                table,
                address=child,
                rows=child_rows,
                heap_offset=heap_offset,
                blocks=blocks,
                seen=seen,
                what=what,
                depth=depth + 1,
            )
        heap_offset += size
        if len(blocks) > MAX_LINKS:
            raise OverLimit(f"{what} has more than the limit of {MAX_LINKS} blocks")


# --- version 2 B-trees ------------------------------------------------------------------------------


def btree_v2_records(source: Source, address: int, node_type: int, what: str) -> Iterator[bytes]:
    """Every record of a version 2 B-tree of ``node_type``, each node read once."""
    o, n = source.widths.offset, source.widths.length
    head = source.cursor(address, 4 + 2 + 4 + 2 + 2 + 2 + o + 2 + n, f"the B-tree of {what}")
    head.expect(b"BTHD")
    head.skip(1)
    if head.u8() != node_type:
        raise ValueError(f"the B-tree of {what} is not of type {node_type}")
    node_size, record_size, depth = head.u32(), head.u16(), head.u16()
    head.skip(2)
    root, root_records = head.address(), head.u16()
    source.frame(address, head.position + n + 4)  # and its record count and checksum
    if depth > MAX_BTREE_DEPTH or record_size == 0 or node_size <= 10:
        raise ValueError(f"the B-tree of {what} declares depth {depth}, records of {record_size} bytes")
    if root is None:
        return
    pointer_sizes = _pointer_sizes(node_size, record_size, depth, o)
    pending = [(root, root_records, depth)]
    seen: set[int] = set()
    count = 0
    while pending:
        node, records, level = pending.pop()
        if node in seen:
            raise ValueError(f"the B-tree of {what} reaches one node twice")
        seen.add(node)
        check_cpu_budget(f"{count} records of the B-tree of {what} read")
        count += records
        if count > MAX_LINKS:
            raise OverLimit(f"the B-tree of {what} holds more than the limit of {MAX_LINKS} records")
        cursor = source.cursor(node, node_size, f"the B-tree of {what}")
        cursor.expect(b"BTIN" if level else b"BTLF")
        source.frame(node, node_size)
        cursor.skip(2)
        yield from (cursor.take(record_size) for _ in range(records))
        if level:
            count_bytes, total_bytes = pointer_sizes[level]
            for _ in range(records + 1):
                child = cursor.address()
                child_records = cursor.uint(count_bytes)
                cursor.skip(total_bytes)
                if child is None:
                    raise ValueError(f"the B-tree of {what} points at no child")
                pending.append((child, child_records, level - 1))


def _pointer_sizes(node_size: int, record_size: int, depth: int, offset: int) -> list[tuple[int, int]]:
    """For each level, the widths of a child pointer's record count and total record count fields (as
    libhdf5 derives them from the node size: H5B2hdr.c)."""
    leaf_max = (node_size - 10) // record_size
    count_bytes = _bytes_for(leaf_max)
    sizes = [(0, 0)]
    cumulative, cumulative_bytes = leaf_max, 0
    for level in range(1, depth + 1):
        total_bytes = cumulative_bytes if level > 1 else 0
        pointer = offset + count_bytes + total_bytes
        most = (node_size - 10 - pointer) // (record_size + pointer)
        if most <= 0:
            raise ValueError("a B-tree's nodes are too small for its records")
        sizes.append((count_bytes, total_bytes))
        cumulative = (most + 1) * cumulative + most
        cumulative_bytes = _bytes_for(cumulative)
    return sizes


# --- the global heap: variable-length strings -------------------------------------------------------


MAX_GLOBAL_HEAP_BYTES = 128 << 20
"""Global heap collections read from one file in all (the variable-length strings of its values)."""


@dataclass
class GlobalHeaps:
    """The global heap collections read so far, by address, and their bytes in all."""

    collections: dict[int, dict[int, bytes]] = field(default_factory=dict)
    held: int = 0

    def object(self, source: Source, address: int, index: int) -> bytes:
        """An object of a collection (a variable-length string), each collection read once."""
        objects = self.collections.get(address)
        if objects is None:
            objects = self.collections[address] = _global_heap(source, address)
            self.held += sum(len(item) for item in objects.values())
            if self.held > MAX_GLOBAL_HEAP_BYTES:
                raise OverLimit(f"its strings fill more than the limit of {MAX_GLOBAL_HEAP_BYTES >> 20} MiB")
        if index not in objects:
            raise ValueError(f"the global heap at address {address} holds no object {index}")
        return objects[index]


def _global_heap(source: Source, address: int) -> dict[int, bytes]:
    head = source.cursor(address, 8 + source.widths.length, "a global heap")
    head.expect(b"GCOL")
    head.skip(4)
    size = head.length()
    cursor = source.cursor(address, size, "a global heap")
    source.frame(address, size)
    cursor.skip(head.position)
    objects: dict[int, bytes] = {}
    while cursor.left >= 8 + source.widths.length:
        index = cursor.u16()
        cursor.skip(6)
        length = cursor.length()
        if index == 0:
            break
        objects[index] = cursor.take(length)
        cursor.skip(min(-length % 8, cursor.left))
    return objects
