"""A Zstandard block's literals section (RFC 8878, section 3.1.1.3.1): raw, RLE, or Huffman-coded in one
or four streams, with a tree described by direct or FSE-compressed weights, or the previous block's
(treeless).

A Huffman table is two lists of ``2**max_bits`` entries (the symbol, its code's length) looked up by the
stream's next ``max_bits`` bits; a stream is read backwards from its last byte a window of bytes at a
time, as many symbols from each as its bits surely hold, so that the loop reads no bounds. The sizes a
header declares are checked against the block's maximum before anything is allocated, and every stream
must end exactly at its first bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprobox.guest.hashing._zstd_fse import ZstdError, read_distribution

MAX_BLOCK = 128 << 10
"""The most one block regenerates (Block_Maximum_Size)."""
MAX_CODE_BITS = 11
_WINDOW_BYTES = 32
_PAD = bytes(2)  # below a stream's first bit: zeros to peek at, never to consume (a code is at most 11 bits)
_PAD_BITS = 8 * len(_PAD)
_SIZE_BITS = (10, 10, 14, 18)  # compressed literals: the sizes' widths by Size_Format
_HEADER_BYTES = (3, 3, 4, 5)


@dataclass(frozen=True, slots=True)
class HuffmanTable:
    max_bits: int
    symbols: list[int]
    lengths: list[int]


def read_literals(
    data: bytes, at: int, end: int, previous: HuffmanTable | None
) -> tuple[bytes | bytearray, int, HuffmanTable | None]:
    """The literals, the offset after the section, and the Huffman table later blocks may repeat."""
    if at >= end:
        raise ZstdError(f"a block ends before its literals, at byte {at}")
    kind, size_format = data[at] & 3, (data[at] >> 2) & 3
    if kind < 2:
        literals, at = _stored(data, at, end, kind, size_format)
        return literals, at, previous
    header = _HEADER_BYTES[size_format]
    if at + header > end:
        raise ZstdError(f"a literals header at byte {at} is cut short")
    fields = int.from_bytes(data[at : at + header], "little")
    width = _SIZE_BITS[size_format]
    size = (fields >> 4) & ((1 << width) - 1)
    compressed = fields >> (4 + width)
    _check_size(size, at)
    start, stop = at + header, at + header + compressed
    if stop > end:
        raise ZstdError(f"the compressed literals at byte {at} run past their block")
    if kind == 2:
        table, start = read_tree(data, start, stop)
    elif previous is None:
        raise ZstdError(f"the literals at byte {at} repeat a Huffman tree no earlier block described")
    else:
        table = previous
    return _streams(data, start, stop, size, streams=1 if size_format == 0 else 4, table=table), stop, table


def _stored(data: bytes, at: int, end: int, kind: int, size_format: int) -> tuple[bytes, int]:
    """Raw or RLE literals (a size of 5, 12 or 20 bits) and the offset after them."""
    header = (1, 2, 1, 3)[size_format]
    if at + header > end:
        raise ZstdError(f"a literals header at byte {at} is cut short")
    fields = int.from_bytes(data[at : at + header], "little")
    size = fields >> 3 if header == 1 else fields >> 4
    _check_size(size, at)
    at += header
    if kind == 0:
        if at + size > end:
            raise ZstdError(f"the raw literals at byte {at} run past their block")
        return data[at : at + size], at + size
    if at >= end:
        raise ZstdError(f"the RLE literals at byte {at} run past their block")
    return data[at : at + 1] * size, at + 1


def _streams(
    data: bytes, start: int, stop: int, size: int, *, streams: int, table: HuffmanTable
) -> bytearray:
    """``size`` literals from one stream at ``data[start:stop]``, or four after their jump table."""
    literals = bytearray()
    if streams == 1:
        decode_stream(data[start:stop], size, table, literals)
        return literals
    if start + 6 > stop:
        raise ZstdError(f"the literals' jump table at byte {start} is cut short")
    one, two, three = (int.from_bytes(data[start + i : start + i + 2], "little") for i in (0, 2, 4))
    segment = (size + 3) // 4
    if 3 * segment > size:
        raise ZstdError(f"the literals at byte {start} are too few ({size}) for four streams")
    bounds = [start + 6, start + 6 + one, start + 6 + one + two, start + 6 + one + two + three, stop]
    if bounds[3] > stop:
        raise ZstdError(f"the literals' jump table at byte {start} points past its streams")
    for index, count in enumerate((segment, segment, segment, size - 3 * segment)):
        decode_stream(data[bounds[index] : bounds[index + 1]], count, table, literals)
    return literals


def _check_size(size: int, at: int) -> None:
    if size > MAX_BLOCK:
        raise ZstdError(f"the literals at byte {at} declare {size} bytes, more than a block holds")


def read_tree(data: bytes, at: int, end: int) -> tuple[HuffmanTable, int]:
    """The Huffman table described at ``data[at:end]`` and the offset after its description."""
    if at >= end:
        raise ZstdError(f"a Huffman tree description at byte {at} is cut short")
    header = data[at]
    if header >= 128:  # direct: 4 bits a weight
        count = header - 127
        stop = at + 1 + (count + 1) // 2
        if stop > end:
            raise ZstdError(f"the Huffman weights at byte {at} run past their literals")
        weights = [w for byte in data[at + 1 : stop] for w in (byte >> 4, byte & 15)][:count]
    else:
        stop = at + 1 + header
        if header == 0 or stop > end:
            raise ZstdError(f"the Huffman weights at byte {at} run past their literals")
        weights = _fse_weights(data, at + 1, stop)
    return huffman_table(weights, at), stop


def _fse_weights(data: bytes, at: int, end: int) -> list[int]:
    """Weights coded by two interleaved FSE states, until the bits run out (RFC 8878, 4.2.1.2)."""
    table, start = read_distribution(data, at, end, max_log=6, max_symbol=255, what="Huffman weight")
    stream = data[start:end]
    if not stream or stream[-1] == 0:
        raise ZstdError(f"the Huffman weights' bitstream at byte {start} has no end mark")
    value = int.from_bytes(stream, "little")
    pos = len(stream) * 8 - 9 + stream[-1].bit_length()
    symbols, bits, base = table.symbols, table.bits, table.base

    def read(count: int) -> int:  # past the first bit: zeros, and ``pos`` below 0 says so
        nonlocal pos
        pos -= count
        return ((value >> pos) if pos >= 0 else (value << -pos)) & ((1 << count) - 1)

    log = table.accuracy_log
    states = [read(log), read(log)]
    weights: list[int] = []
    turn = 0
    while len(weights) < 255:
        state = states[turn]
        weights.append(symbols[state])
        states[turn] = base[state] + read(bits[state])
        turn ^= 1
        if pos < 0:
            weights.append(symbols[states[turn]])
            return weights
    raise ZstdError(f"the Huffman weights at byte {at} decode to more than 255")


def huffman_table(weights: list[int], at: int) -> HuffmanTable:
    """The decoding table of the weights given and the last one they imply (RFC 8878, 4.2.1.3)."""
    if any(w > MAX_CODE_BITS for w in weights):
        raise ZstdError(f"a Huffman tree at byte {at} has a weight over {MAX_CODE_BITS}")
    total = sum(1 << w >> 1 for w in weights)
    max_bits = total.bit_length()
    rest = (1 << max_bits) - total
    if total == 0 or max_bits > MAX_CODE_BITS or rest & (rest - 1):
        raise ZstdError(f"the Huffman weights at byte {at} describe no complete tree")
    weights = [*weights, rest.bit_length()]
    counts = [0] * (max_bits + 1)
    for weight in weights:
        counts[weight] += 1
    starts = [0] * (max_bits + 2)
    for weight in range(1, max_bits + 1):
        starts[weight + 1] = starts[weight] + (counts[weight] << (weight - 1))
    size = 1 << max_bits
    symbols, lengths = [0] * size, [0] * size
    for symbol, weight in enumerate(weights):
        if weight:
            first, span = starts[weight], 1 << (weight - 1)
            symbols[first : first + span] = [symbol] * span
            lengths[first : first + span] = [max_bits + 1 - weight] * span
            starts[weight] = first + span
    return HuffmanTable(max_bits, symbols, lengths)


def decode_stream(stream: bytes, count: int, table: HuffmanTable, out: bytearray) -> None:
    """``count`` symbols of one backward stream appended to ``out``; the stream must end exactly."""
    if not stream or stream[-1] == 0:
        raise ZstdError("a Huffman stream has no end mark")
    data = _PAD + stream
    pos = len(data) * 8 - 9 + stream[-1].bit_length()  # bits below the end mark
    peek = table.max_bits
    mask = (1 << peek) - 1
    symbols, lengths = table.symbols, table.lengths
    append = out.append
    left = count
    while left > 0:
        if pos < _PAD_BITS:
            raise ZstdError("a Huffman stream ends before its symbols do")
        high = (pos + 7) >> 3
        low = high - _WINDOW_BYTES if high > _WINDOW_BYTES else 0
        window = int.from_bytes(data[low:high], "little")
        shift = pos - (low << 3) - peek  # where the next code's ``peek`` bits start in the window
        surely = min(left, shift // peek + 1)  # symbols the window holds whatever their lengths
        left -= surely
        for _ in range(surely):
            index = (window >> shift) & mask
            append(symbols[index])
            shift -= lengths[index]
        pos = shift + peek + (low << 3)
    if pos != _PAD_BITS:
        raise ZstdError("a Huffman stream does not end where its symbols do")
