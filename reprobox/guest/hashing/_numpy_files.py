"""Reading NumPy's .npy and .npz files without unpickling, and within the readers' limits (``_bounds``).

Object arrays are refused. Every array header is checked before its data is touched: a sane shape,
and no more bytes than the file (or the archive member) holds. An archive that would expand too far (a
zip bomb) is judged from its directory before anything is decompressed. Members are hashed as they
decompress, a chunk at a time, and an .npy file's array is read by ``pread`` (``_filebytes``), never
memory-mapped, for hashing and for comparison alike; an array in Fortran order must be reordered in
memory, so it is refused past ``MAX_IN_MEMORY_BYTES``, as is an archive loaded whole for comparison
(``load_npz``). Whatever NumPy, zipfile or a decompressor raises on a damaged file becomes the file's
note at one boundary (``_NPZ_ERRORS``), and only what the machine did (an errno) leaves as an OSError.
"""

from __future__ import annotations

import struct
import tokenize
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing import _arrays
from reprobox.guest.hashing._bounds import (
    OverLimit,
    check_in_memory,
    check_shape,
    check_zip_members,
    element_count,
    limit_reason,
    over_limit,
)
from reprobox.guest.hashing._canonical import ROOT_NAME, numpy_dtype_name
from reprobox.guest.hashing._filebytes import FileChanged, FileIdentity, FileSpan, pread_chunks
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._zipdamage import ZIP_DAMAGE, damaged_stream
from reprobox.guest.hashing._ziplayout import zip_layout

if TYPE_CHECKING:
    import numpy as np


_NPZ_ERRORS: tuple[type[Exception], ...] = (
    *ZIP_DAMAGE,
    TypeError,
    SyntaxError,  # numpy's header parser (ast.literal_eval) on a damaged header
    tokenize.TokenError,  # and its tokenizer, on one that never closes a bracket or a string
    OverflowError,
    MemoryError,
    RecursionError,
)
"""What NumPy, zipfile and the decompressors raise on a damaged file: the NumPy readers' one boundary
turns each into the file's note. A damaged stream's OSError joins them (``_zipdamage.damaged_stream``)."""
_NPZ_OR_STREAM_ERRORS: tuple[type[Exception], ...] = (*_NPZ_ERRORS, OSError)


# An .npz member may expand at most this many times its compressed size (deflate itself tops out near
# 1032:1, so no file numpy writes is refused), and all members together at most this many times the
# file: overlapping members ("zip bombs") and other compressors reach millions. Small members are free.
MAX_NPZ_RATIO = 1100


NPZ_RATIO_FLOOR = 1 << 20


Header = tuple[tuple[int, ...], bool, "np.dtype[Any]"]
"""An .npy header: (shape, fortran_order, dtype)."""


def read_npy_header(stream: IO[bytes], what: str, size: int) -> Header:
    """The header of the .npy data in ``stream`` (``size`` bytes long), checked: no Python objects, a
    sane shape, and no more bytes declared than ``stream`` holds after the header."""

    try:
        shape, fortran_order, dtype = _numpy_header(stream, what)
    except (tokenize.TokenError, SyntaxError, TypeError, IndexError, struct.error) as exc:
        # numpy parses the header's dict as Python text: a damaged one fails in its tokenizer or parser
        raise ValueError(f"{what} has a damaged .npy header ({type(exc).__name__}: {exc})") from None
    if dtype.hasobject:
        raise ValueError(f"{what} holds Python objects, which are never unpickled")
    shape = check_shape(shape, what)
    nbytes = element_count(shape) * dtype.itemsize
    held = size - stream.tell()
    if nbytes > held:
        raise OverLimit(f"{what} is truncated: its header declares {nbytes} bytes, more than the {held} held")
    return shape, bool(fortran_order), dtype


def _numpy_header(stream: IO[bytes], what: str) -> Header:
    import numpy as np

    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    # 3.0 is 2.0 with UTF-8 field names; numpy reads it only through its private reader
    read_any = getattr(np.lib.format, "_read_array_header", None)
    if read_any is None:
        raise ValueError(f"{what} has an .npy header of version {version}, which is not read")
    return read_any(stream, version)  # type: ignore[no-any-return]


def npy_span(path: Path) -> tuple[Header, FileSpan]:
    """The checked header of an .npy file and the span of its array's bytes, read by ``pread`` when asked
    for (comparison), never memory-mapped."""
    with path.open("rb") as f:
        identity = FileIdentity.of(f.fileno())
        shape, fortran_order, dtype = read_npy_header(f, "the array", identity.size)
        offset = f.tell()
    nbytes = element_count(shape) * dtype.itemsize
    return (shape, fortran_order, dtype), FileSpan(path, identity, offset, nbytes)


def _is_damage(exc: BaseException) -> bool:
    """Whether a reader's error says the file is damaged (its note), rather than what the machine did."""
    if isinstance(exc, FileChanged):
        return False
    if isinstance(exc, OSError):
        return damaged_stream(exc)
    return isinstance(exc, _NPZ_ERRORS)


def plan_npy(path: Path) -> _arrays._Content:
    """The array of an .npy file, hashed from the file by ``pread`` once its header is checked."""
    try:
        with path.open("rb") as f:
            identity = FileIdentity.of(f.fileno())
            shape, fortran_order, dtype = read_npy_header(f, "the array", identity.size)
            offset = f.tell()
        nbytes = element_count(shape) * dtype.itemsize
        if not _streamable(shape, fortran_order, dtype):
            why = "from Fortran order" if fortran_order else f"from dtype {dtype.str}"
            check_in_memory(nbytes, "the array", f"to convert {why}")
    except _NPZ_OR_STREAM_ERRORS as exc:
        if not _is_damage(exc):
            raise
        return _arrays._refused("NumPy", exc)
    swap = dtype if dtype != dtype.newbyteorder("<") else None

    def buffers(budget: int) -> Iterator[bytes | memoryview]:
        chunks = pread_chunks(path, identity, offset, nbytes, FILE_CHUNK_BYTES)
        if _streamable(shape, fortran_order, dtype):
            return _swapped(chunks, swap)
        return _in_order(b"".join(chunks), shape, fortran_order, dtype, budget)

    array = _arrays._Array(ROOT_NAME, numpy_dtype_name(dtype), shape, nbytes, buffers)
    layout = Layout.of(identity.size, [(offset, offset + nbytes)], [(0, offset)])  # after them: a gap
    return _arrays._Content("numpy", [array], {}, reader="numpy", layout=layout)


def _swapped(chunks: Iterator[bytes], swap: np.dtype[Any] | None) -> Iterator[bytes]:
    """The chunks with big-endian elements turned little-endian (whole elements only: a split one waits)."""
    import numpy as np

    pending = b""
    for chunk in chunks:
        if swap is None:
            yield chunk
            continue
        pending += chunk
        whole = len(pending) - len(pending) % swap.itemsize
        yield np.frombuffer(pending[:whole], dtype=swap).byteswap().tobytes()
        pending = pending[whole:]


def _in_order(
    raw: bytes, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any], budget: int
) -> Iterator[memoryview]:
    """An array held whole in memory (within ``MAX_IN_MEMORY_BYTES``), in row-major little-endian order."""
    import numpy as np

    array = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran_order else "C")
    yield from _arrays._numpy_buffers(array, budget)


def _npz_bomb(path: Path, infos: list[zipfile.ZipInfo]) -> str | None:
    """Why the archive would expand too far, judged from its directory alone, before anything is
    decompressed; None when it is within the caps."""
    for info in infos:
        if info.file_size > max(MAX_NPZ_RATIO * info.compress_size, NPZ_RATIO_FLOOR):
            return (
                f"member '{info.filename}' would expand {info.file_size} bytes from "
                f"{info.compress_size}, over {MAX_NPZ_RATIO} times, the limit"
            )
    total = sum(info.file_size for info in infos)
    if total > max(MAX_NPZ_RATIO * path.stat().st_size, NPZ_RATIO_FLOOR):
        return f"its members would expand to {total} bytes, over {MAX_NPZ_RATIO} times the file, the limit"
    return None


def _npz_members(path: Path, archive: zipfile.ZipFile) -> Iterator[tuple[zipfile.ZipInfo, Header, int]]:
    """Each member with its checked header and the header's length; OverLimit when the directory
    promises a zip bomb."""
    infos = [info for info in archive.infolist() if not info.is_dir()]
    bomb = _npz_bomb(path, infos)
    if bomb is not None:
        raise OverLimit(bomb)
    for info in infos:
        with archive.open(info) as stream:
            header = read_npy_header(stream, f"member '{info.filename}'", info.file_size)
            yield info, header, stream.tell()


def _streamable(shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]) -> bool:
    """Whether the member's bytes are hashed as they decompress (byte-swapped when big-endian)."""
    plain = dtype.fields is None and dtype.kind in "biufc"
    return (not fortran_order or len(shape) <= 1) and (plain or dtype == dtype.newbyteorder("<"))


def plan_npz(path: Path) -> _arrays._Content:
    """Each member's array; a member's bytes in the file are content when its header and array are all
    it holds (the zip's own framing around them, ``_ziplayout``)."""
    arrays: list[_arrays._Array] = []
    whole: set[int] = set()  # members (by id) that hold their header and array and nothing more
    try:
        check_zip_members(path, "the archive")
        with zipfile.ZipFile(path) as archive:
            for info, (shape, fortran_order, dtype), header_length in _npz_members(path, archive):
                nbytes = element_count(shape) * dtype.itemsize
                if not _streamable(shape, fortran_order, dtype):
                    why = "from Fortran order" if fortran_order else f"from dtype {dtype.str}"
                    check_in_memory(nbytes, f"member '{info.filename}'", f"to convert {why}")
                arrays.append(_npz_member(path, info.filename, shape, fortran_order, dtype))
                if header_length + nbytes == info.file_size:
                    whole.add(id(info))
            zipped = zip_layout(path, archive)
            members = archive.infolist()
    except _NPZ_OR_STREAM_ERRORS as exc:
        if not _is_damage(exc):
            raise
        return _arrays._refused("NumPy .npz", exc)
    content = [
        span
        for info, span in zip(members, zipped.data, strict=True)
        if span is not None and (id(info) in whole or info.is_dir())
    ]
    layout = Layout.of(zipped.size, content, zipped.framing)
    return _arrays._Content("numpy", arrays, {}, reader="numpy", layout=layout)


def _npz_member(
    path: Path, member: str, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]
) -> _arrays._Array:
    nbytes = element_count(shape) * dtype.itemsize
    swap = dtype if dtype != dtype.newbyteorder("<") else None
    return _arrays._Array(
        name=member.removesuffix(".npy"),
        dtype=numpy_dtype_name(dtype),
        shape=shape,
        nbytes=nbytes,
        buffers=(lambda _budget: _npz_stream(path, member, nbytes, swap))
        if _streamable(shape, fortran_order, dtype)
        else (lambda budget: _npz_loaded(path, member, budget)),
    )


def _content_error(exc: BaseException) -> _arrays._ContentError:
    return _arrays._ContentError(
        _arrays._unreadable("NumPy .npz", exc), limit_reason(exc) if over_limit(exc) else None
    )


def _npz_stream(path: Path, member: str, nbytes: int, swap: np.dtype[Any] | None) -> Iterator[bytes]:
    """A member's array bytes, decompressed and hashed a chunk at a time; ``swap`` is the big-endian
    dtype whose elements are turned little-endian (``_swapped``)."""
    seen = 0

    def raw() -> Iterator[bytes]:
        nonlocal seen
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            read_npy_header(stream, f"member '{member}'", archive.getinfo(member).file_size)
            while chunk := stream.read(FILE_CHUNK_BYTES):
                seen += len(chunk)
                yield chunk

    try:
        yield from _swapped(raw(), swap)
    except _NPZ_OR_STREAM_ERRORS as exc:
        if not _is_damage(exc):
            raise
        raise _content_error(exc) from exc
    if seen != nbytes:  # whole elements: nbytes is a multiple of the item size
        raise _content_error(OverLimit(f"member '{member}' is truncated"))


def _npz_loaded(path: Path, member: str, budget: int) -> Iterator[memoryview]:
    import numpy as np

    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except _NPZ_OR_STREAM_ERRORS as exc:
        if not _is_damage(exc):
            raise
        raise _content_error(exc) from exc
    yield from _arrays._numpy_buffers(array, budget)


def load_npz(path: Path) -> list[tuple[str, np.ndarray[Any, Any]]]:
    """Every member of an .npz in memory (for comparison), within the readers' limits; ValueError
    (OverLimit past a limit) says why not."""

    try:
        return _load_npz(path)
    except _NPZ_OR_STREAM_ERRORS as exc:
        if not _is_damage(exc) or isinstance(exc, ValueError):
            raise
        raise ValueError(limit_reason(exc)) from None


def _load_npz(path: Path) -> list[tuple[str, np.ndarray[Any, Any]]]:
    import numpy as np

    check_zip_members(path, "the archive")
    with zipfile.ZipFile(path) as archive:
        members = list(_npz_members(path, archive))
        total = sum(element_count(shape) * dtype.itemsize for _, (shape, _, dtype), _ in members)
        check_in_memory(total, "the archive", "decompressed")
        named = []
        for info, _header, _length in members:
            with archive.open(info) as stream:
                array = np.lib.format.read_array(stream, allow_pickle=False)
            named.append((info.filename.removesuffix(".npy"), array))
    return named
