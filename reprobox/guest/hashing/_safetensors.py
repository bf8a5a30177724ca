"""Reading a safetensors file: its JSON header checked entry by entry against the file (its values
counted before it is parsed), and each tensor hashed from the file by ``pread`` in bounded chunks."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._arrays import Buffers, _Array, _Content, _refused
from reprobox.guest.hashing._bounds import (
    MAX_HEADER_DEPTH,
    MAX_VALUES,
    OverLimit,
    check_shape,
    element_count,
    loads_json,
)
from reprobox.guest.hashing._canonical import _join, _metadata_digests
from reprobox.guest.hashing._filebytes import FileIdentity, pread_chunks
from reprobox.guest.hashing._layout import Layout

MAX_SAFETENSORS_HEADER = 100 << 20

MAX_HEADER_TOKENS = 4_000_000
"""JSON values in a header (a genuine entry holds about ten: a name, its dtype, shape and offsets), so
that parsing it stays within a few hundred MiB whatever the header holds."""


# safetensors dtype -> (canonical dtype, bits per element as stored)
SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 8),
    "U8": ("uint8", 8),
    "I8": ("int8", 8),
    "U16": ("uint16", 16),
    "I16": ("int16", 16),
    "U32": ("uint32", 32),
    "I32": ("int32", 32),
    "U64": ("uint64", 64),
    "I64": ("int64", 64),
    "F16": ("float16", 16),
    "BF16": ("bfloat16", 16),
    "F32": ("float32", 32),
    "F64": ("float64", 64),
    "C64": ("complex64", 64),
    "F8_E4M3": ("float8_e4m3fn", 8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8),
    "F8_E5M2": ("float8_e5m2", 8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    # safetensors counts packed fp4 values one by one; torch packs two per element (last dim halved).
    "F4": ("float4_e2m1fn_x2", 4),
    "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6),
}


@dataclass(frozen=True)
class SafetensorsEntry:
    name: str
    dtype: str  # canonical
    source_dtype: str  # as the header spells it
    shape: tuple[int, ...]
    start: int  # absolute file offsets
    end: int


def read_safetensors_header(path: Path) -> tuple[FileIdentity, list[SafetensorsEntry], object]:
    """What the file was when its header was read (its entries are read only while it still is), the
    validated tensor entries and the ``__metadata__`` value; ValueError says what is wrong (OverLimit, a
    ValueError, when the header declares more than the file holds or than the limits allow)."""
    with path.open("rb") as f:
        identity = FileIdentity.of(f.fileno())
        entries, metadata = _header_of(f, identity.size)
    return identity, entries, metadata


def _header_of(f: IO[bytes], size: int) -> tuple[list[SafetensorsEntry], object]:
    """The entries and ``__metadata__``; the header (its length and JSON) ends where ``f`` is left."""
    prefix = f.read(8)
    if len(prefix) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", prefix)
    if header_len > size - 8:
        raise OverLimit(f"its header length {header_len} is more than the {size - 8} bytes after it")
    if header_len > MAX_SAFETENSORS_HEADER:
        raise OverLimit(f"its header length {header_len} is over the limit of {MAX_SAFETENSORS_HEADER}")
    raw = f.read(header_len)
    tokens = sum(raw.count(mark) for mark in (b",", b":", b"[", b"{"))
    if tokens > MAX_HEADER_TOKENS:  # counted before parsing: a parsed value costs tens of bytes
        raise OverLimit(f"the header holds more than the limit of {MAX_HEADER_TOKENS} JSON values")
    header = loads_json(
        raw.decode("utf-8"), "the header", max_depth=MAX_HEADER_DEPTH, object_pairs_hook=_no_duplicate_keys
    )
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    if len(header) > MAX_VALUES:
        raise OverLimit(f"the header lists more than the limit of {MAX_VALUES} entries")
    data_start = 8 + header_len
    data_len = size - data_start
    metadata = header.pop("__metadata__", None)
    entries = [_safetensors_entry(name, info, data_start, data_len) for name, info in header.items()]
    _check_disjoint(entries)
    return entries, metadata


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the header names '{key}' twice")
        result[key] = value
    return result


def _safetensors_entry(name: str, info: object, data_start: int, data_len: int) -> SafetensorsEntry:
    if not isinstance(info, dict):
        raise ValueError(f"entry '{name}' is not an object")
    dtype, offsets = info.get("dtype"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise ValueError(f"entry '{name}' has no dtype")
    shape = list(check_shape(info.get("shape"), f"entry '{name}'"))
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        raise ValueError(f"entry '{name}' has no data offsets [begin, end]")
    if not 0 <= offsets[0] <= offsets[1] <= data_len:
        raise OverLimit(f"entry '{name}' has data offsets {offsets} outside the {data_len} bytes of data")
    canonical, bits = SAFETENSORS_DTYPES.get(dtype, (f"safetensors:{dtype}", 0))
    if bits and offsets[1] - offsets[0] != (element_count(tuple(shape)) * bits + 7) // 8:
        raise OverLimit(
            f"entry '{name}' holds {offsets[1] - offsets[0]} bytes, not what {dtype}{shape} needs"
        )
    if dtype == "F4" and shape:  # torch's float4_e2m1fn_x2 packs two values per element
        shape = [*shape[:-1], (shape[-1] + 1) // 2]
    return SafetensorsEntry(
        name, canonical, dtype, tuple(shape), data_start + offsets[0], data_start + offsets[1]
    )


def _check_disjoint(entries: list[SafetensorsEntry]) -> None:
    """Two tensors never share bytes in a file the safetensors library writes (or reads)."""
    spans = sorted((e.start, e.end, e.name) for e in entries if e.end > e.start)
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise OverLimit(f"entries '{first}' and '{second}' overlap in the file")


def plan_safetensors(path: Path) -> _Content:
    try:
        with path.open("rb") as f:
            identity = FileIdentity.of(f.fileno())
            entries, metadata = _header_of(f, identity.size)
            header_end = f.tell()
    except (ValueError, UnicodeDecodeError) as exc:
        return _refused("safetensors", exc)
    arrays = [
        _Array(e.name, e.dtype, e.shape, e.end - e.start, _file_range(path, identity, e)) for e in entries
    ]
    values: list[tuple[str, object]] = []
    if isinstance(metadata, dict):
        values = [(_join("__metadata__", k), v) for k, v in metadata.items()]
    elif metadata is not None:
        values = [("__metadata__", metadata)]
    # the length and JSON header are framing (its values are parsed too); each entry's bytes are content
    layout = Layout.of(identity.size, ((e.start, e.end) for e in entries), [(0, header_end)])
    return _Content(
        "safetensors", arrays, _metadata_digests(values), reader="safetensors header", layout=layout
    )


def _file_range(path: Path, identity: FileIdentity, entry: SafetensorsEntry) -> Buffers:
    """The entry's bytes by ``pread``, a chunk at a time: a file cut short while hashed is a sentence."""
    return lambda _budget: pread_chunks(
        path, identity, entry.start, entry.end - entry.start, FILE_CHUNK_BYTES
    )
