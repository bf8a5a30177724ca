"""Mutators that know each format's framing, so that mutations reach past the checksums and lengths.

A byte-level mutation of a TensorBoard record fails its CRC and tests nothing past it; here the record
is mutated and framed again. Zip archives (.npz, torch's format) have a member mutated and are zipped
again (or their directory damaged); safetensors headers are mutated as JSON text and their length fixed.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import struct
import zipfile
from collections.abc import Callable
from typing import Any

from reprobox.guest.hashing._crc32c import masked_crc32c
from tests.fuzz import ocdbt_inputs as ocdbt_seeds
from tests.fuzz.seeds import wandb_frame

Mutator = Callable[[random.Random, bytes], bytes]

INTERESTING_INTS = [
    0,
    1,
    2,
    7,
    8,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0x7FFF,
    0xFFFF,
    0x7FFFFFFF,
    0xFFFFFFFF,
    2**48,
    2**63 - 1,
    2**64 - 1,
]
TOKENS = [
    b"9" * 5000,
    b"0x" + b"f" * 4000,
    b"1:2:3:4:5:6",
    b"[" * 300,
    b"{" * 300,
    b"-1",
    b"1e400",
    b"NaN",
    b"\xff\xfe",
    b"\x00",
    b"(",
    b")",
    b"'",
    b'"',
    b"\\",
    b"\n",
    b",",
    b":",
    b"False",
    b"{'descr': '|O'",
    b"'shape': (-1,)",
    b"'shape': (4294967296, 4294967296)",
    b"'fortran_order': True",
    b"#",
    b"\r",
    b"...",
]


def _flip(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return b"\x00"
    out = bytearray(data)
    at = rng.randrange(len(out))
    out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def _set_int(rng: random.Random, data: bytes) -> bytes:
    width, order = rng.choice([(1, "<"), (2, "<"), (4, "<"), (8, "<"), (4, ">"), (8, ">")])
    if len(data) < width:
        return data
    value = rng.choice(INTERESTING_INTS) % (1 << (8 * width))
    at = rng.randrange(len(data) - width + 1)
    return data[:at] + value.to_bytes(width, "little" if order == "<" else "big") + data[at + width :]


def _insert_token(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(TOKENS) + data[at:]


def _delete(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 2:
        return data
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, min(64, len(data) - at)) :]


def _duplicate(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    at = rng.randrange(len(data))
    piece = data[at : at + rng.randint(1, 256)]
    return data[:at] + piece * rng.randint(2, 64) + data[at:]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


BYTE_MUTATORS: list[Mutator] = [
    _flip,
    _flip,
    _set_int,
    _set_int,
    _insert_token,
    _delete,
    _duplicate,
    _truncate,
]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 4)):
        data = rng.choice(BYTE_MUTATORS)(rng, data)
    return data


def _rezip(rng: random.Random, data: bytes) -> bytes:
    """One member mutated (or renamed, or emptied of its name), the archive written again."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [(info, archive.read(info)) for info in archive.infolist()]
    except Exception:  # noqa: BLE001 - a mutated archive the writer side cannot read: mutate bytes
        return mutate_bytes(rng, data)
    if not members:
        return data
    index = rng.randrange(len(members))
    info, payload = members[index]
    choice = rng.random()
    name = info.filename
    if choice < 0.1:
        name = rng.choice(["", "/", "../x.npy", "a" * 300, "dup.npy"])
    else:
        payload = mutate_bytes(rng, payload)
    members[index] = (info, payload)
    out = io.BytesIO()
    compression = rng.choice(
        [info.compress_type, zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
    )
    with zipfile.ZipFile(out, "w") as archive:
        for position, (old, content) in enumerate(members):
            entry = zipfile.ZipInfo("member")
            entry.filename = name if position == index else old.filename  # zipfile refuses "" by name
            entry.compress_type = compression
            with archive.open(entry, "w") as stream:
                stream.write(content)
    result = out.getvalue()
    if rng.random() < 0.3:  # damage the compressed stream or the directory
        result = mutate_bytes(rng, result)
    return result


def _safetensors_header(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 8:
        return mutate_bytes(rng, data)
    (length,) = struct.unpack_from("<Q", data)
    header, rest = data[8 : 8 + length], data[8 + length :]
    header = mutate_bytes(rng, header)
    if rng.random() < 0.2:
        rest = mutate_bytes(rng, rest)
    return struct.pack("<Q", len(header)) + header + rest


def _tfrecords(data: bytes) -> list[bytes]:
    records, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        records.append(data[pos + 12 : pos + 12 + length])
        pos += 16 + length
    return records


def tfrecord(body: bytes) -> bytes:
    header = struct.pack("<Q", len(body))
    return header + struct.pack("<I", masked_crc32c(header)) + body + struct.pack("<I", masked_crc32c(body))


def _tensorboard(rng: random.Random, data: bytes) -> bytes:
    records = _tfrecords(data) or [b""]
    index = rng.randrange(len(records))
    records[index] = mutate_bytes(rng, records[index])
    if rng.random() < 0.2:
        records.insert(rng.randrange(len(records) + 1), records[index] * rng.randint(2, 100))
    return b"".join(tfrecord(r) for r in records)


def _wandb_records(data: bytes) -> list[bytes]:
    """The records of a framed W&B log (FIRST..LAST chunks joined), best effort on a mutated one."""
    records: list[bytes] = []
    pending = b""
    pos = 7
    while pos + 7 <= len(data):
        left = 32 * 1024 - pos % (32 * 1024)
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        piece = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pending += piece
        if kind in (1, 4):
            records.append(pending)
            pending = b""
        if kind == 0:
            break
    return records


def _wandb(rng: random.Random, data: bytes) -> bytes:
    records = _wandb_records(data) or [b""]
    index = rng.randrange(len(records))
    records[index] = mutate_bytes(rng, records[index])
    framed = wandb_frame(records)
    if rng.random() < 0.1:
        framed = mutate_bytes(rng, framed)
    return framed


def _pickle_opcodes(rng: random.Random, data: bytes) -> bytes:
    """Opcodes spliced in before STOP: containers, memo, and long integers."""
    ops = [
        b"]",
        b"}",
        b"(",
        b"e",
        b"u",
        b"\x8f",
        b"\x90",
        b"\x94",
        b"h\x00",
        b"t",
        b"N",
        b"K\x01",
        b"s",
        b"\x8a\xff" + b"\xff" * 255,
        b"\x8b\xff\xff\x00\x00" + b"\xff" * 8,
        b"L" + b"9" * 5000 + b"L\n",
        b"0",
        b"2",
    ]
    splice = b"".join(rng.choice(ops) for _ in range(rng.randint(1, 20)))
    at = max(0, data.rfind(b".")) if rng.random() < 0.5 else rng.randrange(len(data) + 1)
    return data[:at] + splice + data[at:]


def _torch_pickle(rng: random.Random, data: bytes) -> bytes:
    if data[:2] == b"PK":
        return _rezip(rng, data)
    return _pickle_opcodes(rng, data) if rng.random() < 0.5 else mutate_bytes(rng, data)


def _crc_free(rng: random.Random, data: bytes) -> bytes:
    return mutate_bytes(rng, data)


def _npz(rng: random.Random, data: bytes) -> bytes:
    return _rezip(rng, data) if rng.random() < 0.8 else mutate_bytes(rng, data)


def _pickle(rng: random.Random, data: bytes) -> bytes:
    return _pickle_opcodes(rng, data) if rng.random() < 0.5 else mutate_bytes(rng, data)


_JSON_INT = re.compile(rb"-?\d+")
_JSON_VALUES = [b"0", b"-1", b"7", b"4294967296", b"281474976710656", b"1e400", b'"x"', b"null", b"[]", b"{}"]


def _json_numbers(rng: random.Random, data: bytes) -> bytes:
    """One number of a JSON text (a dtype, a size, a stride, an offset) set to an interesting value."""
    found = list(_JSON_INT.finditer(data))
    if not found or rng.random() < 0.2:
        return mutate_bytes(rng, data)
    match = rng.choice(found)
    return data[: match.start()] + rng.choice(_JSON_VALUES) + data[match.end() :]


def _torch_archive(rng: random.Random, data: bytes) -> bytes:
    """A torch writer's archive (TorchScript, PT2): one member mutated as what it is (a JSON config's
    numbers, a pickle's opcodes, other bytes) and the archive written again, each member stored or
    compressed as it was; or its bytes mutated as they stand."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [(info, archive.read(info)) for info in archive.infolist()]
    except Exception:  # noqa: BLE001 - a mutated archive the writer side cannot read: mutate bytes
        return mutate_bytes(rng, data)
    if not members or rng.random() < 0.15:
        return mutate_bytes(rng, data)
    index = rng.randrange(len(members))
    info, payload = members[index]
    if info.filename.endswith(".json"):
        payload = _json_numbers(rng, payload)
    elif info.filename.endswith("pkl") and rng.random() < 0.6:
        payload = _pickle_opcodes(rng, payload)
    else:
        payload = mutate_bytes(rng, payload)
    members[index] = (info, payload)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for old, content in members:
            entry = zipfile.ZipInfo(old.filename)
            entry.compress_type = old.compress_type
            archive.writestr(entry, content)
    return out.getvalue()


HDF5_SIGNATURES = (b"OHDR", b"OCHK", b"TREE", b"HEAP", b"SNOD", b"GCOL", b"FRHP", b"FHDB", b"FHIB")
HDF5_SIGNATURES += (b"BTHD", b"BTIN", b"BTLF", b"FAHD", b"FADB")


def _hdf5(rng: random.Random, data: bytes) -> bytes:
    """A structure's fields aimed at: an 8-byte address or length after a signature (or in a version 1
    object header, which has none) set to an interesting value, or bytes mutated near a structure."""
    places = [at for signature in HDF5_SIGNATURES for at in _occurrences(data, signature)]
    if not places or rng.random() < 0.2:
        return mutate_bytes(rng, data)
    start = rng.choice(places)
    window = data[start : start + 96]
    if rng.random() < 0.6 and len(window) >= 16:
        at = start + rng.randrange(4, len(window) - 8)
        value = rng.choice(INTERESTING_INTS) % (1 << 64)
        return data[:at] + value.to_bytes(8, "little") + data[at + 8 :]
    return data[:start] + mutate_bytes(rng, window) + data[start + 96 :]


def _occurrences(data: bytes, needle: bytes) -> list[int]:
    found, at = [], data.find(needle)
    while at >= 0 and len(found) < 256:
        found.append(at)
        at = data.find(needle, at + 1)
    return found


def _framed_or_bytes(framed: Mutator) -> Mutator:
    def mutate(rng: random.Random, data: bytes) -> bytes:
        return framed(rng, data) if rng.random() < 0.85 else mutate_bytes(rng, data)

    return mutate


SQLITE_HEADER_FIELDS = [
    *[(16, 2), (18, 1), (19, 1), (20, 1), (21, 3), (24, 4), (28, 4), (32, 4)],
    *[(36, 4), (44, 4), (52, 4), (56, 4), (64, 4), (92, 4), (96, 4)],
]
"""(offset, width) of the SQLite header's fields: page size, versions, reserved bytes, payload fractions,
change counter, page count, freelist, schema format, vacuum settings, encoding, version-valid-for."""


def _sqlite(rng: random.Random, data: bytes) -> bytes:
    """A header field set to an interesting number, or bytes mutated inside one page (the file keeps its
    length, so that SQLite reads the page rather than stopping at a short file)."""
    if len(data) < 512 or rng.random() < 0.1:
        return mutate_bytes(rng, data)
    out = bytearray(data)
    if rng.random() < 0.3:
        offset, width = rng.choice(SQLITE_HEADER_FIELDS)
        out[offset : offset + width] = (rng.choice(INTERESTING_INTS) % (1 << (8 * width))).to_bytes(
            width, "big"
        )
        if rng.random() < 0.5:  # the page count trusted: version-valid-for equal to the change counter
            out[92:96] = out[24:28]
        return bytes(out)
    page = int.from_bytes(data[16:18], "big") or 65536
    start = rng.randrange(max(1, len(data) // page)) * page
    piece = mutate_bytes(rng, bytes(out[start : start + page]))[:page]
    out[start : start + len(piece)] = piece
    return bytes(out)


_UBJSON_MARKERS = b"ZNTFiUIlLdDHCS[]{}$#"


def _ubjson(rng: random.Random, data: bytes) -> bytes:
    """A length or count (the 8 bytes after an ``L`` length marker) set to an interesting number, a
    marker replaced by another, or bytes mutated."""
    lengths = _occurrences(data, b"L")
    choice = rng.random()
    if lengths and choice < 0.45:
        at = rng.choice(lengths) + 1
        value = rng.choice(INTERESTING_INTS) % (1 << 64)
        return data[:at] + value.to_bytes(8, "big") + data[at + 8 :]
    markers = [at for at, byte in enumerate(data[:65536]) if byte in _UBJSON_MARKERS]
    if markers and choice < 0.8:
        at = rng.choice(markers)
        return data[:at] + bytes([rng.choice(_UBJSON_MARKERS)]) + data[at + 1 :]
    return mutate_bytes(rng, data)


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd(rng: random.Random, data: bytes) -> bytes:
    """What a frame holds mutated and compressed again at another level (streamed or not, with or
    without a checksum); its checksum flag cleared so that damage reaches past it; a block header set
    to an interesting size or type; frames repeated or cut; or bytes mutated."""
    choice = rng.random()
    if choice < 0.3:
        try:
            import zstandard

            from tests.fuzz.seeds import zstd_frames

            inner = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 20)
        except Exception:  # noqa: BLE001 - not a frame the library reads (or no library): mutate bytes
            return mutate_bytes(rng, data)
        level = rng.choice([-7, -1, 1, 3, 6, 12, 19])
        return zstd_frames(
            mutate_bytes(rng, inner),
            level,
            checksum=rng.random() < 0.5,
            streamed=rng.random() < 0.3,
        )
    frames = _occurrences(data, _ZSTD_MAGIC)
    if frames and choice < 0.45:  # no checksum: the frame's last 4 bytes read as a block's, or dropped
        at = rng.choice(frames) + 4
        if at < len(data):
            return data[:at] + bytes([data[at] & ~4]) + data[at + 1 : len(data) - 4 * (rng.random() < 0.7)]
    start = rng.choice(frames) + 5 if frames else len(data) + 1
    if start <= len(data) and choice < 0.75:  # a 3-byte block header (after a frame header) set anew
        at = rng.randrange(start, len(data) + 1)
        size = rng.choice(
            [0, 1, 3, 127, 128, 4096, (128 << 10) - 1, 128 << 10, (128 << 10) + 1, (1 << 21) - 1]
        )
        header = (size << 3 | rng.randrange(4) << 1 | rng.randrange(2)).to_bytes(3, "little")
        return data[:at] + header + data[at + 3 :]
    if choice < 0.85:
        return data * rng.randint(2, 3) if rng.random() < 0.5 else data[: rng.randrange(len(data) + 1)]
    return mutate_bytes(rng, data)


def _decompressed(data: bytes) -> tuple[Callable[[bytes], bytes], bytes] | None:
    """The compressor that wrote ``data`` and what it holds (at most 1 MiB of it), or None."""
    import bz2
    import lzma
    import zlib

    codecs: list[tuple[bytes, Callable[[bytes], bytes], Callable[[], Any]]] = [
        (b"\x1f\x8b", lambda b: gzip.compress(b, mtime=0), lambda: zlib.decompressobj(wbits=31)),
        (b"BZh", bz2.compress, bz2.BZ2Decompressor),
        (b"\xfd7zXZ", lzma.compress, lzma.LZMADecompressor),
    ]
    for magic, compress, decompressor in codecs:
        if data.startswith(magic):
            try:
                return compress, decompressor().decompress(data, 1 << 20)
            except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error):
                return None
    return None


def _compressed(rng: random.Random, data: bytes) -> bytes:
    """What the stream holds mutated and compressed again (by its own codec or another), or the stream's
    own bytes mutated (its header, its checksum, its blocks)."""
    found = _decompressed(data)
    if found is None or rng.random() < 0.25:
        return mutate_bytes(rng, data)
    compress, inner = found
    if rng.random() < 0.2:
        compress = rng.choice([lambda b: gzip.compress(b, mtime=7), _bz2_compress, _xz_compress])
    result = compress(mutate_bytes(rng, inner))
    return result * rng.randint(2, 4) if rng.random() < 0.1 else result  # several members, one after another


def _bz2_compress(data: bytes) -> bytes:
    import bz2

    return bz2.compress(data)


def _xz_compress(data: bytes) -> bytes:
    import lzma

    return lzma.compress(data)


MUTATORS: dict[str, Mutator] = {
    "npy": _crc_free,
    "npz": _npz,
    "safetensors": _framed_or_bytes(_safetensors_header),
    "torch": _torch_pickle,
    "pickle": _pickle,
    "text": _crc_free,
    "tensorboard": _framed_or_bytes(_tensorboard),
    "wandb": _framed_or_bytes(_wandb),
    "mlflow": _crc_free,
    "hdf5": _hdf5,
    "sqlite": _sqlite,
    "compressed": _compressed,
    "ubjson": _ubjson,
    "zstd": _zstd,
    "pt2": _torch_archive,
    "torchscript": _torch_archive,
}


# --- torch Distributed Checkpoint: the index's values, and a shard's items in place -------------------

DCP_STRINGS = [
    "../x.distcp",
    "/tmp/x.distcp",
    "sub/__0_0.distcp",
    "__1_0.distcp",
    "__0_0.distcp",
    ".metadata",
    "",
    "x" * 70_000,
    "model.weight",
    "torch.distributed.checkpoint.metadata",
    "torch.distributed.checkpoint.filesystem",
    "posix",
    "system",
    "builtins",
    "eval",
    "float64",
    "bfloat16",
    "int8",
    "quint8",
    "sparse_coo",
    "Size",
    "MetadataIndex",
    "BytesStorageMetadata",
    "transform_descriptors",
    "chunks",
    "relative_path",
]
"""Names a hostile index would spell: shards outside the folder, classes, dtypes and fields of DCP's."""

_INT_OPS = frozenset({"BININT1", "BININT2", "BININT", "LONG1", "INT", "LONG"})
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"})
_GET_OPS = frozenset({"BINGET", "LONG_BINGET", "GET"})


def _pickle_ops(data: bytes) -> list[tuple[str, Any, bytes]] | None:
    """A pickle's opcodes (name, argument, bytes), without its frames (optional: without them an opcode
    may change its length); what follows STOP is kept as one more. None if it does not parse."""
    import pickletools

    try:
        found = list(pickletools.genops(data))
    except Exception:  # noqa: BLE001 - a mutated pickle: mutated again as bytes
        return None
    ops = []
    for number, (op, arg, pos) in enumerate(found):
        end = found[number + 1][2] if number + 1 < len(found) else pos + 1  # the last is STOP
        if op.name != "FRAME":
            ops.append((op.name, arg, data[pos:end]))
    last = found[-1][2] + 1 if found else 0
    if data[last:]:
        ops.append(("TRAILING", None, data[last:]))
    return ops


def _int_op(value: int) -> bytes:
    import pickle

    if 0 <= value < 1 << 8:
        return b"K" + bytes((value,))
    if 0 <= value < 1 << 16:
        return b"M" + value.to_bytes(2, "little")
    if -(1 << 31) <= value < 1 << 31:
        return b"J" + value.to_bytes(4, "little", signed=True)
    raw = pickle.encode_long(value)
    return b"\x8a" + bytes((len(raw),)) + raw


def _string_op(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return (b"\x8c" + bytes((len(raw),)) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))) + raw


def _pickle_values(rng: random.Random, data: bytes) -> bytes:
    """One to three of a pickle's values rewritten as opcodes of their own kind: an integer (a size, an
    offset, a length) set to an interesting one or moved by one, a string (a shard's name, an fqn, a
    dtype, a class) swapped for a hostile one or another the pickle holds, a memo reference pointed at
    another object (shared, or its own container: a cycle); or an opcode dropped or repeated."""
    ops = _pickle_ops(data)
    if not ops:
        return mutate_bytes(rng, data)
    by_kind = {
        kind: [n for n, (name, _, _) in enumerate(ops) if name in names]
        for kind, names in (("int", _INT_OPS), ("str", _STRING_OPS), ("get", _GET_OPS))
    }
    strings = [ops[n][1] for n in by_kind["str"]]
    memoized = sum(name == "MEMOIZE" for name, _, _ in ops)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choices(["int", "str", "get", "op"], [6, 2, 1, 1])[0]
        if (kind != "op" and not by_kind[kind]) or (kind == "get" and not memoized):
            kind = "op"
        number = rng.choice(by_kind[kind]) if kind != "op" else rng.randrange(len(ops))
        name, arg, raw = ops[number]
        if kind == "int":
            value = rng.choice([*INTERESTING_INTS, arg + 1, arg - 1, -1, 2 * arg, 1 << 40, -(1 << 62)])
            raw = _int_op(int(value))
        elif kind == "str":
            raw = _string_op(rng.choice(DCP_STRINGS + strings))
        elif kind == "get":
            raw = b"j" + struct.pack("<I", rng.randrange(memoized))
        else:
            raw = b"" if rng.random() < 0.7 else raw * 2
        ops[number] = (name, arg, raw)
    return b"".join(raw for _, _, raw in ops)


def _dcp_metadata(rng: random.Random, data: bytes) -> bytes:
    choice = rng.random()
    if choice < 0.8:
        return _pickle_values(rng, data)
    return _pickle_opcodes(rng, data) if choice < 0.9 else mutate_bytes(rng, data)


def _dcp_items(data: bytes) -> list[tuple[int, int]]:
    """Where a shard's items lie, each a torch.save zip archive ending in its end record."""
    items, start = [], 0
    for end_record in _occurrences(data, b"PK\x05\x06"):
        if end_record + 22 > len(data):
            break
        (comment,) = struct.unpack_from("<H", data, end_record + 20)
        end = end_record + 22 + comment
        items.append((start, end))
        start = end
    return items


def _member_in_place(rng: random.Random, item: bytes) -> bytes:
    """One member's stored bytes mutated without changing their length, its CRC set again in its local
    header and its directory entry: the item, and every item after it, stays where the index says."""
    import zlib

    try:
        with zipfile.ZipFile(io.BytesIO(item)) as archive:
            members = [i for i in archive.infolist() if i.compress_type == zipfile.ZIP_STORED and i.file_size]
    except Exception:  # noqa: BLE001 - a damaged item: its bytes mutated
        return mutate_bytes(rng, item)
    if not members:
        return mutate_bytes(rng, item)
    info = rng.choice(members)
    out = bytearray(item)
    name_length, extra_length = struct.unpack_from("<HH", out, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    payload = bytes(out[start : start + info.file_size])
    for _ in range(rng.randint(1, 3)):
        payload = rng.choice([_flip, _set_int, _set_int])(rng, payload)
    out[start : start + len(payload)] = payload
    crc = zlib.crc32(payload)
    struct.pack_into("<I", out, info.header_offset + 14, crc)
    if info.flag_bits & 0x08:  # a data descriptor follows the bytes (torch writes one), signed or not
        after = start + len(payload)
        struct.pack_into("<I", out, after + 4 if out[after : after + 4] == b"PK\x07\x08" else after, crc)
    for entry in _occurrences(bytes(out), b"PK\x01\x02"):
        if struct.unpack_from("<I", out, entry + 42)[0] == info.header_offset:
            struct.pack_into("<I", out, entry + 16, crc)
    return bytes(out)


def _item_rewritten(rng: random.Random, item: bytes) -> bytes:
    """The item's pickle with its values mutated (``_pickle_values``) or another member mutated, the
    archive written again; half the time cut or padded with zeros to its old length."""
    try:
        with zipfile.ZipFile(io.BytesIO(item)) as archive:
            members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    except Exception:  # noqa: BLE001 - a damaged item: its bytes mutated
        return mutate_bytes(rng, item)
    if not members:
        return item
    number = next((n for n, (name, _) in enumerate(members) if name.endswith("data.pkl")), 0)
    if rng.random() < 0.3:
        number = rng.randrange(len(members))
    name, payload = members[number]
    mutate = _pickle_values if name.endswith("data.pkl") else mutate_bytes
    members[number] = (name, mutate(rng, payload))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member, content in members:
            archive.writestr(member, content)
    result = out.getvalue()
    if rng.random() < 0.5:
        result = result[: len(item)] + bytes(max(0, len(item) - len(result)))
    return result


def _dcp_shard(rng: random.Random, data: bytes) -> bytes:
    """One item of the shard mutated in place (the index still places every item), or rewritten, or the
    shard's bytes mutated."""
    items = _dcp_items(data)
    if not items or rng.random() < 0.15:
        return mutate_bytes(rng, data)
    start, end = rng.choice(items)
    mutate = _member_in_place if rng.random() < 0.6 else _item_rewritten
    return data[:start] + mutate(rng, data[start:end]) + data[end:]


MUTATORS["dcp-metadata"] = _dcp_metadata
MUTATORS["dcp-shard"] = _dcp_shard
MUTATORS.update(ocdbt_seeds.MUTATORS)
