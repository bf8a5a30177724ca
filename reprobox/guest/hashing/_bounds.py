"""The limits every checkpoint reader holds a file to before it trusts what the file declares.

A checkpoint's header is written by the job, so it may declare anything: a shape of ``[0, 2**70]`` over
zero bytes, a JSON header nested a hundred thousand levels, an array that would fill the machine once
decompressed. Read naively, those end in an OverflowError, a RecursionError or a MemoryError, which say
nothing about the file. Every reader (safetensors, NumPy, the safe pickle reader, structured text, the
logging tools' files, and ``load_tensors`` at compare time) checks what a file declares against these
limits first and raises ``OverLimit``, a ValueError whose message names the limit. Hashing then records
the file by its bytes with a note saying why; ``reprobox hash`` refuses it (exit 2); a comparison
compares it as bytes. The numbers are far beyond any genuine checkpoint and well inside int64.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from reprobox.fileio import JsonTooDeep, json_depth

MAX_DIMS = 64
"""Dimensions of one tensor (torch allows 64 too)."""

MAX_ELEMENTS = 1 << 48
"""Each dimension, and the product of the non-zero ones: zeros elsewhere do not make 2**70 a size."""
_ELEMENTS = "2**48"  # MAX_ELEMENTS as sentences say it

MAX_NESTING = 200
"""Nesting of lists and mappings in a checkpoint or a values file: no genuine one nests this deep, and
every walk over them recurses."""

MAX_VALUES = 2_000_000
"""Named values from one file: the manifest keeps a digest for each."""

MAX_HEADER_DEPTH = 64
"""Nesting of a safetensors header (a genuine one nests 3 levels: entries, their fields, shapes)."""

MAX_ARCHIVE_MEMBERS = 100_000
"""Members of a zip archive (.npz, torch's zip format): a zip reader holds its whole directory in memory,
several hundred bytes a member, so a file of tiny members would cost many times its size."""

MAX_IN_MEMORY_BYTES = 1 << 30
"""An array that must be held in memory whole (decompressed from an .npz in Fortran order, or converted
to another byte order for comparison); larger ones are refused rather than risk a MemoryError."""

MAX_EXPANSION = 16
"""The bytes a file's tensors may span, as a multiple of the file's size (at least
``MIN_EXPANSION_BYTES``): a stride-0 (expanded) tensor spans more bytes than it stores, and each is
hashed as every element it shows."""

MIN_EXPANSION_BYTES = 1 << 30


def expansion_budget(file_bytes: int) -> int:
    """The logical bytes all tensors of a file of ``file_bytes`` may span before it is refused."""
    return max(MAX_EXPANSION * file_bytes, MIN_EXPANSION_BYTES)


class OverLimit(ValueError):
    """A file declares more than it holds, or more than the readers' limits: damaged or hostile."""


FILE_CPU_SECONDS = 5.0
"""The backstop behind every count and size limit: reading and digesting one file stops past this much CPU
time of the thread that reads it (CPU, not the clock: a busy machine does not change what is read)."""
_FILE_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "reprobox_file_deadline", default=None
)


def cpu_budget() -> contextlib.AbstractContextManager[None]:
    """One file's CPU budget, for ``check_cpu_budget`` in the readers' loops; a member of an archive
    reads within what is left of its archive's."""
    return cpu_share(FILE_CPU_SECONDS)


@contextlib.contextmanager
def cpu_share(seconds: float) -> Iterator[None]:
    """At most ``seconds`` of what is left of the budget: for a part of a file's reading that may be
    given up (a DCP tensor assembled from its chunks) so that the rest of the file is still read."""
    outer = _FILE_DEADLINE.get()
    mine = time.thread_time() + seconds
    token = _FILE_DEADLINE.set(mine if outer is None else min(outer, mine))
    try:
        yield
    finally:
        _FILE_DEADLINE.reset(token)


def check_cpu_budget(done: str) -> None:
    """OverLimit once the file being read has used its CPU budget; ``done`` says how far it got."""
    deadline = _FILE_DEADLINE.get()
    if deadline is not None and time.thread_time() > deadline:
        raise OverLimit(f"reading it takes over {FILE_CPU_SECONDS:g} s of CPU time, the limit ({done})")


def budget_running() -> bool:
    """Whether a file's CPU budget runs (hashing), rather than none (comparison's read-back)."""
    return _FILE_DEADLINE.get() is not None


def charge_cpu(seconds: float) -> None:
    """Count ``seconds`` against the running budget as if spent here: work done once for several files
    (a DCP index, read for each of its shards) costs each of them alike, whichever did it."""
    deadline = _FILE_DEADLINE.get()
    if deadline is not None:
        _FILE_DEADLINE.set(deadline - seconds)


def over_limit(exc: BaseException) -> bool:
    """Whether a reader's error is a limit refused (rather than a file that merely does not parse)."""
    return isinstance(exc, (OverLimit, JsonTooDeep, RecursionError, MemoryError, OverflowError))


def limit_reason(exc: BaseException) -> str:
    """A short reason for a reader's error, naming the limit for the errors Python raises itself."""
    if isinstance(exc, RecursionError):
        return f"it nests deeper than the {MAX_NESTING} levels read"
    if isinstance(exc, MemoryError):
        return "it asks for more memory than there is"
    if isinstance(exc, OverflowError):
        return f"it declares a number over the limit of {_ELEMENTS}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(exc).__name__


def size_text(nbytes: int) -> str:
    """A byte count for a sentence: exact bytes when small, else GiB or MiB."""
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.1f} GiB"
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB"
    return f"{nbytes} bytes"


def check_shape(shape: object, what: str) -> tuple[int, ...]:
    """``shape`` as a tuple, if it is a sane one: at most MAX_DIMS non-negative integers, each and the
    product of the non-zero ones at most MAX_ELEMENTS; OverLimit names what is wrong."""
    if not isinstance(shape, (list, tuple)):
        raise OverLimit(f"{what} has a shape that is not a list of integers")
    if len(shape) > MAX_DIMS:
        raise OverLimit(f"{what} has {len(shape)} dimensions, over the limit of {MAX_DIMS}")
    product = 1
    for dim in shape:
        if type(dim) is not int:
            raise OverLimit(f"{what} has a shape that is not a list of integers")
        if dim < 0:
            raise OverLimit(f"{what} has a negative dimension ({dim})")
        product *= max(dim, 1)
        if product > MAX_ELEMENTS:
            raise OverLimit(f"{what} declares a shape over the limit of {_ELEMENTS} elements")
    return tuple(shape)


def element_count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def check_in_memory(nbytes: int, what: str, why: str) -> None:
    """Refuse an array that would have to be held in memory whole when it is over MAX_IN_MEMORY_BYTES."""
    if nbytes > MAX_IN_MEMORY_BYTES:
        raise OverLimit(
            f"{what} would take {size_text(nbytes)} of memory {why}, over the limit of "
            f"{size_text(MAX_IN_MEMORY_BYTES)}"
        )


def loads_json(
    raw: bytes | str,
    what: str,
    *,
    max_depth: int = MAX_NESTING,
    object_pairs_hook: Callable[[list[tuple[str, object]]], object] | None = None,
) -> object:
    """``json.loads`` with its nesting bounded (``fileio.loads_bounded``, with a pairs hook)."""
    try:
        document = json.loads(raw, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise OverLimit(f"{what} nests deeper than the limit of {max_depth} levels") from None
    if json_depth(document) > max_depth:
        raise OverLimit(f"{what} nests deeper than the limit of {max_depth} levels")
    return document


_END_RECORD, _ZIP64_LOCATOR, _ZIP64_END_RECORD = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"
_END_RECORD_SIZE, _MAX_COMMENT = 22, 0xFFFF


def zip_member_count(path: Path) -> int:
    """The members a zip archive's end record declares (0 if it has none), read from its last bytes
    before any zip reader loads the directory."""
    size = path.stat().st_size
    with path.open("rb") as f:
        start = max(0, size - _END_RECORD_SIZE - _MAX_COMMENT)
        f.seek(start)
        tail = f.read()
        at = tail.rfind(_END_RECORD)
        if at < 0 or len(tail) - at < _END_RECORD_SIZE:
            return 0  # not a zip archive: the zip reader says so
        (count,) = struct.unpack_from("<H", tail, at + 10)
        locator = at - 20
        if count != 0xFFFF or locator < 0 or tail[locator : locator + 4] != _ZIP64_LOCATOR:
            return int(count)
        (offset,) = struct.unpack_from("<Q", tail, locator + 8)
        f.seek(min(offset, size))
        record = f.read(56)
    if len(record) < 40 or record[:4] != _ZIP64_END_RECORD:
        return int(count)
    return int(struct.unpack_from("<Q", record, 32)[0])


def check_zip_members(path: Path, what: str) -> None:
    """Refuse an archive that declares more than MAX_ARCHIVE_MEMBERS members, before its directory is read."""
    count = zip_member_count(path)
    if count > MAX_ARCHIVE_MEMBERS:
        raise OverLimit(f"{what} lists {count} members, over the limit of {MAX_ARCHIVE_MEMBERS}")


MAX_EXPANSION_RATIO = 1100
"""An archive member may expand at most this many times its compressed size, and all members together at
most this many times the archive (deflate tops out near 1032:1; zip bombs reach millions)."""

EXPANSION_FLOOR = 1 << 20
"""Members and archives up to this many bytes expanded are never refused by the ratio."""

MAX_ARCHIVE_BYTES = 16 << 30
"""The bytes of an archive's members read in all (they are written to a temporary folder to be read)."""

MAX_ARCHIVE_DEPTH = 4
"""Archives inside archives are read this many levels deep; deeper ones are refused."""


def check_expansion(members: list[tuple[str, int, int]], archive_bytes: int) -> None:
    """Refuse an archive whose members (name, expanded size, compressed size) would expand too far."""
    total = 0
    for name, size, compressed in members:
        if size > max(MAX_EXPANSION_RATIO * compressed, EXPANSION_FLOOR):
            raise OverLimit(
                f"member '{name}' would expand {size} bytes from {compressed}, "
                f"over {MAX_EXPANSION_RATIO} times, the limit"
            )
        total += size
    check_archive_total(total, archive_bytes)


def check_archive_total(total: int, archive_bytes: int) -> None:
    """Refuse members that together expand too far from the archive, or past MAX_ARCHIVE_BYTES."""
    if total > max(MAX_EXPANSION_RATIO * archive_bytes, EXPANSION_FLOOR):
        raise OverLimit(
            f"its members would expand to {total} bytes, "
            f"over {MAX_EXPANSION_RATIO} times the archive, the limit"
        )
    if total > MAX_ARCHIVE_BYTES:
        raise OverLimit(
            f"its members hold {size_text(total)}, over the limit of {size_text(MAX_ARCHIVE_BYTES)}"
        )
