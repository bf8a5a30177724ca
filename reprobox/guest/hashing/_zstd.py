"""Zstandard frames (RFC 8878) decompressed with the standard library alone, for the checkpoint readers
whose containers hold them (TensorStore's OCDBT manifests, B-tree nodes and zarr3 chunks).

``decompress`` reads every frame of the bytes given, one after another, and joins what they hold;
skippable frames are skipped. It reads all that the reference encoder writes: raw, RLE and compressed
blocks; literals raw, RLE or Huffman-coded (direct or FSE-compressed weights, or the previous block's
tree; one or four streams); sequences with predefined, RLE, FSE-compressed or repeated tables, and the
repeat offsets; the window and content size a frame declares, and its content checksum (XXH64), which
is verified. A frame that names a dictionary is refused: the files that use zstd here never do.

The bytes are untrusted. Everything they declare is checked before it is acted on: a frame's declared
content size, every block's size and what it regenerates (at most the frame's block maximum,
128 KiB), every literal count and match against what the block holds and the output so far; the output
never grows past ``max_output`` (``OverLimit``, checked before each allocation), every loop consumes
bytes or output, and the reading's CPU budget (``_bounds``) is checked at every block. Whatever else is
wrong is a ``ZstdError`` (a ValueError) naming the byte where it is.
"""

from __future__ import annotations

from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget, size_text
from reprobox.guest.hashing._zstd_fse import ZstdError
from reprobox.guest.hashing._zstd_literals import MAX_BLOCK, read_literals
from reprobox.guest.hashing._zstd_sequences import FrameState, run_sequences
from reprobox.guest.hashing._zstd_xxhash import xxh64

__all__ = ["BOUNDS", "MAX_WINDOW_LOG", "ZstdError", "decompress", "is_zstd"]

MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE = 0x184D2A50  # the top 28 bits of a skippable frame's magic number
MAX_WINDOW_LOG = 31
"""The largest window a frame may declare (the reference decoder's own maximum on 64-bit machines); the
window is never allocated here, only the output, which ``max_output`` bounds."""

BOUNDS = (
    "decompressed at most the caller's limit, checked before each allocation (a frame's declared content "
    "size, every raw and RLE block, every block's literals and matches); blocks of at most 128 KiB and "
    f"their frame's window, windows of at most 2**{MAX_WINDOW_LOG} bytes; every size, count, table and "
    "bitstream within the bytes of its block, and each bitstream read exactly to its end; the content "
    "checksum verified; frames that name a dictionary refused"
)


def is_zstd(data: bytes) -> bool:
    """Whether ``data`` begins with a Zstandard frame's magic number."""
    return data[:4] == MAGIC


def decompress(data: bytes, *, max_output: int) -> bytes:
    """What every frame of ``data`` holds, joined; ZstdError if it is not Zstandard data this reads,
    OverLimit if it would decompress to more than ``max_output`` bytes."""
    data = bytes(data)
    if not data:
        raise ZstdError("it holds no Zstandard frame (it is empty)")
    parts: list[bytearray] = []
    total = 0
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            raise ZstdError(f"it ends inside a frame's magic number, at byte {at}")
        magic = int.from_bytes(data[at : at + 4], "little")
        if magic >> 4 == _SKIPPABLE >> 4:
            if at + 8 > len(data):
                raise ZstdError(f"the skippable frame at byte {at} is cut short")
            at += 8 + int.from_bytes(data[at + 4 : at + 8], "little")
            if at > len(data):
                raise ZstdError("a skippable frame runs past the end of the data")
            continue
        if data[at : at + 4] != MAGIC:
            raise ZstdError(f"byte {at} begins no Zstandard frame (magic number {data[at : at + 4].hex()})")
        frame, at = _frame(data, at, max_output - total)
        parts.append(frame)
        total += len(frame)
    return b"".join(parts)


def _frame(data: bytes, at: int, budget: int) -> tuple[bytearray, int]:
    """The content of the frame at ``at`` (at most ``budget`` bytes) and the offset after it."""
    start = at
    at, window, content, checksum = _header(data, at, budget)
    content_bytes, at = _blocks(data, at, min(window, MAX_BLOCK), budget)
    if content is not None and len(content_bytes) != content:
        raise ZstdError(
            f"the frame at byte {start} holds {len(content_bytes)} bytes, not the {content} it declares"
        )
    if checksum:
        if at + 4 > len(data):
            raise ZstdError(f"the frame at byte {start} ends before its checksum")
        expected = int.from_bytes(data[at : at + 4], "little")
        if xxh64(content_bytes) & 0xFFFFFFFF != expected:
            raise ZstdError(f"the frame at byte {start} fails its content checksum")
        at += 4
    return content_bytes, at


def _header(data: bytes, start: int, budget: int) -> tuple[int, int, int | None, bool]:
    """The frame header at ``start``: the offset after it, the window, the content size if declared,
    and whether a checksum follows the blocks."""
    at = start + 4
    if at >= len(data):
        raise ZstdError(f"the frame at byte {start} ends inside its header")
    descriptor = data[at]
    at += 1
    single_segment = descriptor >> 5 & 1
    if descriptor & 8:
        raise ZstdError(f"the frame at byte {start} sets a reserved bit of its header")
    id_bytes = (0, 1, 2, 4)[descriptor & 3]
    size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
    if at + (not single_segment) + id_bytes + size_bytes > len(data):
        raise ZstdError(f"the frame at byte {start} ends inside its header")
    window = 0
    if not single_segment:
        exponent, mantissa = data[at] >> 3, data[at] & 7
        at += 1
        if 10 + exponent > MAX_WINDOW_LOG:
            raise OverLimit(
                f"the frame at byte {start} declares a window of 2**{10 + exponent} bytes, "
                f"over the limit of 2**{MAX_WINDOW_LOG}"
            )
        window = (1 << (10 + exponent)) + (mantissa << (7 + exponent))
    dictionary = int.from_bytes(data[at : at + id_bytes], "little")
    at += id_bytes
    if dictionary:
        raise ZstdError(
            f"the frame at byte {start} needs dictionary {dictionary}, and dictionaries are not supported"
        )
    if not size_bytes:
        return at, window, None, bool(descriptor & 4)
    content = int.from_bytes(data[at : at + size_bytes], "little") + (256 if size_bytes == 2 else 0)
    if content > budget:
        raise OverLimit(
            f"the frame at byte {start} declares {size_text(content)} of content, over the limit of "
            f"{size_text(budget)} left"
        )
    return at + size_bytes, content if single_segment else window, content, bool(descriptor & 4)


def _blocks(data: bytes, at: int, block_max: int, budget: int) -> tuple[bytearray, int]:
    """The blocks of one frame, from ``at`` to its last, regenerated; and the offset after the last."""
    out = bytearray()
    state = FrameState()
    last = False
    while not last:
        check_cpu_budget(f"{len(out)} bytes decompressed")
        if at + 3 > len(data):
            raise ZstdError(f"it ends inside a block header, at byte {at}")
        header = int.from_bytes(data[at : at + 3], "little")
        last, kind, size = bool(header & 1), (header >> 1) & 3, header >> 3
        at += 3
        if kind == 3:
            raise ZstdError(f"the block at byte {at - 3} has the reserved block type")
        if size > block_max:
            raise ZstdError(f"the block at byte {at - 3} holds {size} bytes, over its maximum of {block_max}")
        if kind == 2:
            if at + size > len(data):
                raise ZstdError(f"the compressed block at byte {at - 3} runs past the end of the data")
            literals, start, state.huffman = read_literals(data, at, at + size, state.huffman)
            limits = (len(out) + block_max, budget)
            run_sequences(data, start, at + size, literals=literals, out=out, state=state, limits=limits)
            at += size
            continue
        if len(out) + size > budget:
            raise OverLimit(f"it decompresses to more than the limit of {size_text(budget)}")
        stored = size if kind == 0 else 1
        if at + stored > len(data):
            raise ZstdError(f"the block at byte {at - 3} runs past the end of the data")
        out += data[at : at + size] if kind == 0 else data[at : at + 1] * size
        at += stored
    return out, at
