"""Reading each checkpoint format without running anything from it: torch, pickle, safetensors, NumPy.

A reader plans one file's hashing: the tensors to hash and the digests of its plain values, or the
plain-file fallback with a note saying why the content could not be read safely. Torch files are read
by ``torch.load(weights_only=True)`` first (fast, memory-mapped); what it refuses, and plain pickles,
go to the safe pickle reader (``_pickle``), which imports and runs nothing named in the file.
"""

from __future__ import annotations

import json
import mmap
import pickle
import struct
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._arrays import (
    Buffers,
    _Array,
    _arrays_from,
    _Content,
    _ContentError,
    _numpy_array,
    _numpy_buffers,
    _opaque,
)
from reprobox.guest.hashing._canonical import ROOT_NAME, _join, _metadata_digests, flatten, numpy_dtype_name
from reprobox.guest.hashing._pickle import PICKLE_SUFFIXES, READER_NAME, pickled_kind, read_pickle
from reprobox.guest.hashing._text import plan_text, text_format_of

if TYPE_CHECKING:
    import numpy as np


TORCH_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt"})
WEIGHTS_ONLY_READER = "torch.load(weights_only=True)"
MAX_SAFETENSORS_HEADER = 100 << 20

# safetensors dtype -> (canonical dtype, bits per element as stored)
SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 8),
    "U8": ("uint8", 8),
    "I8": ("int8", 8),
    "U16": ("uint16", 16),
    "I16": ("int16", 16),
    "U32": ("uint32", 32),
    "I32": ("int32", 32),
    "U64": ("uint64", 64),
    "I64": ("int64", 64),
    "F16": ("float16", 16),
    "BF16": ("bfloat16", 16),
    "F32": ("float32", 32),
    "F64": ("float64", 64),
    "C64": ("complex64", 64),
    "F8_E4M3": ("float8_e4m3fn", 8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8),
    "F8_E5M2": ("float8_e5m2", 8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    # safetensors counts packed fp4 values one by one; torch packs two per element (last dim halved).
    "F4": ("float4_e2m1fn_x2", 4),
    "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6),
}


def format_of(path: Path) -> str:
    """The format a file is read as: from its suffix, else from its first bytes (``checkpoint.pth.tar``).

    Only a zip file's directory is read beyond a few bytes, to find a torch archive's ``data.pkl``.
    """
    suffix = path.suffix.lower()
    if suffix in TORCH_SUFFIXES:
        return "torch"
    if suffix == ".safetensors":
        return "safetensors"
    if suffix in (".npy", ".npz"):
        return "numpy"
    if suffix in PICKLE_SUFFIXES:
        return "pickle"
    return pickled_kind(path) or "file"


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".")[:200]


def _unreadable(kind: str, exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = _first_sentence(lines[0]) if lines else type(exc).__name__
    return f"content not hashed: not a readable {kind} file ({reason}); the content hash is the file sha256"


def _refused_reason(exc: pickle.UnpicklingError) -> str:
    """The one line of torch's long refusal message that names what was refused."""
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    boilerplate = ("Weights only load failed", "Check the documentation")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(boilerplate)]
    return _first_sentence(lines[0]) if lines else type(exc).__name__


def _fallback_note(why: str) -> str:
    return (
        f"{why}; read by the safe pickle reader, which imports and runs nothing named in the file, "
        "so objects it names are recorded as their class, arguments and state"
    )


def _weights_only_failure(exc: Exception) -> str:
    """Why ``torch.load(weights_only=True)`` did not read the file, in one short clause."""
    if isinstance(exc, pickle.UnpicklingError):
        return f"{WEIGHTS_ONLY_READER} refused the file ({_refused_reason(exc)})"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = _first_sentence(lines[0]) if lines else type(exc).__name__
    return f"{WEIGHTS_ONLY_READER} could not read the file ({reason})"


def _torch_load(path: Path) -> object:
    import torch

    with path.open("rb") as f:
        zip_format = f.read(4) == b"PK\x03\x04"  # only the zip format can be memory-mapped
    with warnings.catch_warnings():  # e.g. TorchScript archives: refused below, no need to warn too
        warnings.simplefilter("ignore")
        return torch.load(path, weights_only=True, mmap=zip_format, map_location="cpu")


def _plan_torch(path: Path) -> _Content:
    try:
        obj = _torch_load(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a refused, damaged or foreign file
        return _plan_pickle(path, why=_weights_only_failure(exc))
    try:
        named_arrays, values = flatten(obj)
    except (ValueError, RecursionError) as exc:
        return _opaque(_unreadable("torch", exc))
    return _Content(
        format="torch",
        arrays=_arrays_from(named_arrays),
        metadata=_metadata_digests(values),
        keepalive=obj,
        reader=WEIGHTS_ONLY_READER,
    )


def _plan_pickle(path: Path, why: str | None = None) -> _Content:
    """A pickled file through the safe reader; ``why`` says why torch's own loader did not read it."""
    try:
        read = read_pickle(path)
        named_arrays, values = flatten(read.obj)
    except (ValueError, RecursionError) as exc:
        if why is None:
            return _opaque(_unreadable("pickle", exc))
        return _opaque(
            f"content not hashed: {why} and the safe pickle reader could not read it either "
            f"({_first_sentence(str(exc))}); the content hash is the file sha256"
        )
    return _Content(
        format=read.container,
        arrays=_arrays_from(named_arrays),
        metadata=_metadata_digests(values),
        note=_fallback_note(why) if why is not None else None,
        keepalive=read,
        reader=READER_NAME,
    )


@dataclass(frozen=True)
class SafetensorsEntry:
    name: str
    dtype: str  # canonical
    source_dtype: str  # as the header spells it
    shape: tuple[int, ...]
    start: int  # absolute file offsets
    end: int


def read_safetensors_header(path: Path) -> tuple[list[SafetensorsEntry], object]:
    """Validated tensor entries and the ``__metadata__`` value; ValueError says what is wrong."""
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError("shorter than the 8-byte header length")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise ValueError(f"header length {header_len} does not fit the file")
        raw = f.read(header_len)
    header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    data_start = 8 + header_len
    data_len = size - data_start
    metadata = header.pop("__metadata__", None)
    entries = [_safetensors_entry(name, info, data_start, data_len) for name, info in header.items()]
    return entries, metadata


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the header names '{key}' twice")
        result[key] = value
    return result


def _safetensors_entry(name: str, info: object, data_start: int, data_len: int) -> SafetensorsEntry:
    if not isinstance(info, dict):
        raise ValueError(f"entry '{name}' is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise ValueError(f"entry '{name}' has no dtype")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"entry '{name}' has an invalid shape")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_len
    ):
        raise ValueError(f"entry '{name}' has data offsets outside the file")
    canonical, bits = SAFETENSORS_DTYPES.get(dtype, (f"safetensors:{dtype}", 0))
    count = 1
    for d in shape:
        count *= d
    if bits and offsets[1] - offsets[0] != (count * bits + 7) // 8:
        raise ValueError(
            f"entry '{name}' holds {offsets[1] - offsets[0]} bytes, not what {dtype}{shape} needs"
        )
    if dtype == "F4" and shape:  # torch's float4_e2m1fn_x2 packs two values per element
        shape = [*shape[:-1], (shape[-1] + 1) // 2]
    return SafetensorsEntry(
        name, canonical, dtype, tuple(shape), data_start + offsets[0], data_start + offsets[1]
    )


def _plan_safetensors(path: Path) -> _Content:
    try:
        entries, metadata = read_safetensors_header(path)
    except (ValueError, UnicodeDecodeError) as exc:
        return _opaque(_unreadable("safetensors", exc))
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    arrays = [_Array(e.name, e.dtype, e.shape, e.end - e.start, _mapped_range(mapped, e)) for e in entries]
    values: list[tuple[str, object]] = []
    if isinstance(metadata, dict):
        values = [(_join("__metadata__", k), v) for k, v in metadata.items()]
    elif metadata is not None:
        values = [("__metadata__", metadata)]
    return _Content(
        "safetensors", arrays, _metadata_digests(values), keepalive=mapped, reader="safetensors header"
    )


def _mapped_range(mapped: mmap.mmap, entry: SafetensorsEntry) -> Buffers:
    return lambda _budget: iter((memoryview(mapped)[entry.start : entry.end],))  # never copied


def _plan_npy(path: Path) -> _Content:
    import numpy as np

    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except _NPZ_ERRORS as exc:
        return _opaque(_unreadable("NumPy", exc))
    if not isinstance(array, np.ndarray):
        return _opaque(_unreadable("NumPy", ValueError("it holds no single array")))
    return _Content("numpy", [_numpy_array(ROOT_NAME, array)], {}, keepalive=array, reader="numpy")


_NPZ_ERRORS = (zipfile.BadZipFile, ValueError, EOFError, KeyError, NotImplementedError, RuntimeError)


def _read_npy_header(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype[Any]] | None:
    """An .npy header as (shape, fortran_order, dtype), or None for a header version read whole."""
    import numpy as np

    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    return None


# An .npz member may expand at most this many times its compressed size (deflate itself tops out near
# 1032:1, so no file numpy writes is refused), and all members together at most this many times the
# file: overlapping members ("zip bombs") and other compressors reach millions. Small members are free.
MAX_NPZ_RATIO = 1100
NPZ_RATIO_FLOOR = 1 << 20


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


def _plan_npz(path: Path) -> _Content:
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


def _plan(path: Path) -> _Content:
    if text_format_of(path) is not None:  # by suffix alone: a JSON file is never sniffed as a pickle
        return plan_text(path)
    kind = format_of(path)
    if kind == "torch":
        return _plan_torch(path)
    if kind == "pickle":
        return _plan_pickle(path)
    if kind == "safetensors":
        return _plan_safetensors(path)
    if kind == "numpy":
        return _plan_npz(path) if path.suffix.lower() == ".npz" else _plan_npy(path)
    return _opaque(None)
