"""OCDBT units written by hand, uncompressed, as TensorStore's format documentation lays them out: for the
reader's tests and the fuzzing seeds (a database TensorStore writes names its data files at random, and
these need fixed names and hostile fields)."""

from __future__ import annotations

from collections.abc import Sequence

from reprobox.guest.hashing._crc32c import crc32c
from reprobox.guest.hashing._ocdbt_format import BTREE_NODE_MAGIC, MANIFEST_MAGIC, Cursor
from tests.wire import varint

DATA_FILE = "d/" + "0" * 32
Ref = tuple[int, int, int]  # data file index, offset, length


def varints(values: Sequence[int]) -> bytes:
    return b"".join(varint(v) for v in values)


def wrap(magic: int, body: bytes, compression: int = 0) -> bytes:
    """A unit: magic, length, version 0, compression, the body, and the CRC-32C of all before it."""
    head = varint(0) + varint(compression)
    data = magic.to_bytes(4, "big") + (12 + len(head) + len(body) + 4).to_bytes(8, "little") + head + body
    return data + crc32c(data).to_bytes(4, "little")


def unwrapped(unit: bytes) -> tuple[int, bytes]:
    """A unit's compression method and (still compressed) body."""
    cursor = Cursor(unit[:-4], "unit")
    cursor.pos = 12
    cursor.varint("version")
    method = cursor.varint("compression")
    return method, unit[cursor.pos : -4]


def table(paths: Sequence[str]) -> bytes:
    """A data file table without prefix compression, each path's base path empty."""
    encoded = [p.encode() for p in paths]
    return (
        varint(len(encoded))
        + varints([0] * max(0, len(encoded) - 1))
        + varints([len(p) for p in encoded])
        + varints([0] * len(encoded))
        + b"".join(encoded)
    )


def manifest(
    paths: Sequence[str], root: Ref, *, height: int = 0, commit: int = 1, max_decoded: int = 1 << 20
) -> bytes:
    config = bytes(16) + b"\x00" + varint(64) + varint(max_decoded) + b"\x04" + varint(0)
    file_id, offset, length = root
    versions = (
        varint(1) + varint(1) + bytes([height]) + varints([file_id, offset, length]) + varints([0, 0, 0])
    ) + commit.to_bytes(8, "little")
    return wrap(MANIFEST_MAGIC, config + table(paths) + versions + varint(0))


def leaf(paths: Sequence[str], entries: Sequence[tuple[bytes, bytes | Ref]]) -> bytes:
    """A leaf node of ``entries``: keys in order, each value inline bytes or a reference."""
    keys = [key for key, _ in entries]
    body = bytes([0]) + table(paths) + varint(len(entries))
    body += varints([0] * (len(keys) - 1)) + varints([len(k) for k in keys]) + b"".join(keys)
    lengths = [len(v) if isinstance(v, bytes) else v[2] for _, v in entries]
    body += varints(lengths) + bytes(0 if isinstance(v, bytes) else 1 for _, v in entries)
    refs = [v for _, v in entries if not isinstance(v, bytes)]
    body += varints([r[0] for r in refs]) + varints([r[1] for r in refs])
    body += b"".join(v for _, v in entries if isinstance(v, bytes))
    return wrap(BTREE_NODE_MAGIC, body)


def interior(paths: Sequence[str], height: int, children: Sequence[tuple[bytes, Ref]]) -> bytes:
    keys = [key for key, _ in children]
    body = bytes([height]) + table(paths) + varint(len(children))
    body += varints([0] * (len(keys) - 1)) + varints([len(k) for k in keys]) + varints([0] * len(keys))
    body += b"".join(keys)
    body += varints([c[0] for _, c in children]) + varints([c[1] for _, c in children])
    body += varints([c[2] for _, c in children]) + varints([0] * 3 * len(children))
    return wrap(BTREE_NODE_MAGIC, body)


ZARRAY = (
    b'{"chunks":[2,3],"compressor":null,"dtype":"<f4","fill_value":0.0,"filters":null,"order":"C",'
    b'"shape":[3,3],"zarr_format":2}'
)


def small_database() -> dict[str, bytes]:
    """A database by hand: ``w`` a 3x3 float32 zarr array in two chunks (one inline, one in the data
    file), a text value, all in one data file ``DATA_FILE`` whose tree is one leaf."""
    import numpy as np

    whole = np.arange(9, dtype="<f4").reshape(3, 3)
    first = whole[0:2].tobytes()
    second = np.zeros((2, 3), dtype="<f4")
    second[0] = whole[2]
    entries: list[tuple[bytes, bytes | Ref]] = [
        (b"note", b"saved by hand"),
        (b"w/.zarray", ZARRAY),
        (b"w/0.0", (0, 0, len(first))),
        (b"w/1.0", second.tobytes()),
    ]
    node = leaf([DATA_FILE], entries)
    data = first + node
    return {"manifest.ocdbt": manifest([DATA_FILE], (0, len(first), len(node))), DATA_FILE: data}
