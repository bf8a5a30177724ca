"""Reading NumPy's .npy and .npz files without unpickling: object arrays are refused, and an archive that
would expand too far (a zip bomb) is judged from its directory before anything is decompressed."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._arrays import (
    _Array,
    _Content,
    _ContentError,
    _numpy_array,
    _numpy_buffers,
    _opaque,
    _unreadable,
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


def plan_npy(path: Path) -> _Content:
    import numpy as np

    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except _NPZ_ERRORS as exc:
        return _opaque(_unreadable("NumPy", exc))
    if not isinstance(array, np.ndarray):
        return _opaque(_unreadable("NumPy", ValueError("it holds no single array")))
    return _Content("numpy", [_numpy_array(ROOT_NAME, array)], {}, keepalive=array, reader="numpy")


def _read_npy_header(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype[Any]] | None:
    """An .npy header as (shape, fortran_order, dtype), or None for a header version read whole."""
    import numpy as np

    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    return None


def _npz_bomb(path: Path, infos: list[zipfile.ZipInfo]) -> str | None:
    """Why the archive would expand too far (a note for the plain-file fallback), judged from its
    directory alone, before anything is decompressed; None when it is within the caps."""
    for info in infos:
        if info.file_size > max(MAX_NPZ_RATIO * info.compress_size, NPZ_RATIO_FLOOR):
            return (
                f"content not hashed: member '{info.filename}' would expand {info.file_size} bytes from "
                f"{info.compress_size}, over {MAX_NPZ_RATIO} times; the content hash is the file sha256"
            )
    total = sum(info.file_size for info in infos)
    if total > max(MAX_NPZ_RATIO * path.stat().st_size, NPZ_RATIO_FLOOR):
        return (
            f"content not hashed: its members would expand to {total} bytes, over {MAX_NPZ_RATIO} times "
            "the file; the content hash is the file sha256"
        )
    return None


def plan_npz(path: Path) -> _Content:
    import numpy as np

    arrays: list[_Array] = []
    try:
        with zipfile.ZipFile(path) as archive:
            bomb = _npz_bomb(path, archive.infolist())
            if bomb is not None:
                return _opaque(bomb)
            for info in archive.infolist():
                if info.is_dir():
                    continue
                with archive.open(info) as stream:
                    header = _read_npy_header(stream)
                    if header is None:
                        stream.seek(0)
                        loaded = np.lib.format.read_array(stream, allow_pickle=False)
                        arrays.append(_numpy_array(info.filename.removesuffix(".npy"), loaded))
                        continue
                shape, fortran_order, dtype = header
                if dtype.hasobject:
                    return _opaque(
                        f"content not hashed: member '{info.filename}' holds Python objects, which are never "
                        "unpickled; the content hash is the file sha256"
                    )
                if _npz_nbytes(shape, dtype) > info.file_size:
                    return _opaque(
                        _unreadable("NumPy .npz", ValueError(f"member '{info.filename}' is truncated"))
                    )
                arrays.append(_npz_member(path, info.filename, shape, fortran_order, dtype))
    except _NPZ_ERRORS as exc:
        return _opaque(_unreadable("NumPy .npz", exc))
    return _Content("numpy", arrays, {}, reader="numpy")


def _npz_member(
    path: Path, member: str, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]
) -> _Array:
    nbytes = _npz_nbytes(shape, dtype)
    streamable = not fortran_order and dtype == dtype.newbyteorder("<")
    return _Array(
        name=member.removesuffix(".npy"),
        dtype=numpy_dtype_name(dtype),
        shape=tuple(int(d) for d in shape),
        nbytes=nbytes,
        buffers=(lambda _budget: _npz_stream(path, member, nbytes))
        if streamable
        else (lambda budget: _npz_loaded(path, member, budget)),
    )


def _npz_nbytes(shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count * dtype.itemsize


def _npz_stream(path: Path, member: str, nbytes: int) -> Iterator[bytes]:
    """A member's array bytes, decompressed and hashed a chunk at a time."""
    seen = 0
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            _read_npy_header(stream)
            while chunk := stream.read(FILE_CHUNK_BYTES):
                seen += len(chunk)
                yield chunk
    except _NPZ_ERRORS as exc:
        raise _ContentError(_unreadable("NumPy .npz", exc)) from exc
    if seen != nbytes:
        raise _ContentError(_unreadable("NumPy .npz", ValueError(f"member '{member}' is truncated")))


def _npz_loaded(path: Path, member: str, budget: int) -> Iterator[memoryview]:
    import numpy as np

    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except _NPZ_ERRORS as exc:
        raise _ContentError(_unreadable("NumPy .npz", exc)) from exc
    yield from _numpy_buffers(array, budget)
