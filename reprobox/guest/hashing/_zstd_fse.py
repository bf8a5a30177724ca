"""Zstandard's FSE (finite state entropy) tables (RFC 8878, section 4.1): the distribution a frame
describes in a forward bitstream, and the decoding table spread from it.

A table is three lists indexed by state (the symbol, the bits to read for the next state, the next
state's base), so that the decoders' loops index lists rather than call anything. Every count, symbol
and accuracy is checked against the RFC's maxima and the bytes given before a table is built; a
distribution that does not add up to the table's size is refused. ``ZstdError`` is the decompressor's
error for bytes it cannot read, a ValueError like every reader's.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DESCRIPTION_BYTES = 512
"""More than any table description takes (53 symbols of at most 10 bits, and their repeat flags)."""


class ZstdError(ValueError):
    """The bytes are not a Zstandard frame this decompressor reads: damaged, truncated or unsupported."""


@dataclass(frozen=True, slots=True)
class FseTable:
    accuracy_log: int
    symbols: list[int]
    bits: list[int]  # read for the next state
    base: list[int]  # the next state, before those bits are added


def read_distribution(
    data: bytes, at: int, end: int, *, max_log: int, max_symbol: int, what: str
) -> tuple[FseTable, int]:
    """The table described at ``data[at:end]`` and the offset after its description."""
    window = data[at : min(end, at + MAX_DESCRIPTION_BYTES)]
    value = int.from_bytes(window, "little")
    available = len(window) * 8
    if available < 8:
        raise ZstdError(f"the {what} table description at byte {at} is cut short")
    log = (value & 15) + 5
    if log > max_log:
        raise ZstdError(
            f"the {what} table at byte {at} has an accuracy of {log} bits, over the {max_log} allowed"
        )
    pos = 4
    remaining = (1 << log) + 1
    threshold = 1 << log
    width = log + 1
    counts: list[int] = []
    while remaining > 1:
        if len(counts) > max_symbol or pos > available:
            raise ZstdError(f"the {what} table at byte {at} describes more than its symbols or bytes")
        count, pos = _count(value, pos, threshold, remaining, width)
        counts.append(count)
        remaining -= abs(count)
        if remaining < 1:
            raise ZstdError(f"the {what} table at byte {at} has probabilities over its size")
        if count == 0:  # 2-bit flags: how many more symbols have none (3: and another flag follows)
            repeat = 3
            while repeat == 3:
                repeat = (value >> pos) & 3
                pos += 2
                counts.extend([0] * repeat)
                if len(counts) > max_symbol + 1:
                    raise ZstdError(f"the {what} table at byte {at} names symbols past {max_symbol}")
        while remaining < threshold:
            width -= 1
            threshold >>= 1
    if pos > available:
        raise ZstdError(f"the {what} table description at byte {at} runs past its bytes")
    return build_table(log, counts, what), at + ((pos + 7) >> 3)


def _count(value: int, pos: int, threshold: int, remaining: int, width: int) -> tuple[int, int]:
    """One symbol's count (-1: "less than one"), in ``width - 1`` or ``width`` bits, and the bits after it."""
    low = (value >> pos) & (threshold - 1)
    biggest = 2 * threshold - 1 - remaining
    if low < biggest:
        return low - 1, pos + width - 1
    found = (value >> pos) & (2 * threshold - 1)
    return (found - biggest if found >= threshold else found) - 1, pos + width


def build_table(log: int, counts: list[int], what: str) -> FseTable:
    """The decoding table of a distribution (counts of -1: "less than one", a state of its own at the end)."""
    size = 1 << log
    symbols = [0] * size
    high = size - 1
    following = [0] * len(counts)
    for symbol, count in enumerate(counts):
        if count == -1:
            symbols[high] = symbol
            high -= 1
            following[symbol] = 1
        else:
            following[symbol] = count
    step = (size >> 1) + (size >> 3) + 3
    mask = size - 1
    position = 0
    for symbol, count in enumerate(counts):
        for _ in range(count):
            symbols[position] = symbol
            position = (position + step) & mask
            while position > high:
                position = (position + step) & mask
    if position != 0:
        raise ZstdError(f"the {what} table's probabilities do not fill it")
    bits = [0] * size
    base = [0] * size
    for state, symbol in enumerate(symbols):
        following_state = following[symbol]
        following[symbol] += 1
        width = log - following_state.bit_length() + 1
        bits[state] = width
        base[state] = (following_state << width) - size
    return FseTable(log, symbols, bits, base)


def rle_table(symbol: int) -> FseTable:
    """Every state the one symbol, no bits read (the RLE mode of a sequence table)."""
    return FseTable(0, [symbol], [0], [0])
