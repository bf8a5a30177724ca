"""Zstandard frames decompressed by the pure-Python reader exactly as the reference library wrote them,
and damaged, truncated or hostile ones refused with the readers' error within ``max_output``.

Frames are written by the ``zstandard`` package (the reference C library) at the levels checkpoints use,
fast negative ones and the slowest, with and without content sizes and checksums, one-shot and streamed
(no content size, many blocks), so that every block, literals and sequences mode the encoder picks is
read: raw and RLE blocks, Huffman literals in one and four streams with direct and FSE-compressed weights
and repeated trees, and predefined, RLE, FSE-compressed and repeated sequence tables.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._zstd import ZstdError, decompress, is_zstd
from reprobox.guest.hashing._zstd_xxhash import xxh64

zstandard = pytest.importorskip("zstandard")

BLOCK = 128 << 10
LIMIT = 64 << 20


def _compress(data: bytes, level: int = 3, *, checksum: bool = True, content_size: bool = True) -> bytes:
    return zstandard.ZstdCompressor(
        level=level, write_checksum=checksum, write_content_size=content_size
    ).compress(data)


def _streamed(data: bytes, level: int = 3, piece: int = 5000) -> bytes:
    """A frame written as a stream is: no content size, blocks cut where each write ended."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True).compressobj()
    pieces = [compressor.compress(data[at : at + piece]) for at in range(0, len(data), piece)]
    return b"".join([*pieces, compressor.flush()])


def _weights(count: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).standard_normal(count).astype(np.float32).tobytes()


def _text(size: int) -> bytes:
    rng = random.Random(size)
    words = [b"loss", b"step", b"0.125", b"layer", b"weight", b"bias", b"\n", b" ", b"{", b"}", b'"']
    return b"".join(rng.choice(words) for _ in range(size // 3))[:size]


KINDS = {
    "empty": b"",
    "one byte": b"x",
    "repetitive": b"abcabcabd" * 40_000,
    "zeros": bytes(3 * BLOCK + 17),
    "random": os.urandom(200_000),
    "text": _text(300_000),
    "weights": _weights(70_000),
    "block less one": _text(BLOCK - 1),
    "one block": _text(BLOCK),
    "block and one": _text(BLOCK + 1),
}


@pytest.mark.parametrize("level", [1, 3, 9, 19, -1, -7])
@pytest.mark.parametrize("kind", list(KINDS))
def test_frames_the_reference_encoder_writes_decompress_exactly(kind: str, level: int) -> None:
    data = KINDS[kind]
    if level == 19 and len(data) > BLOCK + 1:
        data = data[: BLOCK + 1]  # level 19 is slow to write: one block boundary is enough
    for checksum, content_size in ((True, True), (False, False), (True, False)):
        frame = _compress(data, level, checksum=checksum, content_size=content_size)
        assert decompress(frame, max_output=LIMIT) == data


@pytest.mark.parametrize("level", [1, 19])
def test_streamed_frames_of_many_small_blocks_decompress(level: int) -> None:
    data = _text(60_000) + _weights(5_000) + bytes(20_000) + _text(40_000)
    frame = _streamed(data, level, piece=3000)
    assert decompress(frame, max_output=LIMIT) == data


def test_literals_of_one_repeated_byte_are_read_as_the_rle_literals_the_encoder_writes() -> None:
    base = random.Random(3).randbytes(BLOCK)  # a block of its own, then 430 sequences of "Z" and a match
    data = base + b"".join(b"Z" + base[k * 300 : (k + 1) * 300] for k in range(430))
    frame = _compress(data, 19)
    assert decompress(frame, max_output=LIMIT) == data


def test_a_hand_built_block_of_32768_sequences_with_rle_tables_repeats_its_offsets() -> None:
    """Three-byte sequence count, RLE tables for all three codes (no bits read), literal length 0:
    offset code 0 means the second repeat offset, so the offsets 4 and 1 swap at every sequence."""
    raw = b"\x20\x00\x00abcd"  # a raw block of 4 bytes (header: size 4, type raw, not last)
    block = b"\x00" + b"\xff\x00\x01" + b"\x54\x00\x00\x00" + b"\x01"
    header = (len(block) << 3 | 2 << 1 | 1).to_bytes(3, "little")  # compressed, last
    frame = b"\x28\xb5\x2f\xfd\x00\x58" + raw + header + block  # window 2**21, no size
    expected = bytearray(b"abcd")
    offsets = [1, 4]
    for _ in range(32768):
        offsets.reverse()
        for _ in range(3):
            expected.append(expected[-offsets[0]])
    assert decompress(frame, max_output=LIMIT) == expected


def test_frames_one_after_another_join_and_skippable_frames_are_skipped() -> None:
    first, second = _text(10_000), _weights(3_000)
    skippable = (0x184D2A5A).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    joined = _compress(first) + skippable + _compress(b"") + _compress(second, 19, checksum=False)
    assert decompress(joined, max_output=LIMIT) == first + second
    assert decompress(skippable, max_output=LIMIT) == b""
    assert is_zstd(joined) and not is_zstd(skippable) and not is_zstd(b"\x28\xb5\x2f")


@settings(max_examples=40, deadline=None)
@given(
    pieces=st.lists(st.tuples(st.binary(max_size=300), st.integers(1, 40)), max_size=12),
    level=st.sampled_from([-5, 1, 3, 9, 19]),
    checksum=st.booleans(),
)
def test_any_bytes_round_trip(pieces: list[tuple[bytes, int]], level: int, checksum: bool) -> None:
    data = b"".join(piece * times for piece, times in pieces)  # repeats: matches and repeat offsets
    assert decompress(_compress(data, level, checksum=checksum), max_output=len(data)) == data


@pytest.mark.parametrize("size", [0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000])
def test_xxh64_is_the_hash_whose_low_bits_frames_carry(size: int) -> None:
    data = os.urandom(size)
    frame = _compress(data, checksum=True)
    assert xxh64(data) & 0xFFFFFFFF == int.from_bytes(frame[-4:], "little")
    assert xxh64(b"") == 0xEF46DB3751D8E999  # the specification's value for no bytes


def test_every_truncation_is_refused() -> None:
    data = _text(2 * BLOCK + 500) + _weights(2000)
    frame = _compress(data, 3)
    cuts = sorted({*range(64), *random.Random(1).sample(range(64, len(frame)), 200)})
    for cut in cuts:
        with pytest.raises(ZstdError):
            decompress(frame[:cut], max_output=LIMIT)


def test_flipped_bits_are_refused_or_change_nothing_the_checksum_covers() -> None:
    data = _text(20_000) + _weights(3000) + b"abc" * 3000
    frame = _compress(data, 3)
    rng = random.Random(2)
    refused = 0
    for _ in range(400):
        at = rng.randrange(len(frame))
        damaged = bytearray(frame)
        damaged[at] ^= 1 << rng.randrange(8)
        try:
            assert decompress(bytes(damaged), max_output=LIMIT) == data
        except (ZstdError, OverLimit):
            refused += 1
    assert refused > 300


def _with_header(frame: bytes, descriptor_or: int = 0, extra: bytes = b"") -> bytes:
    """``frame`` with bits set in its header's descriptor and bytes inserted after its window byte."""
    descriptor = frame[4] | descriptor_or
    after_window = 6 if not frame[4] & 0x20 else 5
    return frame[:4] + bytes([descriptor]) + frame[5:after_window] + extra + frame[after_window:]


def test_hostile_headers_are_refused_in_one_sentence() -> None:
    frame = _compress(b"payload " * 100, content_size=False)
    with pytest.raises(ZstdError, match="dictionary 7, and dictionaries are not supported"):
        decompress(_with_header(frame, 1, b"\x07"), max_output=LIMIT)
    assert decompress(_with_header(frame, 1, b"\x00"), max_output=LIMIT) == b"payload " * 100  # names none
    with pytest.raises(ZstdError, match="reserved bit"):
        decompress(_with_header(frame, 8), max_output=LIMIT)
    with pytest.raises(OverLimit, match="window"):
        decompress(frame[:5] + bytes([31 << 3]) + frame[6:], max_output=LIMIT)
    reserved_block = frame[:6] + bytes([frame[6] | 6]) + frame[7:]
    with pytest.raises(ZstdError, match="reserved block type"):
        decompress(reserved_block, max_output=LIMIT)
    for junk in (b"", b"\x00" * 8, b"PK\x03\x04 not zstd", frame + b"\x01"):
        with pytest.raises(ZstdError):
            decompress(junk, max_output=LIMIT)
    bad_checksum = _compress(b"payload")[:-1] + b"\x00"
    with pytest.raises(ZstdError, match="checksum"):
        decompress(bad_checksum, max_output=LIMIT)


def test_max_output_is_enforced_before_allocating() -> None:
    data = bytes(10 * BLOCK)
    declared = _compress(data)
    assert decompress(declared, max_output=len(data)) == data
    with pytest.raises(OverLimit, match="declares"):
        decompress(declared, max_output=len(data) - 1)
    streamed = _streamed(data, 1, piece=BLOCK)  # no size declared: refused as the blocks grow
    with pytest.raises(OverLimit, match="limit"):
        decompress(streamed, max_output=len(data) - 1)
    twice = _compress(data[:BLOCK]) * 2  # frames count together
    with pytest.raises(OverLimit):
        decompress(twice, max_output=2 * BLOCK - 1)
    matches = _streamed(_text(2000) * 200, 3)  # sequences: refused inside a compressed block
    with pytest.raises(OverLimit):
        decompress(matches, max_output=100_000)
    rle_bomb = b"\x28\xb5\x2f\xfd\x00\x78" + b"\x02\x00\x10\x00" * 100_000 + b"\x03\x00\x10\x00"
    with pytest.raises(OverLimit):
        decompress(rle_bomb, max_output=LIMIT)  # 100,001 RLE blocks of 128 KiB: 12 GiB from 400 kB
