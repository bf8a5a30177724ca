"""Reading NumPy's .npy and .npz files without unpickling, and within the readers' limits (``_bounds``).

Object arrays are refused. Every array header is checked before its data is touched: a sane shape,
and no more bytes than the file (or the archive member) holds. An archive that would expand too far (a
zip bomb) is judged from its directory before anything is decompressed. Members are hashed as they
decompress, a chunk at a time; a member in Fortran order must be reordered in memory, so it is refused
past ``MAX_IN_MEMORY_BYTES``, as is an archive loaded whole for comparison (``load_npz``).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._arrays import (
    _Array,
    _Content,
    _ContentError,
    _numpy_array,
    _numpy_buffers,
    _refused,
    _unreadable,
)
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

if TYPE_CHECKING:
    import numpy as np


_NPZ_ERRORS = (zipfile.BadZipFile, ValueError, EOFError, KeyError, NotImplementedError, RuntimeError)


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
    import numpy as np

    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    else:  # 3.0 is 2.0 with UTF-8 field names; numpy reads it only through its private reader
        read_any = getattr(np.lib.format, "_read_array_header", None)
        if read_any is None:
            raise ValueError(f"{what} has an .npy header of version {version}, which is not read")
        shape, fortran_order, dtype = read_any(stream, version)
    if dtype.hasobject:
        raise ValueError(f"{what} holds Python objects, which are never unpickled")
    shape = check_shape(shape, what)
    nbytes = element_count(shape) * dtype.itemsize
    held = size - stream.tell()
    if nbytes > held:
        raise OverLimit(f"{what} is truncated: its header declares {nbytes} bytes, more than the {held} held")
    return shape, bool(fortran_order), dtype


def open_npy(path: Path, mode: Literal["r", "c"]) -> np.ndarray[Any, Any]:
    """The array of an .npy file, memory-mapped (``mode`` "r" or "c") once its header is checked."""
    import numpy as np

    with path.open("rb") as f:
        read_npy_header(f, "the array", path.stat().st_size)
    array = np.load(path, mmap_mode=mode, allow_pickle=False)
    if not isinstance(array, np.ndarray):
        raise ValueError("it holds no single array")
    return array


def plan_npy(path: Path) -> _Content:
    try:
        array = open_npy(path, "r")
    except _NPZ_ERRORS as exc:
        return _refused("NumPy", exc)
    return _Content("numpy", [_numpy_array(ROOT_NAME, array)], {}, keepalive=array, reader="numpy")


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


def _npz_members(path: Path, archive: zipfile.ZipFile) -> Iterator[tuple[zipfile.ZipInfo, Header]]:
    """Each member with its checked header; OverLimit when the directory promises a zip bomb."""
    infos = [info for info in archive.infolist() if not info.is_dir()]
    bomb = _npz_bomb(path, infos)
    if bomb is not None:
        raise OverLimit(bomb)
    for info in infos:
        with archive.open(info) as stream:
            yield info, read_npy_header(stream, f"member '{info.filename}'", info.file_size)


def _streamable(shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]) -> bool:
    """Whether the member's bytes are hashed as they decompress (byte-swapped when big-endian)."""
    plain = dtype.fields is None and dtype.kind in "biufc"
    return (not fortran_order or len(shape) <= 1) and (plain or dtype == dtype.newbyteorder("<"))


def plan_npz(path: Path) -> _Content:
    arrays: list[_Array] = []
    try:
        check_zip_members(path, "the archive")
        with zipfile.ZipFile(path) as archive:
            for info, (shape, fortran_order, dtype) in _npz_members(path, archive):
                if not _streamable(shape, fortran_order, dtype):
                    why = "from Fortran order" if fortran_order else f"from dtype {dtype.str}"
                    nbytes = element_count(shape) * dtype.itemsize
                    check_in_memory(nbytes, f"member '{info.filename}'", f"to convert {why}")
                arrays.append(_npz_member(path, info.filename, shape, fortran_order, dtype))
    except _NPZ_ERRORS as exc:
        return _refused("NumPy .npz", exc)
    return _Content("numpy", arrays, {}, reader="numpy")


def _npz_member(
    path: Path, member: str, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]
) -> _Array:
    nbytes = element_count(shape) * dtype.itemsize
    swap = dtype if dtype != dtype.newbyteorder("<") else None
    return _Array(
        name=member.removesuffix(".npy"),
        dtype=numpy_dtype_name(dtype),
        shape=shape,
        nbytes=nbytes,
        buffers=(lambda _budget: _npz_stream(path, member, nbytes, swap))
        if _streamable(shape, fortran_order, dtype)
        else (lambda budget: _npz_loaded(path, member, budget)),
    )


def _content_error(exc: BaseException) -> _ContentError:
    return _ContentError(_unreadable("NumPy .npz", exc), limit_reason(exc) if over_limit(exc) else None)


def _npz_stream(path: Path, member: str, nbytes: int, swap: np.dtype[Any] | None) -> Iterator[bytes]:
    """A member's array bytes, decompressed and hashed a chunk at a time; ``swap`` is the big-endian
    dtype whose elements are turned little-endian (whole elements only: a split one waits)."""
    import numpy as np

    seen, pending = 0, b""
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            read_npy_header(stream, f"member '{member}'", archive.getinfo(member).file_size)
            while chunk := stream.read(FILE_CHUNK_BYTES):
                seen += len(chunk)
                if swap is None:
                    yield chunk
                    continue
                pending += chunk
                whole = len(pending) - len(pending) % swap.itemsize
                yield np.frombuffer(pending[:whole], dtype=swap).byteswap().tobytes()
                pending = pending[whole:]
    except _NPZ_ERRORS as exc:
        raise _content_error(exc) from exc
    if seen != nbytes or pending:
        raise _content_error(OverLimit(f"member '{member}' is truncated"))


def _npz_loaded(path: Path, member: str, budget: int) -> Iterator[memoryview]:
    import numpy as np

    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except _NPZ_ERRORS as exc:
        raise _content_error(exc) from exc
    yield from _numpy_buffers(array, budget)


def load_npz(path: Path) -> list[tuple[str, np.ndarray[Any, Any]]]:
    """Every member of an .npz in memory (for comparison), within the readers' limits; ValueError
    (OverLimit past a limit) says why not."""
    import numpy as np

    check_zip_members(path, "the archive")
    with zipfile.ZipFile(path) as archive:
        members = list(_npz_members(path, archive))
        total = sum(element_count(shape) * dtype.itemsize for _, (shape, _, dtype) in members)
        check_in_memory(total, "the archive", "decompressed")
        named = []
        for info, _header in members:
            with archive.open(info) as stream:
                array = np.lib.format.read_array(stream, allow_pickle=False)
            named.append((info.filename.removesuffix(".npy"), array))
    return named
