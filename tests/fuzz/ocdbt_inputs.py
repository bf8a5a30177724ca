"""Seeds and mutators for TensorStore's OCDBT databases (``ocdbt-manifest``, ``ocdbt-data``).

Each seed is a whole database folder: ``manifest.ocdbt`` and its ``d/`` data files. Hand-written ones
(``tests.ocdbt_units``: a leaf, an interior node over two leaves, a zarr array split across inline and
out-of-line chunks) keep a data file at the fixed name ``ocdbt-data`` mutates; TensorStore's own (zarr
arrays compressed with zstd, several commits) seed ``ocdbt-manifest``. The mutator finds the encoded
units in the file (manifest, version tree and B+tree nodes, by their magic numbers and lengths), undoes a
unit's zstd, mutates its body (bytes, or a varint set to an interesting number) and writes it again
uncompressed with its length and CRC-32C right, so that mutations reach past the checksum; the same
length is kept half the time, so that the references into the file still land.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests import ocdbt_units as units
from tests.wire import varint

MAGICS = (0x0CDB3A2A, 0x0CDB1234, 0x0CDB20DE)


def _hand_seeds() -> list[dict[str, bytes]]:
    small = units.small_database()
    left = units.leaf([], [(b"a/x", b"1"), (b"a/y", b"two")])
    right = units.leaf([units.DATA_FILE], [(b"b", (0, 0, 4)), (b"c", b'{"k": [1, 2]}')])
    payload = b"\x00\x01\x02\x03"
    place = len(payload)
    root = units.interior(
        [units.DATA_FILE],
        1,
        [(b"a", (0, place, len(left))), (b"b", (0, place + len(left), len(right)))],
    )
    data = payload + left + right + root
    tree = {
        "manifest.ocdbt": units.manifest([units.DATA_FILE], (0, len(data) - len(root), len(root)), height=1),
        units.DATA_FILE: data,
    }
    return [small, tree]


def _tensorstore_seeds() -> list[dict[str, bytes]]:
    """Databases TensorStore writes: two arrays in two commits, and a zarr v3 array."""
    import tempfile

    try:
        import numpy as np
        import tensorstore as ts
    except ImportError:
        return []
    seeds = []
    with tempfile.TemporaryDirectory() as folder:
        base = {"driver": "ocdbt", "base": f"file://{folder}/"}
        for name, value in {
            "kernel": np.arange(12, dtype=np.float32).reshape(3, 4),
            "bias": np.ones(4),
        }.items():
            metadata = {
                "compressor": {"id": "zstd", "level": 1},
                "shape": list(value.shape),
                "dtype": value.dtype.str,
            }
            spec = {
                "driver": "zarr",
                "kvstore": {**base, "path": f"{name}/"},
                "metadata": metadata,
                "create": True,
            }
            ts.open(spec).result().write(value).result()
        seeds.append(
            {p.relative_to(folder).as_posix(): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}
        )
    return seeds


def _units(data: bytes) -> list[tuple[int, int, int]]:
    """Where each encoded unit lies in the file: start, end and magic."""
    found = []
    for magic in MAGICS:
        start = data.find(magic.to_bytes(4, "big"))
        while start >= 0:
            end = start + int.from_bytes(data[start + 4 : start + 12], "little")
            if start + 16 <= end <= len(data):
                found.append((start, end, magic))
            start = data.find(magic.to_bytes(4, "big"), start + 1)
    return found


def mutate_units(rng: random.Random, data: bytes) -> bytes:
    from reprobox.guest.hashing._zstd import decompress
    from tests.fuzz.mutate import INTERESTING_INTS, mutate_bytes

    found = _units(data)
    if not found or rng.random() < 0.15:
        return mutate_bytes(rng, data)
    start, end, magic = rng.choice(found)
    try:
        method, body = units.unwrapped(data[start:end])
        body = decompress(body, max_output=1 << 22) if method == 1 else body
    except ValueError:
        return mutate_bytes(rng, data)
    if rng.random() < 0.4 and body:
        at = rng.randrange(len(body))
        body = body[:at] + varint(rng.choice(INTERESTING_INTS)) + body[at + 1 :]
    else:
        body = mutate_bytes(rng, body)
    unit = units.wrap(magic, body)
    kept = len(body) - (len(unit) - (end - start))  # the body's length that keeps the unit's
    if rng.random() < 0.5 and kept >= 0 and kept != len(body):
        unit = units.wrap(magic, body[:kept].ljust(kept, b"\0"))
    return data[:start] + unit + data[end:]


BUILDERS = {
    "ocdbt-manifest": lambda: [*_hand_seeds(), *_tensorstore_seeds()],
    "ocdbt-data": _hand_seeds,
}
MUTATORS = {"ocdbt-manifest": mutate_units, "ocdbt-data": mutate_units}
