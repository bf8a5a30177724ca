"""The fixed array chunk index that h5py writes with ``libver='latest'`` for a chunked dataset of fixed
shape (HDF5 file format specification, VII.B): a header, a data block listing every chunk's address (and
stored size, when filtered) in row-major order, and past ``2**page_bits`` entries the list in pages after
the block, each noted as framing (``_layout``) as it is parsed.
"""

from __future__ import annotations

from reprobox.guest.hashing._bounds import OverLimit, element_count
from reprobox.guest.hashing._hdf5_bytes import Cursor, Source
from reprobox.guest.hashing._hdf5_types import Chunk, Layout


def fixed_array_chunks(
    source: Source, layout: Layout, element_bytes: int, grid: list[int], what: str
) -> list[Chunk]:
    """The chunks of a fixed array index (``libver='latest'``): one entry per chunk in row-major order,
    in the data block, or, past ``2**page_bits`` entries, in pages after it, each with its checksum, a
    page listed in the block's bitmap (most significant bit first) only once written."""
    import numpy as np

    widths = source.widths
    assert layout.address is not None
    head = source.cursor(layout.address, 8 + widths.length + widths.offset, f"the chunk index of {what}")
    head.expect(b"FAHD")
    head.skip(1)
    filtered, entry_size, page_bits = head.u8(), head.u8(), head.u8()
    count, block = head.length(), head.address()
    source.frame(layout.address, head.position + 4)  # and its checksum
    places = np.ndindex(*grid) if all(grid) else iter(())
    if (
        count != element_count(tuple(grid))
        or page_bits > 32
        or entry_size < widths.offset + (5 if filtered else 0)
    ):
        raise ValueError(f"the chunk index of {what} lists {count} chunks for {element_count(tuple(grid))}")
    if block is None:
        return []
    page = 1 << page_bits
    pages = -(-count // page) if count > page else 0
    prefix = 4 + 2 + widths.offset + (-(-pages // 8))
    block_size = prefix + (0 if pages else count * entry_size) + 4
    cursor = source.cursor(block, block_size, f"the chunk index of {what}")
    cursor.expect(b"FADB")
    last = min(page, count - (pages - 1) * page) if pages else 0  # entries of the last page
    source.frame(
        block,
        block_size + max(0, pages - 1) * (page * entry_size + 4) + (last * entry_size + 4 if pages else 0),
    )  # its pages too, written or not
    cursor.skip(2 + widths.offset)
    bitmap = cursor.take(prefix - cursor.position)
    entries = cursor if not pages else None
    chunks = []
    for number, place in enumerate(places):
        if pages and number % page == 0:
            entries = _page(
                source,
                bitmap,
                first=block + block_size,
                number=number // page,
                sizes=(page, count, entry_size),
                what=what,
            )
        if entries is None:  # a page not yet written
            continue
        entry = Cursor(entries.take(entry_size), f"the chunk index of {what}", widths)
        address = entry.address()
        size = entry.uint(entry_size - widths.offset - 4) if filtered else 0
        mask = entry.u32() if filtered else 0
        if address is not None:
            offset = tuple(int(i) * c for i, c in zip(place, layout.chunk, strict=True))
            chunk_bytes = element_count(layout.chunk) * element_bytes
            chunks.append(Chunk(offset, address, size if filtered else chunk_bytes, mask))
    return chunks


def _page(
    source: Source, bitmap: bytes, *, first: int, number: int, sizes: tuple[int, int, int], what: str
) -> Cursor | None:
    """A cursor over page ``number``'s entries (pages lie one after another from ``first``, each of
    ``page`` entries and a checksum), or None when the bitmap says it was never written."""
    page, count, entry_size = sizes  # entries a page, in all, and bytes an entry
    if not bitmap[number // 8] & (0x80 >> (number % 8)):
        return None
    at = first + number * (page * entry_size + 4)
    held = min(page, count - number * page) * entry_size
    cursor = source.cursor(at, held + 4, f"the chunk index of {what}")
    if cursor.left < held + 4:
        raise OverLimit(f"a page of the chunk index of {what} lies past the end of the file")
    return cursor
