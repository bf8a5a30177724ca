"""A single compressed file (``metrics.json.gz``, ``model.npy.xz``, ``events.jsonl.bz2``) read as the file
it holds: an archive of one member (``_archives``), whose name is the file's without its compression
suffix, read through the same table of readers as any output file.

Jobs compress their logs and arrays with gzip, bzip2 or xz; hashed as bytes, gzip's header alone (the
time it was written, the original name) makes every run "differ" and hides the values. Decompressed,
``metrics.json.gz`` is read as JSON (``metrics.json/loss``) and ``model.npy.gz`` as an array
(``model.npy``); the compression level, gzip's header stamps and how the stream is cut into members are
the container. A stream is recognised by its magic bytes, whatever its name (a ``.tar.gz`` is a tar
first). What it holds is bounded before it is written: at most ``MAX_EXPANSION_RATIO`` times the file
(at least ``EXPANSION_FLOOR``) and ``MAX_DECOMPRESSED_BYTES`` in all, counted as it decompresses, within
the file's CPU budget; a stream that does not decompress, or fails its checksum, is the file's note.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Callable
from pathlib import Path

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._bounds import (
    EXPANSION_FLOOR,
    MAX_EXPANSION_RATIO,
    OverLimit,
    check_cpu_budget,
    size_text,
)

MAX_DECOMPRESSED_BYTES = 1 << 30
"""What one compressed file may hold (written to a temporary folder to be read): deflate never expands
past about 1,032 times, so a gzip bomb is refused by this bound rather than by its ratio. A larger
compressed output is compared by its bytes, with a note saying so."""

BOUNDS = (
    f"decompressed at most {MAX_EXPANSION_RATIO} times the file and {size_text(MAX_DECOMPRESSED_BYTES)}, "
    "counted as it decompresses; nesting of archives"
)

SUFFIXES = (".gz", ".gzip", ".bz2", ".xz", ".lzma")

_BLOCK_SIZES = tuple(b"%d" % size for size in range(1, 10))
_BZIP2_MARKS = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # a block, or the stream's end
"""After bzip2's ``BZh`` and block size come these digits of pi (a block) or of sqrt(pi) (an empty stream),
so that a text beginning ``BZh9`` is no bzip2 stream."""

_OPENERS: tuple[tuple[Callable[[bytes], bool], Callable[[Path], io.BufferedIOBase]], ...] = (
    (lambda head: head[:3] == b"\x1f\x8b\x08", gzip.GzipFile),  # deflate, the one method gzip has
    (
        lambda head: head[:3] == b"BZh" and head[3:4] in _BLOCK_SIZES and head[4:10] in _BZIP2_MARKS,
        bz2.BZ2File,
    ),
    (lambda head: head[:6] == b"\xfd7zXZ\x00", lzma.LZMAFile),
)

ERRORS: tuple[type[Exception], ...] = (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile)
"""What the decompressors raise on a damaged stream (bzip2 says so as an OSError without an errno)."""


def _opener(path: Path) -> Callable[[Path], io.BufferedIOBase] | None:
    head = _sniff.head(path)
    return next((opener for matches, opener in _OPENERS if matches(head)), None)


def is_compressed(path: Path) -> bool:
    return _opener(path) is not None


def inner_name(path: Path) -> str:
    """The name of the file the stream holds: ``metrics.json`` for ``metrics.json.gz``."""
    lower = path.name.lower()
    suffix = next((s for s in SUFFIXES if lower.endswith(s) and len(lower) > len(s)), "")
    return path.name[: len(path.name) - len(suffix)]


def decompress(path: Path, target: Path) -> None:
    """Write what the stream holds to ``target``, within the bounds; ValueError (OverLimit) says why not."""
    opener = _opener(path)
    if opener is None:
        raise ValueError("it is no gzip, bzip2 or xz stream")
    limit = min(max(MAX_EXPANSION_RATIO * path.stat().st_size, EXPANSION_FLOOR), MAX_DECOMPRESSED_BYTES)
    written = 0
    try:
        with opener(path) as source, target.open("wb") as out:
            while chunk := source.read(FILE_CHUNK_BYTES):
                written += len(chunk)
                if written > limit:
                    raise OverLimit(
                        f"it decompresses to over {size_text(limit)}, the limit (at most "
                        f"{MAX_EXPANSION_RATIO} times the file, {size_text(MAX_DECOMPRESSED_BYTES)} in all)"
                    )
                check_cpu_budget(f"{size_text(written)} decompressed")
                out.write(chunk)
    except ERRORS as exc:
        raise ValueError(f"its stream does not decompress ({exc})") from None
