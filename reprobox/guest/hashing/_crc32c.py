"""CRC-32C (Castagnoli) and TFRecord's masked form, in plain Python and across many records with NumPy.

TensorBoard frames every event with masked CRC-32C checksums. The standard library only has CRC-32 (IEEE),
and a compiled package for one checksum is not worth a dependency of the guest and the controller. One
checksum (``crc32c``) is table-driven, eight bytes a Python step: under 10 MB a second, and microseconds
for even the smallest record. An event file holds up to millions of small records, so their checksums are
computed many at once (``masked_crc32c_many``): the records of one length side by side as the lanes of
NumPy arrays, four bytes of every lane a step, about 100 MB a second over a log of scalars. A length that
few records share (a long image, an audio clip) is still checked one record at a time in plain Python,
which is why event files are read as values only up to a size cap (``_tensorboard.MAX_EVENT_FILE_BYTES``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_POLY = 0x82F63B78  # Castagnoli, reflected
_MASK_DELTA = 0xA282EAD8


def _tables() -> tuple[list[int], ...]:
    first = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        first.append(crc)
    tables = [first]
    for _ in range(7):
        previous = tables[-1]
        tables.append([(previous[i] >> 8) ^ first[previous[i] & 0xFF] for i in range(256)])
    return tuple(tables)


_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _tables()


def crc32c(data: bytes | memoryview) -> int:
    """The CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    view = memoryview(data)
    whole = len(view) - len(view) % 8
    crc = 0xFFFFFFFF
    t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
    for (word,) in struct.iter_unpack("<Q", view[:whole]):
        x = word ^ crc
        crc = (
            t7[x & 0xFF]
            ^ t6[(x >> 8) & 0xFF]
            ^ t5[(x >> 16) & 0xFF]
            ^ t4[(x >> 24) & 0xFF]
            ^ t3[(x >> 32) & 0xFF]
            ^ t2[(x >> 40) & 0xFF]
            ^ t1[(x >> 48) & 0xFF]
            ^ t0[x >> 56]
        )
    for byte in view[whole:]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's checksum: the CRC-32C rotated right by 15 bits plus a constant, modulo 2**32."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


MIN_LANES = 32
"""Records of one length checked side by side from this many on; fewer are cheaper one at a time."""


def masked_crc32c_many(data: bytes, starts: np.ndarray, length: int) -> np.ndarray:
    """``masked_crc32c(data[start : start + length])`` for each start (int64 array), as a uint32 array."""
    import numpy as np

    if len(starts) < MIN_LANES:
        view = memoryview(data)
        return np.array([masked_crc32c(view[s : s + length]) for s in starts.tolist()], dtype=np.uint32)
    byte_table, low_table, high_table = _numpy_tables()
    buffer = np.frombuffer(data, dtype=np.uint8)
    crcs = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    head = length % 4  # the bytes before a whole number of four-byte words, one at a time
    for offset in range(head):
        crcs = byte_table[(crcs ^ buffer[starts + offset]) & 0xFF] ^ (crcs >> 8)
    words, index = words_at(data), starts + head
    for _ in range(length // 4):
        x = crcs ^ words[index]
        crcs = low_table[x & 0xFFFF] ^ high_table[x >> 16]
        index += 4
    crcs ^= np.uint32(0xFFFFFFFF)
    masked: np.ndarray = ((crcs >> 15) | (crcs << 17)) + np.uint32(_MASK_DELTA)
    return masked


def words_at(data: bytes) -> np.ndarray:
    """``data`` as the little-endian uint32 that begins at each byte: ``words_at(data)[i]`` is bytes i to
    i + 3, one look-up for any offset, aligned or not."""
    import numpy as np

    words: np.ndarray = np.ndarray(shape=(max(0, len(data) - 3),), dtype="<u4", buffer=data, strides=(1,))
    return words


_NUMPY_TABLES: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []


def _numpy_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The byte table, and the slicing-by-four tables merged into two of 65,536 entries each: a word's low
    and high 16 bits are each one look-up."""
    if not _NUMPY_TABLES:
        import numpy as np

        t0, t1, t2, t3 = (np.array(table, dtype=np.uint32) for table in (_T0, _T1, _T2, _T3))
        low, high = np.arange(1 << 16) & 0xFF, np.arange(1 << 16) >> 8
        _NUMPY_TABLES.append((t0, t3[low] ^ t2[high], t1[low] ^ t0[high]))
    return _NUMPY_TABLES[0]
