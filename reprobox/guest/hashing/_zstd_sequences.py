"""A Zstandard block's sequences (RFC 8878, sections 3.1.1.3.2 and 3.1.1.4): their three tables
(predefined, RLE, FSE-compressed or the previous block's), decoded from one backward bitstream and
executed as they are decoded (literals copied, then a match from the output so far), with the three
repeat offsets carried from block to block.

Each table is turned once into four lists by state (the code's baseline value, its extra bits, the bits
of the next state, the next state's base) so that a sequence is a few list lookups and shifts of a small
integer window re-read from the stream. Before a sequence is copied its literals are checked against
those left and its match against the output so far, and the block's output against its limit, so that
nothing is allocated past it; the stream must end exactly at its first bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._zstd_fse import FseTable, ZstdError, build_table, read_distribution, rle_table
from reprobox.guest.hashing._zstd_literals import HuffmanTable

_LL_BASE = [*range(16), 16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
_LL_BASE += [32768, 65536]
_LL_BITS = [0] * 16 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
_ML_BASE = [*range(3, 35), 35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099]
_ML_BASE += [8195, 16387, 32771, 65539]
_ML_BITS = [0] * 32 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
_OF_BASE = [1 << code for code in range(32)]
_OF_BITS = list(range(32))
_MASKS = [(1 << n) - 1 for n in range(33)]

# (what, largest code, largest accuracy, predefined accuracy and distribution): RFC 8878, 3.1.1.3.2.2
_KINDS = (
    (
        "literal length",
        35,
        9,
        6,
        [4, 3, *[2] * 11, 1, 1, 1, *[2] * 9, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1],
    ),
    ("offset", 31, 8, 5, [1, 1, 1, 1, 1, 1, 2, 2, 2] + [1] * 15 + [-1] * 5),
    ("match length", 52, 9, 6, [1, 4, 3, 2, 2, 2, 2, 2, 2] + [1] * 37 + [-1] * 7),
)
_CODES = ((_LL_BASE, _LL_BITS), (_OF_BASE, _OF_BITS), (_ML_BASE, _ML_BITS))
_PAD = bytes(16)  # below the stream's first bit: room for a window's low bytes, never to consume
_PAD_BITS = 8 * len(_PAD)
_WINDOW_BYTES = 16  # a sequence reads at most 89 bits: 31 + 16 + 16 extra, 9 + 9 + 8 for the states


@dataclass(frozen=True, slots=True)
class SequenceTable:
    """An FSE table with each state's code resolved: its baseline value and extra bits."""

    accuracy_log: int
    values: list[int]
    extra: list[int]
    bits: list[int]
    base: list[int]


def _resolved(table: FseTable, kind: int) -> SequenceTable:
    values, extra = _CODES[kind]
    return SequenceTable(
        table.accuracy_log,
        [values[s] for s in table.symbols],
        [extra[s] for s in table.symbols],
        table.bits,
        table.base,
    )


_PREDEFINED = tuple(
    _resolved(build_table(log, counts, what), kind) for kind, (what, _, _, log, counts) in enumerate(_KINDS)
)


@dataclass
class FrameState:
    """What one block leaves to the next of its frame: tables to repeat, and the repeat offsets."""

    huffman: HuffmanTable | None = None
    tables: list[SequenceTable | None] = field(default_factory=lambda: [None, None, None])
    offsets: list[int] = field(default_factory=lambda: [1, 4, 8])


def _tables(data: bytes, at: int, end: int, state: FrameState) -> int:
    """The modes byte and the tables it names (literal lengths, offsets, match lengths), in ``state``."""
    if at >= end:
        raise ZstdError(f"a block ends before its sequences' modes, at byte {at}")
    modes = data[at]
    if modes & 3:
        raise ZstdError(f"the sequences' modes at byte {at} set reserved bits")
    at += 1
    for kind, shift in enumerate((6, 4, 2)):
        mode = (modes >> shift) & 3
        what, largest, max_log, _, _ = _KINDS[kind]
        if mode == 0:
            state.tables[kind] = _PREDEFINED[kind]
        elif mode == 1:
            if at >= end or data[at] > largest:
                raise ZstdError(f"the RLE {what} code at byte {at} is missing or over {largest}")
            state.tables[kind] = _resolved(rle_table(data[at]), kind)
            at += 1
        elif mode == 2:
            table, at = read_distribution(data, at, end, max_log=max_log, max_symbol=largest, what=what)
            state.tables[kind] = _resolved(table, kind)
        elif state.tables[kind] is None:
            raise ZstdError(f"the {what} table at byte {at} repeats one no earlier block described")
    return at


def run_sequences(
    data: bytes,
    at: int,
    end: int,
    *,
    literals: bytes | bytearray,
    out: bytearray,
    state: FrameState,
    limits: tuple[int, int],
) -> None:
    """The block's sequences at ``data[at:end]`` executed onto ``out``, then its last literals.

    ``limits``: the lengths ``out`` may reach, of the block (past it: damaged) and of the caller's
    ``max_output`` (past it: ``OverLimit``).
    """
    if at >= end:
        raise ZstdError(f"a block ends before its sequences, at byte {at}")
    first = data[at]
    if first < 128:
        count, at = first, at + 1
    elif first < 255:
        if at + 2 > end:
            raise ZstdError(f"the sequence count at byte {at} is cut short")
        count, at = ((first - 128) << 8) + data[at + 1], at + 2
    else:
        if at + 3 > end:
            raise ZstdError(f"the sequence count at byte {at} is cut short")
        count, at = data[at + 1] + (data[at + 2] << 8) + 0x7F00, at + 3
    if count == 0:
        if at != end:
            raise ZstdError(f"a block of no sequences holds {end - at} bytes after their count")
        _grow(out, len(literals), limits)
        out += literals
        return
    at = _tables(data, at, end, state)
    lengths, offsets, matches = state.tables
    assert lengths is not None and offsets is not None and matches is not None  # set by _tables
    stream = data[at:end]
    if not stream or stream[-1] == 0:
        raise ZstdError(f"the sequences' bitstream at byte {at} has no end mark")
    used = _execute(_PAD + stream, count, (lengths, offsets, matches), literals, out, state, limits)
    if used < len(literals):
        _grow(out, len(literals) - used, limits)
        out += literals[used:]


def _grow(out: bytearray, more: int, limits: tuple[int, int]) -> None:
    block, budget = limits
    if len(out) + more > budget:
        raise OverLimit(f"it decompresses to more than the limit of {budget} bytes")
    if len(out) + more > block:
        raise ZstdError("a block decompresses to more than its maximum size")


def _execute(  # noqa: PLR0912, PLR0915, PLR0917 - one loop, whose locals are what make it fast
    data: bytes,
    count: int,
    tables: tuple[SequenceTable, SequenceTable, SequenceTable],
    literals: bytes | bytearray,
    out: bytearray,
    state: FrameState,
    limits: tuple[int, int],
) -> int:
    """Decode and execute ``count`` sequences from the padded backward stream; the literals they used."""
    lengths, offsets, matches = tables
    ll_value, ll_extra, ll_bits, ll_base = lengths.values, lengths.extra, lengths.bits, lengths.base
    of_value, of_extra, of_bits, of_base = offsets.values, offsets.extra, offsets.bits, offsets.base
    ml_value, ml_extra, ml_bits, ml_base = matches.values, matches.extra, matches.bits, matches.base
    masks = _MASKS
    limit = min(limits)
    pos = len(data) * 8 - 9 + data[-1].bit_length()
    if pos < _PAD_BITS + lengths.accuracy_log + offsets.accuracy_log + matches.accuracy_log:
        raise ZstdError("the sequences' bitstream ends before its initial states")
    high = (pos + 7) >> 3
    low = high - _WINDOW_BYTES
    window = int.from_bytes(data[low:high], "little")
    shift = pos - (low << 3) - lengths.accuracy_log
    ll_state = (window >> shift) & masks[lengths.accuracy_log]
    shift -= offsets.accuracy_log
    of_state = (window >> shift) & masks[offsets.accuracy_log]
    shift -= matches.accuracy_log
    ml_state = (window >> shift) & masks[matches.accuracy_log]
    pos = shift + (low << 3)
    rep0, rep1, rep2 = state.offsets
    used = 0
    available = len(literals)
    size = len(out)
    last = count - 1
    for index in range(count):
        if pos < _PAD_BITS:
            raise ZstdError("the sequences' bitstream ends before its sequences do")
        high = (pos + 7) >> 3
        low = high - _WINDOW_BYTES
        window = int.from_bytes(data[low:high], "little")
        shift = pos - (low << 3)
        bits = of_extra[of_state]
        shift -= bits
        offset = of_value[of_state] + ((window >> shift) & masks[bits])
        bits = ml_extra[ml_state]
        shift -= bits
        match = ml_value[ml_state] + ((window >> shift) & masks[bits])
        bits = ll_extra[ll_state]
        shift -= bits
        length = ll_value[ll_state] + ((window >> shift) & masks[bits])
        if index != last:
            bits = ll_bits[ll_state]
            shift -= bits
            ll_state = ll_base[ll_state] + ((window >> shift) & masks[bits])
            bits = ml_bits[ml_state]
            shift -= bits
            ml_state = ml_base[ml_state] + ((window >> shift) & masks[bits])
            bits = of_bits[of_state]
            shift -= bits
            of_state = of_base[of_state] + ((window >> shift) & masks[bits])
        pos = shift + (low << 3)
        if offset > 3:
            rep0, rep1, rep2 = offset - 3, rep0, rep1
        else:
            repeat = offset if length == 0 else offset - 1
            if repeat == 1:
                rep0, rep1 = rep1, rep0
            elif repeat == 2:
                rep0, rep1, rep2 = rep2, rep0, rep1
            elif repeat == 3:
                rep0, rep1, rep2 = rep0 - 1, rep0, rep1
        if used + length > available:
            raise ZstdError("a sequence copies more literals than the block holds")
        if size + length + match > limit:
            _grow(out, length + match, limits)
        if length:
            out += literals[used : used + length]
            used += length
            size += length
        if rep0 > size or rep0 == 0:
            raise ZstdError(f"a match reaches {rep0} bytes back, before the frame's first byte")
        start = size - rep0
        if match <= rep0:
            out += out[start : start + match]
        else:
            out += (out[start:] * (match // rep0 + 1))[:match]
        size += match
    if pos != _PAD_BITS:
        raise ZstdError("the sequences' bitstream does not end where its sequences do")
    state.offsets = [rep0, rep1, rep2]
    return used
