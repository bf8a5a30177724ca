"""TFRecord framing (TensorBoard's event files): where each record's data lies, every checksum checked.

A record is a uint64 length, the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
data. The lengths are read one after another (each says where the next record begins); the checksums are
then computed all at once (``_crc32c.masked_crc32c_many``, one length at a time), which is what makes a
log of a million small events cheap to check. Errors are those of a reader that takes one record at a
time: the first record that fails is named, and only after every record before it was given.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator

from reprobox.guest.hashing._bounds import check_cpu_budget
from reprobox.guest.hashing._crc32c import masked_crc32c, masked_crc32c_many, words_at

HEADER_BYTES = 12  # the length and its checksum
FOOTER_BYTES = 4  # the data's checksum

_LENGTH = struct.Struct("<Q")
_CHECKSUM = struct.Struct("<I")


def record_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Each record's data as ``(start, end)`` in ``data``; ValueError names the first record that fails,
    after the records before it."""
    positions, lengths, failure = _frame(data)
    failed = _first_checksum_failure(data, positions, lengths)
    if failed is not None:
        index, failure = failed
        del positions[index:], lengths[index:]
    for position, length in zip(positions, lengths, strict=True):
        yield position + HEADER_BYTES, position + HEADER_BYTES + length
    if failure is not None:
        raise failure


def _frame(data: bytes) -> tuple[array[int], array[int], ValueError | None]:
    """Each record's position and length, up to the first whose length does not fit (and why it does not)."""
    positions, lengths = array("q"), array("q")
    pos, size = 0, len(data)
    unpack_length = _LENGTH.unpack_from
    while pos < size:
        if size - pos < HEADER_BYTES:
            return (
                positions,
                lengths,
                ValueError(f"cut short: {size - pos} bytes at byte {pos} are not a whole record header"),
            )
        (length,) = unpack_length(data, pos)
        if length > size - pos - HEADER_BYTES - FOOTER_BYTES:
            if masked_crc32c(data[pos : pos + 8]) != _CHECKSUM.unpack_from(data, pos + 8)[0]:
                return positions, lengths, _length_fails(pos)
            left = max(0, size - pos - HEADER_BYTES - FOOTER_BYTES)
            return (
                positions,
                lengths,
                ValueError(f"the record at byte {pos} claims {length} bytes, more than the {left} left"),
            )
        positions.append(pos)
        lengths.append(length)
        pos += HEADER_BYTES + FOOTER_BYTES + length
    return positions, lengths, None


def _first_checksum_failure(
    data: bytes, positions: array[int], lengths: array[int]
) -> tuple[int, ValueError] | None:
    """The first record (its index and the error) whose length or data fails its checksum, if any."""
    import numpy as np

    if not positions:
        return None
    starts = np.frombuffer(positions, dtype=np.int64)
    sizes = np.frombuffer(lengths, dtype=np.int64)
    words = words_at(data)
    length_ok = masked_crc32c_many(data, starts, 8) == words[starts + 8]
    data_ok = np.ones(len(starts), dtype=bool)
    order = np.argsort(sizes, kind="stable")
    bounds = np.flatnonzero(np.diff(sizes[order])) + 1
    for checked, lanes in enumerate(np.split(order, bounds)):  # one length at a time
        check_cpu_budget(f"the checksums of records of {checked} lengths checked")
        body = starts[lanes] + HEADER_BYTES
        length = int(sizes[lanes[0]])
        data_ok[lanes] = masked_crc32c_many(data, body, length) == words[body + length]
    failing = np.flatnonzero(~(length_ok & data_ok))
    if not len(failing):
        return None
    index = int(failing[0])
    pos = positions[index]
    if not length_ok[index]:
        return index, _length_fails(pos)
    return index, ValueError(f"the record at byte {pos}: the checksum of its data fails")


def _length_fails(pos: int) -> ValueError:
    return ValueError(f"the record at byte {pos}: the checksum of its length fails")
