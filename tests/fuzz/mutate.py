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


def varint(value: int) -> bytes:
    """A protobuf base-128 varint (the shortest spelling)."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


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
    "pt2": _torch_archive,
    "torchscript": _torch_archive,
}
