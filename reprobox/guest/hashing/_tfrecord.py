"""TFRecord framing (TensorBoard's event files): where each record's data lies, every checksum checked.

A record is a uint64 length, the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
data. The lengths are read one after another (each says where the next record begins); the checksums are
then computed all at once (``_crc32c.masked_crc32c_many``, one length at a time), which is what makes a
log of a million small events cheap to check. Errors are those of a reader that takes one record at a
time: the first record that fails is named, and only after every record before it was given.
"""

from __future__ import annotations

import itertools
import struct
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

from reprobox.guest.hashing._bounds import check_cpu_budget
from reprobox.guest.hashing._crc32c import masked_crc32c, masked_crc32c_many, words_at

if TYPE_CHECKING:
    import numpy as np

HEADER_BYTES = 12  # the length and its checksum
FOOTER_BYTES = 4  # the data's checksum

_LENGTH = struct.Struct("<Q")
_CHECKSUM = struct.Struct("<I")


def record_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Each record's data as ``(start, end)`` in ``data``; ValueError names the first record that fails,
    after the records before it."""
    import numpy as np

    positions, end, failure = _frame(data)
    check_cpu_budget(f"{len(positions)} records framed")
    starts = np.frombuffer(positions, dtype=np.int64) + HEADER_BYTES
    ends = (np.append(starts[1:] - HEADER_BYTES, end) - FOOTER_BYTES)[: len(starts)]
    failed = _first_checksum_failure(data, starts, ends - starts)
    if failed is not None:
        index, failure = failed
        starts, ends = starts[:index], ends[:index]
    spans = zip(array("q", starts.tobytes()), array("q", ends.tobytes()), strict=True)
    return spans if failure is None else itertools.chain(spans, _raise(failure))


def _frame(data: bytes) -> tuple[array[int], int, ValueError | None]:
    """Each record's position, up to the first whose length does not fit; where the last one ends, and
    why the next one does not fit."""
    positions = array("q")
    append, unpack_length = positions.append, _LENGTH.unpack_from
    pos, size = 0, len(data)
    last_header = size - HEADER_BYTES
    while pos <= last_header:
        end = pos + HEADER_BYTES + FOOTER_BYTES + unpack_length(data, pos)[0]
        if end > size:
            break
        append(pos)
        pos = end
    if pos == size:
        return positions, pos, None
    if pos > last_header:
        return (
            positions,
            pos,
            ValueError(f"cut short: {size - pos} bytes at byte {pos} are not a whole record header"),
        )
    if masked_crc32c(data[pos : pos + 8]) != _CHECKSUM.unpack_from(data, pos + 8)[0]:
        return positions, pos, _length_fails(pos)
    (length,) = _LENGTH.unpack_from(data, pos)
    left = max(0, size - pos - HEADER_BYTES - FOOTER_BYTES)
    return (
        positions,
        pos,
        ValueError(f"the record at byte {pos} claims {length} bytes, more than the {left} left"),
    )


def _first_checksum_failure(
    data: bytes, starts: np.ndarray, lengths: np.ndarray
) -> tuple[int, ValueError] | None:
    """The first record (its index and the error) whose length or data fails its checksum, if any."""
    import numpy as np

    if not len(starts):
        return None
    words = words_at(data)
    length_ok = masked_crc32c_many(data, starts - HEADER_BYTES, 8) == words[starts - FOOTER_BYTES]
    data_ok = np.ones(len(starts), dtype=bool)
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for checked, lanes in enumerate(np.split(order, bounds)):  # one length at a time
        check_cpu_budget(f"the checksums of records of {checked} lengths checked")
        length = int(lengths[lanes[0]])
        data_ok[lanes] = masked_crc32c_many(data, starts[lanes], length) == words[starts[lanes] + length]
    failing = np.flatnonzero(~(length_ok & data_ok))
    if not len(failing):
        return None
    index = int(failing[0])
    pos = int(starts[index]) - HEADER_BYTES
    if not length_ok[index]:
        return index, _length_fails(pos)
    return index, ValueError(f"the record at byte {pos}: the checksum of its data fails")


def _raise(failure: ValueError) -> Iterator[tuple[int, int]]:
    """No record, then the failure: raised when the records before it have been read."""
    yield from ()
    raise failure


def _length_fails(pos: int) -> ValueError:
    return ValueError(f"the record at byte {pos}: the checksum of its length fails")
