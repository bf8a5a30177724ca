"""A dataset's elements, and an attribute's value, read from an HDF5 file as they are stored.

Contiguous data is one run of the file, compact data sits in the object header, chunked data is found
through a version 1 B-tree (or, in files written with ``libver='latest'``, a single chunk or an implicit
index). A chunk the index does not list holds the fill value. Chunks pass back through the deflate and
shuffle filters, each decompressed to at most the bytes its chunk holds, so a chunk that would expand
further is refused rather than read; a chunked dataset is assembled in memory, within
``MAX_IN_MEMORY_BYTES``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reprobox.guest.hashing._bounds import (
    MAX_IN_MEMORY_BYTES,
    OverLimit,
    check_cpu_budget,
    check_in_memory,
    element_count,
)
from reprobox.guest.hashing._hdf5_bytes import Cursor, Source
from reprobox.guest.hashing._hdf5_dense import GlobalHeaps
from reprobox.guest.hashing._hdf5_fixed_array import fixed_array_chunks
from reprobox.guest.hashing._hdf5_format import btree_v1_children
from reprobox.guest.hashing._hdf5_types import Chunk, Datatype, Filter, Layout

if TYPE_CHECKING:
    import numpy as np

MAX_VALUE_ELEMENTS = 1_000_000
"""Elements of a file's attributes (and variable-length string datasets) in all, each held as a Python
object and digested."""

MAX_CHUNKS = 1 << 20
"""Chunks a file's datasets list in all (each is held while the file is hashed)."""

_DEFLATE_SLACK = 1 << 12
"""What deflate may add to a chunk that does not compress (a few bytes per 16 KiB block, and its framing)."""


@dataclass(frozen=True)
class Dataset:
    path: str
    shape: tuple[int, ...]
    datatype: Datatype
    layout: Layout
    filters: tuple[Filter, ...]
    fill: bytes | None
    chunks: tuple[Chunk, ...] = ()

    @property
    def nbytes(self) -> int:
        return element_count(self.shape) * self.datatype.size

    @property
    def what(self) -> str:
        return f"dataset '{self.path}'"


def checked(source: Source, dataset: Dataset, room: int) -> Dataset:
    """The dataset with its chunks listed (at most ``room`` of them), once what it declares is checked
    against the file."""
    layout, what, nbytes = dataset.layout, dataset.what, dataset.nbytes
    if dataset.fill is not None and len(dataset.fill) != dataset.datatype.size:
        size = dataset.datatype.size
        raise ValueError(f"{what} has a fill value of {len(dataset.fill)} bytes for elements of {size}")
    if layout.kind == "compact" and len(layout.data) != nbytes:
        raise ValueError(f"{what} holds {len(layout.data)} bytes, not the {nbytes} its shape needs")
    if layout.kind == "contiguous" and layout.address is not None:
        if layout.size < nbytes:
            raise OverLimit(f"{what} holds {layout.size} bytes, fewer than the {nbytes} its shape needs")
        source.check(layout.address, nbytes, what)
    if layout.kind == "contiguous" and layout.address is None:  # never written: its fill value throughout
        check_in_memory(nbytes, what, "to fill")
    if layout.kind != "chunked":
        return dataset
    if len(layout.chunk) != len(dataset.shape):
        raise ValueError(f"{what} has chunks of {len(layout.chunk)} dimensions for {len(dataset.shape)}")
    check_in_memory(nbytes, what, "to assemble from its chunks")
    check_in_memory(element_count(layout.chunk) * dataset.datatype.size, f"a chunk of {what}", "unfiltered")
    chunks = () if layout.address is None else tuple(_chunks(source, dataset, room))
    return Dataset(
        dataset.path, dataset.shape, dataset.datatype, layout, dataset.filters, dataset.fill, chunks
    )


def _chunks(source: Source, dataset: Dataset, room: int) -> list[Chunk]:
    layout, what = dataset.layout, dataset.what
    chunk_bytes = element_count(layout.chunk) * dataset.datatype.size
    grid = [-(-dim // size) for dim, size in zip(dataset.shape, layout.chunk, strict=True)]
    places = element_count(tuple(grid))
    if layout.index in {"implicit", "fixed-array"} and places > room:  # these index every chunk
        raise OverLimit(f"{what} has {places} chunks, over the limit of {MAX_CHUNKS} for a file")
    assert layout.address is not None
    if layout.index == "single":
        size = layout.filtered_size if dataset.filters else chunk_bytes
        found = [Chunk((0,) * len(grid), layout.address, size, layout.filter_mask)]
    elif layout.index == "implicit":
        source.check(layout.address, places * chunk_bytes, what)
        found = [
            Chunk(tuple(i * c for i, c in zip(place, layout.chunk, strict=True)), address, chunk_bytes, 0)
            for place, address in _implicit(grid, layout.address, chunk_bytes)
        ]
    elif layout.index == "fixed-array":
        element_bytes = dataset.datatype.size
        found = fixed_array_chunks(source, layout, element_bytes, grid, what)
    else:
        found = _btree_chunks(source, dataset, len(grid), min(places, room))
    seen: set[tuple[int, ...]] = set()
    for chunk in found:
        inside = all(
            o % c == 0 and o < max(d, 1)
            for o, c, d in zip(chunk.offset, layout.chunk, dataset.shape, strict=True)
        )
        if not inside or chunk.offset in seen:
            raise ValueError(f"{what} lists a chunk at {list(chunk.offset)}, outside its shape or twice")
        seen.add(chunk.offset)
        if chunk.size != chunk_bytes and (
            not dataset.filters or chunk.size > 2 * chunk_bytes + _DEFLATE_SLACK
        ):
            raise ValueError(f"{what} stores a chunk of {chunk.size} bytes for {chunk_bytes}")
        source.check(chunk.address, chunk.size, f"a chunk of {what}")
    return found


def _implicit(grid: list[int], address: int, chunk_bytes: int) -> list[tuple[tuple[int, ...], int]]:
    import numpy as np

    places = list(np.ndindex(*grid)) if all(grid) else []
    return [(tuple(int(i) for i in place), address + n * chunk_bytes) for n, place in enumerate(places)]


def _btree_chunks(source: Source, dataset: Dataset, rank: int, limit: int) -> list[Chunk]:
    key_size = 8 + 8 * (rank + 1)
    chunks = []
    assert dataset.layout.address is not None
    for key, address in btree_v1_children(source, dataset.layout.address, 1, key_size, dataset.what):
        cursor = Cursor(key, f"a chunk key of {dataset.what}", source.widths)
        size, mask = cursor.u32(), cursor.u32()
        offset = tuple(cursor.u64() for _ in range(rank + 1))
        if offset[-1] != 0:
            raise ValueError(f"{dataset.what} lists a chunk at an offset inside an element")
        chunks.append(Chunk(offset[:-1], address, size, mask))
        if len(chunks) > limit:
            raise OverLimit(f"{dataset.what} lists more chunks than its shape holds, or the file's limit")
    return chunks


def read_array(source: Source, dataset: Dataset) -> np.ndarray[Any, Any]:
    """The dataset's elements in memory, in its stored dtype (contiguous ones too: for comparison)."""
    import numpy as np

    dtype = _stored(dataset.datatype)
    layout = dataset.layout
    if layout.kind == "compact":
        return np.frombuffer(layout.data, dtype=dtype).reshape(dataset.shape)
    if layout.kind == "contiguous" and layout.address is not None:
        check_in_memory(dataset.nbytes, dataset.what, "to compare")
        raw = source.read_absolute(source.check(layout.address, dataset.nbytes, dataset.what), dataset.nbytes)
        return np.frombuffer(raw, dtype=dtype).reshape(dataset.shape)
    fill = np.frombuffer(dataset.fill, dtype=dtype)[0] if dataset.fill else np.zeros((), dtype=dtype)
    out = np.full(dataset.shape, fill, dtype=dtype)
    for number, chunk in enumerate(dataset.chunks):
        check_cpu_budget(f"{number} chunks of {dataset.what} read")
        part = _chunk_array(source, dataset, chunk, dtype)
        region = tuple(
            slice(o, min(o + c, d)) for o, c, d in zip(chunk.offset, layout.chunk, dataset.shape, strict=True)
        )
        out[region] = part[tuple(slice(0, r.stop - r.start) for r in region)]
    return out


def _stored(datatype: Datatype) -> np.dtype[Any]:
    import numpy as np

    return datatype.dtype if datatype.dtype is not None else np.dtype(f"V{datatype.size}")


def _chunk_array(
    source: Source, dataset: Dataset, chunk: Chunk, dtype: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    import numpy as np

    expected = element_count(dataset.layout.chunk) * dataset.datatype.size
    raw = source.read_absolute(source.check(chunk.address, chunk.size, dataset.what), chunk.size)
    for position in reversed(range(len(dataset.filters))):
        if chunk.mask & (1 << position):
            continue
        step = dataset.filters[position]
        raw = _inflate(raw, expected, dataset.what) if step.ident == 1 else _unshuffle(raw, step, dataset)
    if len(raw) != expected:
        raise ValueError(f"a chunk of {dataset.what} holds {len(raw)} bytes, not the {expected} it should")
    return np.frombuffer(raw, dtype=dtype).reshape(dataset.layout.chunk)


def _inflate(raw: bytes, expected: int, what: str) -> bytes:
    """A deflated chunk, decompressed to at most ``expected`` bytes: one that expands further is refused."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(raw, min(expected, MAX_IN_MEMORY_BYTES) + 1)
    except zlib.error as exc:
        raise ValueError(f"a chunk of {what} does not decompress ({exc})") from None
    if len(out) > expected or inflater.unconsumed_tail:
        raise OverLimit(f"a chunk of {what} decompresses to more than the {expected} bytes it holds")
    return out


def _unshuffle(raw: bytes, step: Filter, dataset: Dataset) -> bytes:
    import numpy as np

    width = step.values[0] if step.values else dataset.datatype.size
    if width <= 1 or len(raw) < width:
        return raw
    whole = len(raw) - len(raw) % width
    planes = np.frombuffer(raw, dtype=np.uint8, count=whole).reshape(width, whole // width)
    return bytes(planes.T.tobytes()) + raw[whole:]


# --- values: attributes, and datasets of variable-length strings -----------------------------------


def python_value(
    source: Source,
    heaps: GlobalHeaps,
    datatype: Datatype,
    shape: tuple[int, ...] | None,
    *,
    raw: bytes,
    what: str,
) -> object:
    """The value as plain Python: numbers, booleans, strings (bytes when not UTF-8), nested lists."""
    import numpy as np

    if shape is None:
        return None
    count = element_count(shape)  # the caller counted it against MAX_VALUE_ELEMENTS
    if len(raw) != count * datatype.size:
        raise ValueError(f"{what} holds {len(raw)} bytes, not the {count * datatype.size} its shape needs")
    if datatype.kind in {"number", "bool"}:
        assert datatype.dtype is not None
        return np.frombuffer(raw, dtype=datatype.dtype).reshape(shape).tolist()
    size = datatype.size
    items = [_string(source, heaps, datatype, raw[i * size : (i + 1) * size], what) for i in range(count)]
    if not shape:
        return items[0]
    return np.array(items, dtype=object).reshape(shape).tolist()


def _string(source: Source, heaps: GlobalHeaps, datatype: Datatype, raw: bytes, what: str) -> str | bytes:
    if datatype.kind == "vlen-string":
        cursor = Cursor(raw, f"a string of {what}", source.widths)
        length, collection, index = cursor.u32(), cursor.address(), cursor.u32()
        if collection is None or (length == 0 and collection == 0):
            raw = b""
        else:
            held = heaps.object(source, collection, index)
            if length > len(held):
                raise ValueError(f"a string of {what} is longer than its heap object")
            raw = held[:length]
    elif datatype.padding == 0:
        raw = raw.split(b"\x00", 1)[0]
    else:
        raw = raw.rstrip(b" " if datatype.padding == 2 else b"\x00")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
