"""What an HDF5 object's messages say about its data: datatype, dataspace, layout, filters, fill value,
and attributes.

Only what can be read exactly is read: integers and IEEE floats (half, single, double) of either byte
order, booleans (h5py's enum of FALSE and TRUE), other enums as their base integers, fixed-length
strings, and variable-length strings. Anything else (compound, array, reference, opaque, bitfield,
time, variable-length sequences, non-IEEE floats) raises ``Unsupported`` naming it: never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reprobox.guest.hashing._bounds import MAX_DIMS, OverLimit, check_shape
from reprobox.guest.hashing._hdf5_bytes import Cursor, Unsupported, Widths

if TYPE_CHECKING:
    import numpy as np

_IEEE = {  # (size, exponent bits, mantissa bits, bias) -> NumPy's letter and size
    (2, 5, 10, 15): "f2",
    (4, 8, 23, 127): "f4",
    (8, 11, 52, 1023): "f8",
}
_CLASS_NAMES = {
    2: "time",
    4: "bitfield",
    5: "opaque",
    6: "compound",
    7: "reference",
    10: "array",
    11: "complex",
}
VLEN_STRING_BYTES = 4 + 4  # a length and a heap index, around the global heap's address


@dataclass(frozen=True)
class Datatype:
    """One element's type: ``dtype`` for fixed-size data as stored (byte order included)."""

    size: int
    kind: str  # "number", "bool", "string" (fixed length), "vlen-string"
    dtype: np.dtype[Any] | None = None
    padding: int = 0  # strings: 0 NUL-terminated, 1 NUL-padded, 2 space-padded
    utf8: bool = False


def datatype(data: bytes, widths: Widths, what: str, nested: bool = False) -> tuple[Datatype, int]:
    """The datatype a message's bytes describe, and how many bytes the description took."""
    import numpy as np

    cursor = Cursor(data, f"the datatype of {what}", widths)
    first = cursor.u8()
    kind, version = first & 0xF, first >> 4
    bits = cursor.uint(3)
    size = cursor.u32()
    if size == 0 or size > 1 << 20:
        raise ValueError(f"the datatype of {what} declares elements of {size} bytes")
    order = ">" if bits & 0x1 else "<"
    if kind == 0:  # fixed-point
        offset, precision = cursor.u16(), cursor.u16()
        if size not in (1, 2, 4, 8) or offset != 0 or precision != 8 * size:
            raise Unsupported(f"{what} has integers of {precision} bits in {size} bytes, which are not read")
        letter = "i" if bits & 0x8 else "u"
        return Datatype(size, "number", np.dtype(f"{order}{letter}{size}")), cursor.position
    if kind == 1:  # floating-point
        offset, precision = cursor.u16(), cursor.u16()
        _, exponent, _, mantissa = cursor.u8(), cursor.u8(), cursor.u8(), cursor.u8()
        bias = cursor.u32()
        ieee = _IEEE.get((size, exponent, mantissa, bias))
        if ieee is None or bits & 0x40 or offset != 0 or precision != 8 * size:
            raise Unsupported(
                f"{what} has floats of {exponent} exponent and {mantissa} mantissa bits in {size} bytes, "
                "which are not read (IEEE half, single and double are)"
            )
        return Datatype(size, "number", np.dtype(f"{order}{ieee}")), cursor.position
    if kind == 3:  # fixed-length string
        return Datatype(size, "string", np.dtype(f"S{size}"), bits & 0xF, bool(bits & 0xF0)), cursor.position
    if kind == 8 and not nested:  # enumeration
        return _enum(cursor, members=bits & 0xFFFF, version=version, size=size, widths=widths, what=what)
    if kind == 9 and not nested and bits & 0xF == 1:  # variable-length string
        cursor.position += datatype(cursor.data[cursor.position :], widths, what, nested=True)[1]
        if size != VLEN_STRING_BYTES + widths.offset:
            raise ValueError(f"{what} has variable-length strings of {size} bytes")
        return Datatype(size, "vlen-string", None, (bits >> 4) & 0xF, bool(bits & 0xF00)), cursor.position
    name = _CLASS_NAMES.get(kind, "variable-length sequence" if kind == 9 else f"class {kind}")
    raise Unsupported(f"{what} has a {name} datatype, which is not read")


def _enum(
    cursor: Cursor, *, members: int, version: int, size: int, widths: Widths, what: str
) -> tuple[Datatype, int]:
    """h5py's booleans (an enum of FALSE=0 and TRUE=1 over int8) as booleans; any other enum as its
    base integers (the values stored), which is what it holds."""
    import numpy as np

    base, used = datatype(cursor.data[cursor.position :], widths, what, nested=True)
    cursor.position += used
    if base.kind != "number" or base.dtype is None or base.dtype.kind not in "iu" or base.size != size:
        raise Unsupported(f"{what} has an enumeration over a type other than an integer, which is not read")
    names = []
    for _ in range(members):
        end = cursor.data.find(b"\x00", cursor.position)
        if end < 0:
            raise ValueError(f"the datatype of {what} is cut short")
        length = end - cursor.position + 1  # versions 1 and 2 pad each name to a multiple of 8 bytes
        names.append(cursor.take(length + (-length % 8 if version < 3 else 0))[: length - 1])
    values = [cursor.uint(size) for _ in range(members)]
    if size == 1 and dict(zip(names, values, strict=True)) == {b"FALSE": 0, b"TRUE": 1}:
        return Datatype(1, "bool", np.dtype("?")), cursor.position
    return base, cursor.position


def dataspace(data: bytes, widths: Widths, what: str) -> tuple[int, ...] | None:
    """The shape (``()`` for a scalar), or None for a null dataspace (no data at all)."""
    cursor = Cursor(data, f"the dataspace of {what}", widths)
    version, rank, _flags = cursor.u8(), cursor.u8(), cursor.u8()
    if version == 1:
        cursor.skip(5)
        kind = 1 if rank else 0
    elif version == 2:
        kind = cursor.u8()
    else:
        raise ValueError(f"the dataspace of {what} has version {version} (1 and 2 are read)")
    if rank > MAX_DIMS:
        raise OverLimit(f"{what} has {rank} dimensions, over the limit of {MAX_DIMS}")
    if kind == 2:
        return None
    return check_shape([cursor.length() for _ in range(rank)], what)


def fill_value(kind: int, data: bytes, widths: Widths, what: str) -> bytes | None:
    """The fill value's bytes (old or new message), or None when it declares none."""
    cursor = Cursor(data, f"the fill value of {what}", widths)
    if kind == 0x4:
        return cursor.take(cursor.u32()) or None
    version = cursor.u8()
    if version in (1, 2):
        cursor.skip(2)
        defined = cursor.u8()
        if version == 2 and not defined:
            return None
    elif version == 3:
        if not cursor.u8() & 0x20:
            return None
    else:
        raise ValueError(f"the fill value of {what} has version {version} (1 to 3 are read)")
    return cursor.take(cursor.u32()) or None


@dataclass(frozen=True)
class Filter:
    ident: int
    values: tuple[int, ...]


FILTER_NAMES = {
    1: "deflate",
    2: "shuffle",
    3: "fletcher32",
    4: "szip",
    5: "nbit",
    6: "scaleoffset",
    32000: "lzf",
}
READ_FILTERS = frozenset({1, 2})


def filters(data: bytes, widths: Widths, what: str) -> tuple[Filter, ...]:
    cursor = Cursor(data, f"the filter pipeline of {what}", widths)
    version, count = cursor.u8(), cursor.u8()
    if version == 1:
        cursor.skip(6)
    elif version != 2:
        raise ValueError(f"the filter pipeline of {what} has version {version} (1 and 2 are read)")
    found = []
    for _ in range(count):
        ident = cursor.u16()
        name_length = cursor.u16() if version == 1 or ident >= 256 else 0
        _flags, values = cursor.u16(), cursor.u16()
        cursor.skip(name_length)
        found.append(Filter(ident, tuple(cursor.u32() for _ in range(values))))
        if version == 1 and values % 2:
            cursor.skip(4)
        if ident not in READ_FILTERS:
            name = FILTER_NAMES.get(ident, f"number {ident}")
            raise Unsupported(f"{what} is stored through the {name} filter, which is not read")
    return tuple(found)


@dataclass(frozen=True)
class Layout:
    """Where a dataset's elements are: in the header (compact), in one run, or in chunks."""

    kind: str  # "compact", "contiguous", "chunked"
    address: int | None = None
    size: int = 0
    data: bytes = b""
    chunk: tuple[int, ...] = ()
    index: str = ""  # chunked: "btree1", "single", "implicit"
    filtered_size: int = 0
    filter_mask: int = 0


_INDEX_NAMES = {4: "extensible array", 5: "version 2 B-tree"}


def layout(data: bytes, widths: Widths, what: str) -> Layout:
    cursor = Cursor(data, f"the data layout of {what}", widths)
    version, kind = cursor.u8(), cursor.u8()
    if version not in (3, 4, 5):
        raise Unsupported(f"{what} has a data layout of version {version}, which is not read (3 to 5 are)")
    if kind == 0:
        return Layout("compact", data=cursor.take(cursor.u16()))
    if kind == 1:
        return Layout("contiguous", cursor.address(), cursor.length())
    if kind != 2:
        name = "virtual" if kind == 3 else f"class {kind}"
        raise Unsupported(f"{what} is a {name} dataset, which is not read")
    if version == 3:
        rank = cursor.u8()
        address = cursor.address()
        dims = tuple(cursor.u32() for _ in range(rank))
        return Layout("chunked", address, chunk=_chunk(dims, what), index="btree1")
    flags, rank, width = cursor.u8(), cursor.u8(), cursor.u8()
    if not 1 <= width <= 8:
        raise ValueError(f"the data layout of {what} encodes dimensions in {width} bytes")
    dims = tuple(cursor.uint(width) for _ in range(rank))
    index = cursor.u8()
    if index == 1:
        filtered = (cursor.length(), cursor.u32()) if flags & 0x2 else (0, 0)
        return Layout("chunked", cursor.address(), 0, b"", _chunk(dims, what), "single", *filtered)
    if index == 2:
        return Layout("chunked", cursor.address(), chunk=_chunk(dims, what), index="implicit")
    if index == 3:
        cursor.skip(1)  # page bits: the array's own header says them again
        return Layout("chunked", cursor.address(), chunk=_chunk(dims, what), index="fixed-array")
    name = _INDEX_NAMES.get(index, f"index type {index}")
    raise Unsupported(f"{what} indexes its chunks with a {name}, which is not read")


def _chunk(dims: tuple[int, ...], what: str) -> tuple[int, ...]:
    """The chunk's shape (the last dimension is the element size, dropped)."""
    if not dims or any(d == 0 for d in dims[:-1]):
        raise ValueError(f"the data layout of {what} declares an empty chunk")
    return check_shape(list(dims[:-1]), f"a chunk of {what}")


@dataclass(frozen=True)
class Attribute:
    name: str
    datatype: Datatype
    shape: tuple[int, ...] | None
    data: bytes


def attribute(data: bytes, widths: Widths, what: str) -> Attribute:
    cursor = Cursor(data, f"an attribute of {what}", widths)
    version, flags = cursor.u8(), cursor.u8()
    if version not in (1, 2, 3):
        raise ValueError(f"an attribute of {what} has version {version} (1 to 3 are read)")
    if flags & 0x3:
        raise Unsupported(f"an attribute of {what} has a shared datatype or dataspace, which is not read")
    name_size, type_size, space_size = cursor.u16(), cursor.u16(), cursor.u16()
    if version == 3:
        cursor.skip(1)  # the name's character set
    padded = version == 1  # version 1 pads the name, datatype and dataspace to 8 bytes each
    name = cursor.text(name_size)
    cursor.align(8 if padded else 1)
    where = f"attribute '{name}' of {what}"
    kind = datatype(cursor.take(type_size), widths, where)[0]
    cursor.align(8 if padded else 1)
    shape = dataspace(cursor.take(space_size), widths, where)
    cursor.align(8 if padded else 1)
    count = 0 if shape is None else _count(shape)
    return Attribute(name, kind, shape, cursor.take(count * kind.size))


def _count(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total


@dataclass(frozen=True, slots=True)
class Chunk:
    offset: tuple[int, ...]  # of its first element, in elements
    address: int
    size: int  # bytes stored (filtered)
    mask: int  # filters skipped for this chunk
