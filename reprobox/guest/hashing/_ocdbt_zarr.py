"""Zarr arrays inside an OCDBT database: each array's chunks decoded and put together as one tensor.

Orbax saves each array through TensorStore's zarr driver into the database: a metadata key
(``<name>/.zarray`` for zarr v2, ``<name>/zarr.json`` for v3) and one key per chunk (``<name>/0.0``,
``<name>/c/0/0``). An array whose metadata this reader understands (a regular grid; a plain numeric or
bool dtype, or bfloat16; zarr v2 with no filters and no compressor or zstd, in C or F order; zarr v3
with the ``bytes`` codec, optionally then ``zstd``), and all of whose chunks are present (or a fill value
stands for the missing ones), is one tensor named by the array's key (``conv1.kernel.value``), its
chunks decoded when it is hashed or compared. Any other array's chunks stay values, their bytes.
The metadata keys themselves are values like any JSON file's.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reprobox.guest.hashing._bounds import MAX_IN_MEMORY_BYTES, check_shape, element_count

V2_METADATA = ".zarray"
V3_METADATA = "zarr.json"
MAX_METADATA_BYTES = 1 << 20

# zarr's type names -> (NumPy's name of the element, reprobox's dtype name)
_V3_TYPES = {
    "bool": ("|b1", "bool"),
    **{f"int{n}": (f"<i{n // 8}", f"int{n}") for n in (8, 16, 32, 64)},
    **{f"uint{n}": (f"<u{n // 8}", f"uint{n}") for n in (8, 16, 32, 64)},
    "float16": ("<f2", "float16"),
    "float32": ("<f4", "float32"),
    "float64": ("<f8", "float64"),
    "complex64": ("<c8", "complex64"),
    "complex128": ("<c16", "complex128"),
    "bfloat16": ("<u2", "bfloat16"),
}
_V2_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}


@dataclass(frozen=True)
class ZarrArray:
    """An array the reader can put together: its dtype, shape, chunk shape, order, how chunks are named
    and decoded, and the fill value for a chunk not stored (None: every chunk must be)."""

    name: str
    element: str  # NumPy's dtype string, endianness included (bfloat16 as its 16-bit pattern)
    dtype: str  # reprobox's dtype name, as the contract names it
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    fortran: bool
    zstd: bool
    chunk_key: Callable[[tuple[int, ...]], str]
    fill: object

    @property
    def itemsize(self) -> int:
        return int(self.element[2:]) if self.element[1] in "iufc" else 1

    @property
    def nbytes(self) -> int:
        return element_count(self.shape) * self.itemsize

    def grid(self) -> list[tuple[int, ...]]:
        """Every chunk's index, row-major."""
        counts = [math.ceil(s / c) if c else 0 for s, c in zip(self.shape, self.chunks, strict=True)]
        return list(itertools.product(*(range(n) for n in counts)))


def array_of(key: str, text: bytes) -> ZarrArray | None:
    """The array a metadata value describes, or None where this reader does not decode it."""
    prefix, _, leaf = key.rpartition("/")
    if leaf not in (V2_METADATA, V3_METADATA) or len(text) > MAX_METADATA_BYTES:
        return None
    try:
        meta = json.loads(text)
        found = _v2(prefix, meta) if leaf == V2_METADATA else _v3(prefix, meta)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if found is None or found.nbytes > MAX_IN_MEMORY_BYTES or len(found.grid()) > 1 << 16:
        return None
    return found


def _shape_pair(shape: object, chunks: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    dims, sizes = check_shape(shape, "a zarr array"), check_shape(chunks, "a zarr array's chunks")
    if len(dims) != len(sizes) or 0 in sizes:
        raise ValueError("chunks that do not fit the shape")
    return dims, sizes


def _v2(prefix: str, meta: dict[str, Any]) -> ZarrArray | None:
    compressor, order, separator = (
        meta.get("compressor"),
        meta.get("order", "C"),
        meta.get("dimension_separator", "."),
    )
    if (
        meta.get("zarr_format") != 2
        or meta.get("filters")
        or order not in ("C", "F")
        or separator not in (".", "/")
    ):
        return None
    if compressor is not None and (not isinstance(compressor, dict) or compressor.get("id") != "zstd"):
        return None
    dtype = meta.get("dtype")
    if dtype == "bfloat16":
        element, name = "<u2", "bfloat16"
    elif isinstance(dtype, str) and len(dtype) >= 3 and dtype[0] in "<>|" and dtype[1] in _V2_KINDS:
        bits = int(dtype[2:]) * (8 if dtype[1] != "c" else 4)
        element, name = dtype, "bool" if dtype[1] == "b" else f"{_V2_KINDS[dtype[1]]}{bits}"
        if name not in {v[1] for v in _V3_TYPES.values()} or (dtype[1] == "b" and dtype[2:] != "1"):
            return None
    else:
        return None
    shape, chunks = _shape_pair(meta.get("shape"), meta.get("chunks"))

    def chunk_key(index: tuple[int, ...]) -> str:
        return f"{prefix}/{separator.join(map(str, index)) if index else '0'}"

    return ZarrArray(
        prefix,
        element,
        name,
        shape,
        chunks,
        order == "F",
        compressor is not None,
        chunk_key,
        meta.get("fill_value"),
    )


def _v3(prefix: str, meta: dict[str, Any]) -> ZarrArray | None:
    if (
        meta.get("zarr_format") != 3
        or meta.get("node_type") != "array"
        or meta.get("data_type") not in _V3_TYPES
    ):
        return None
    grid, encoding = meta.get("chunk_grid", {}), meta.get("chunk_key_encoding", {"name": "default"})
    if grid.get("name") != "regular":
        return None
    codecs = [c.get("name") for c in meta.get("codecs", [])]
    if codecs not in (["bytes"], ["bytes", "zstd"]):
        return None
    endian = (meta["codecs"][0].get("configuration") or {}).get("endian", "little")
    element, name = _V3_TYPES[meta["data_type"]]
    element = element.replace("<", ">") if endian == "big" and element[0] == "<" else element
    shape, chunks = _shape_pair(meta.get("shape"), grid.get("configuration", {}).get("chunk_shape"))
    kind = encoding.get("name")
    separator = (encoding.get("configuration") or {}).get("separator", "/" if kind == "default" else ".")
    if kind not in ("default", "v2") or separator not in ("/", "."):
        return None

    def chunk_key(index: tuple[int, ...]) -> str:
        parts = [str(i) for i in index]
        if kind == "default":
            return f"{prefix}/{separator.join(['c', *parts])}"
        return f"{prefix}/{separator.join(parts) if parts else '0'}"

    return ZarrArray(
        prefix, element, name, shape, chunks, False, len(codecs) == 2, chunk_key, meta.get("fill_value")
    )


def assemble(array: ZarrArray, chunk: Callable[[str], bytes | None]) -> Any:
    """The whole array, little-endian, C order (bfloat16 as uint16): each chunk decoded and put in place
    (a chunk at the edge is cut to the shape); a chunk not stored is the fill value. ValueError if a
    chunk does not decode to its exact size or a missing chunk has no fill value."""
    import numpy as np

    from reprobox.guest.hashing._zstd import decompress

    element = np.dtype(array.element)
    whole = np.zeros(array.shape, dtype=element.newbyteorder("<"))
    size = element_count(array.chunks) * element.itemsize
    for index in array.grid():
        data = chunk(array.chunk_key(index))
        place = tuple(
            slice(i * c, min((i + 1) * c, s))
            for i, c, s in zip(index, array.chunks, array.shape, strict=True)
        )
        if data is None:
            if array.fill is None or isinstance(array.fill, (dict, list)):
                raise ValueError(
                    f"chunk {array.chunk_key(index)} is not stored and the array has no fill value"
                )
            whole[place] = _fill(array.fill, element, array.dtype == "bfloat16")
            continue
        raw = decompress(data, max_output=size) if array.zstd else data
        if len(raw) != size:
            raise ValueError(f"chunk {array.chunk_key(index)} holds {len(raw)} bytes, not {size}")
        values = np.frombuffer(raw, dtype=element).reshape(array.chunks, order="F" if array.fortran else "C")
        whole[place] = values[tuple(slice(0, p.stop - p.start) for p in place)]
    return whole


def _fill(value: object, element: Any, bfloat16: bool) -> Any:
    """A fill value as zarr spells it: a number, a bool, or NaN and the infinities as text (bfloat16 as
    its 16-bit pattern, the top half of the float32's)."""
    import numpy as np

    number = float(value.replace("Infinity", "inf")) if isinstance(value, str) else value
    if bfloat16:
        return (np.array(number, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return np.array(number).astype(element)
