"""Canonical checkpoint hashing: equal weights give equal digests whatever container holds them.

A checkpoint's file sha256 changes with the container's bytes (zip layout, key insertion order, torch.save
versus safetensors); its *content hash* changes only with the tensors. Both are recorded, so a rerun that
wrote the same weights through a different writer still counts as reproduced.

The contract (other modules and tools recompute it, so it must not drift):

- A tensor's ``sha256`` is over its raw element bytes in row-major (C-contiguous) order, little-endian,
  exactly as stored: bf16, float8, bool and complex values are hashed as their bytes, never converted.
- ``content_sha256`` is ``sha256(json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode())``
  where ``rows`` is the list of ``[name, dtype, [dim, ...], sha256]`` for every tensor, sorted in Python
  list order (name by code point, then dtype, then shape, then sha256).
- Tensor names are dotted paths into the saved object: mapping keys via ``str(key)``, sequence
  positions as decimal indices (``model.fc.weight``, ``optimizer.state.0.exp_avg``); the root is ``""``.
- dtype names are torch's without the ``torch.`` prefix (``float32``, ``bfloat16``, ``float8_e4m3fn``);
  safetensors and NumPy dtypes are mapped onto the same names.
- Non-tensor values are not part of the content hash. Mappings are always descended; a list or tuple
  is descended only when it holds a tensor, mapping, list or tuple, otherwise it is one value (so
  ``betas`` stays one key). Each value is recorded only as the sha256 of its canonical JSON
  (``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)`` after
  mapping tuples and ``torch.Size`` to lists, bytes to ``{"bytes": hex}``, complex to ``{"complex": [re,
  im]}``, sets to ``{"set": [...]}`` sorted, and other objects to ``{"object": type, "repr": repr}``):
  values may hold secrets, digests do not show them. When two values flatten to the same key, that key's
  digest is the sha256 of their sorted digests joined by newlines.
- ``metadata_sha256`` is the sha256 of the canonical JSON of the key -> digest mapping; it is ``None``
  for format ``"file"``.
- ``format`` says how ``content_sha256`` was made: ``"torch"``, ``"safetensors"`` or ``"numpy"`` from
  the tensors, ``"file"`` when it is the file sha256 (other files, and checkpoints whose content could
  not be read safely; ``note`` then says why). Pickled objects beyond tensors and plain data are never
  unpickled.

Hashing runs on a thread pool: hashlib releases the GIL on large buffers, so tensors (and each file's
own sha256, one more task) hash on all cores. Tensors are hashed straight from memory-mapped files.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import mmap
import os
import pickle
import stat
import struct
import sys
import warnings
import zipfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from reprobox.errors import EnvironmentProblem, UsageError

if TYPE_CHECKING:
    import numpy as np
    import torch

FILE_CHUNK_BYTES = 1 << 20
"""Files are streamed through sha256 in pieces of this size, never read whole."""

COPY_BUDGET_BYTES = 8 << 20
"""A non-contiguous tensor is copied to contiguous memory at most this many bytes at a time."""

TORCH_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt"})
MAX_SAFETENSORS_HEADER = 100 << 20
ROOT_NAME = ""

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


@dataclass(frozen=True)
class TensorDigest:
    """One tensor as the content hash sees it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    sha256: str

    def sort_key(self) -> tuple[str, str, tuple[int, ...], str]:
        return (self.name, self.dtype, self.shape, self.sha256)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> TensorDigest:
        shape = data.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            raise _bad_record("tensors[].shape", "a list of integers")
        return cls(
            name=_expect_str(data, "name", "tensors[].name"),
            dtype=_expect_str(data, "dtype", "tensors[].dtype"),
            shape=tuple(shape),
            sha256=_expect_str(data, "sha256", "tensors[].sha256"),
        )


@dataclass(frozen=True)
class CheckpointDigest:
    """Everything recorded about one output file; equal ``content_sha256`` means equal weights."""

    path: str
    size: int
    file_sha256: str
    content_sha256: str
    format: str
    tensors: tuple[TensorDigest, ...]
    metadata: dict[str, str] = field(hash=False)
    metadata_sha256: str | None
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "size": self.size,
            "file_sha256": self.file_sha256,
            "content_sha256": self.content_sha256,
            "format": self.format,
            "tensors": [t.to_json() for t in self.tensors],
            "metadata": dict(sorted(self.metadata.items())),
            "metadata_sha256": self.metadata_sha256,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CheckpointDigest:
        size = data.get("size")
        if not isinstance(size, int) or isinstance(size, bool):
            raise _bad_record("size", "an integer")
        tensors = data.get("tensors")
        if not isinstance(tensors, list) or not all(isinstance(t, Mapping) for t in tensors):
            raise _bad_record("tensors", "a list of objects")
        metadata = data.get("metadata")
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise _bad_record("metadata", "an object mapping keys to digests")
        metadata_sha256 = data.get("metadata_sha256")
        note = data.get("note")
        if metadata_sha256 is not None and not isinstance(metadata_sha256, str):
            raise _bad_record("metadata_sha256", "a string or null")
        if note is not None and not isinstance(note, str):
            raise _bad_record("note", "a string or null")
        return cls(
            path=_expect_str(data, "path", "path"),
            size=size,
            file_sha256=_expect_str(data, "file_sha256", "file_sha256"),
            content_sha256=_expect_str(data, "content_sha256", "content_sha256"),
            format=_expect_str(data, "format", "format"),
            tensors=tuple(TensorDigest.from_json(t) for t in tensors),
            metadata=dict(metadata),
            metadata_sha256=metadata_sha256,
            note=note,
        )


def _bad_record(field_name: str, expected: str) -> UsageError:
    return UsageError(
        f"checkpoint record field '{field_name}' must be {expected}; the run record is damaged, "
        "so rerun the job to write it again"
    )


def _expect_str(data: Mapping[str, object], key: str, field_name: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _bad_record(field_name, "a string")
    return value


# --- the canonical serialisations (the contract) --------------------------------------------------


def canonical_json(value: object) -> str:
    """The one JSON spelling every digest here is computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def content_sha256(tensors: Sequence[TensorDigest]) -> str:
    """The content hash over tensor digests, in the order the contract fixes (not the caller's)."""
    rows = [[t.name, t.dtype, list(t.shape), t.sha256] for t in sorted(tensors, key=TensorDigest.sort_key)]
    return hashlib.sha256(
        json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    ).hexdigest()


def metadata_sha256(metadata: Mapping[str, str]) -> str:
    """One digest over all non-tensor values, so a record says at a glance whether any differ."""
    return _sha256_text(canonical_json(dict(metadata)))


def canonical_value(value: object) -> object:
    """A JSON-able form of a non-tensor value that is equal exactly when the values are."""
    canonical: object
    if value is None or isinstance(value, (bool, str, int, float)):
        canonical = value
    elif isinstance(value, complex):
        canonical = {"complex": [value.real, value.imag]}
    elif isinstance(value, (bytes, bytearray, memoryview)):
        canonical = {"bytes": bytes(value).hex()}
    elif isinstance(value, Mapping):
        canonical = {str(k): canonical_value(v) for k, v in value.items()}
    elif isinstance(value, (list, tuple)):  # torch.Size is a tuple of ints
        canonical = [canonical_value(v) for v in value]
    elif isinstance(value, (set, frozenset)):
        canonical = {"set": sorted((canonical_value(v) for v in value), key=canonical_json)}
    else:
        kind = type(value)
        canonical = {"object": f"{kind.__module__}.{kind.__qualname__}", "repr": repr(value)}
    return canonical


def _metadata_digests(values: Sequence[tuple[str, object]]) -> dict[str, str]:
    grouped: dict[str, list[str]] = {}
    for name, value in values:
        grouped.setdefault(name, []).append(_sha256_text(canonical_json(canonical_value(value))))
    return {
        name: digests[0] if len(digests) == 1 else _sha256_text("\n".join(sorted(digests)))
        for name, digests in grouped.items()
    }


def torch_dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: the canonical dtype spelling."""
    return str(dtype).removeprefix("torch.")


def numpy_dtype_name(dtype: np.dtype[Any]) -> str:
    """NumPy's name for plain numeric dtypes (the same as torch's); a full description otherwise."""
    if dtype.fields is None and dtype.kind in "biufcmM":
        return str(dtype.name)
    return "numpy:" + json.dumps(dtype.newbyteorder("<").descr)


# --- flattening ----------------------------------------------------------------------------------


def _array_types() -> tuple[type, ...]:
    """Tensor types known to this process, without importing a library just to ask."""
    types: list[type] = []
    if (torch_module := sys.modules.get("torch")) is not None:
        types.append(torch_module.Tensor)
    if (numpy_module := sys.modules.get("numpy")) is not None:
        types.append(numpy_module.ndarray)
    return tuple(types)


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def flatten(obj: object) -> tuple[list[tuple[str, Any]], list[tuple[str, object]]]:
    """Split a loaded checkpoint into (name, tensor) and (name, plain value) pairs, in saved order."""
    flattener = _Flattener(_array_types())
    flattener.visit(obj, ROOT_NAME)
    return flattener.arrays, flattener.values


@dataclass
class _Flattener:
    array_types: tuple[type, ...]
    arrays: list[tuple[str, Any]] = field(default_factory=list)
    values: list[tuple[str, object]] = field(default_factory=list)
    open_containers: set[int] = field(default_factory=set)

    def visit(self, obj: object, name: str) -> None:
        if isinstance(obj, self.array_types):
            self.arrays.append((name, obj))
            return
        if isinstance(obj, Mapping) and obj:
            items: list[tuple[object, object]] = list(obj.items())
        elif isinstance(obj, (list, tuple)) and any(
            isinstance(v, (*self.array_types, Mapping, list, tuple)) for v in obj
        ):
            items = list(enumerate(obj))
        else:
            self.values.append((name, obj))
            return
        if id(obj) in self.open_containers:
            raise ValueError(f"the saved object contains itself at '{name}'")
        self.open_containers.add(id(obj))
        for key, value in items:
            self.visit(value, _join(name, key))
        self.open_containers.discard(id(obj))


def expand_quantized(name: str, tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """A quantized tensor as plain tensors: its integer values and its quantizer's parameters."""
    import torch

    if not tensor.is_quantized:
        return [(name, tensor)]
    parts = [(name, tensor.int_repr())]
    if tensor.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        parts.append((f"{name}.q_scale", torch.tensor([tensor.q_scale()], dtype=torch.float64)))
        parts.append((f"{name}.q_zero_point", torch.tensor([tensor.q_zero_point()], dtype=torch.int64)))
    else:
        parts.append((f"{name}.q_per_channel_scales", tensor.q_per_channel_scales()))
        parts.append((f"{name}.q_per_channel_zero_points", tensor.q_per_channel_zero_points()))
        parts.append((f"{name}.q_per_channel_axis", torch.tensor([tensor.q_per_channel_axis()])))
    return parts


# --- byte sources --------------------------------------------------------------------------------


class _ContentError(Exception):
    """The file's content cannot be read as its format says; it is then hashed as a plain file."""


Buffers = Callable[[], Iterator[bytes | memoryview]]


@dataclass
class _Array:
    """A tensor waiting to be hashed: what the digest records, and how to get its bytes in a worker."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    buffers: Buffers


@dataclass
class _Content:
    format: str
    arrays: list[_Array] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    keepalive: object = None  # the loaded object or mmap the buffers point into


def _opaque(note: str | None) -> _Content:
    return _Content(format="file", note=note)


def contiguous_pieces(
    x: Any, *, ready: Callable[[Any], bool], materialise: Callable[[Any], Any], nbytes: Callable[[Any], int]
) -> Iterator[Any]:
    """Row-major contiguous pieces of ``x`` whose concatenation is ``x``'s bytes; copies stay small."""
    if ready(x):
        yield x
        return
    size = nbytes(x)
    if len(x.shape) == 0 or size <= COPY_BUDGET_BYTES:
        yield materialise(x)
        return
    rows = int(x.shape[0])
    row_bytes = size // rows
    if row_bytes > COPY_BUDGET_BYTES:
        for i in range(rows):
            yield from contiguous_pieces(x[i], ready=ready, materialise=materialise, nbytes=nbytes)
        return
    step = COPY_BUDGET_BYTES // row_bytes
    for start in range(0, rows, step):
        yield materialise(x[start : start + step])


def _torch_array(name: str, tensor: torch.Tensor) -> _Array:
    tensor = tensor.detach()
    return _Array(
        name=name,
        dtype=torch_dtype_name(tensor.dtype),
        shape=tuple(int(d) for d in tensor.shape),
        nbytes=tensor.numel() * tensor.element_size(),
        buffers=lambda: _torch_buffers(tensor),
    )


def _torch_buffers(tensor: torch.Tensor) -> Iterator[memoryview]:
    import torch

    if tensor.device.type == "meta":  # no storage: nothing to hash beyond dtype and shape
        return
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    for piece in contiguous_pieces(
        tensor,
        ready=lambda t: t.is_contiguous() and not t.is_conj() and not t.is_neg(),
        materialise=lambda t: t.resolve_conj().resolve_neg().contiguous(),
        nbytes=lambda t: t.numel() * t.element_size(),
    ):
        yield memoryview(piece.reshape(-1).view(torch.uint8).numpy())


def _numpy_array(name: str, array: np.ndarray[Any, Any]) -> _Array:
    return _Array(
        name=name,
        dtype=numpy_dtype_name(array.dtype),
        shape=tuple(int(d) for d in array.shape),
        nbytes=int(array.nbytes),
        buffers=lambda: _numpy_buffers(array),
    )


def _numpy_buffers(array: np.ndarray[Any, Any]) -> Iterator[memoryview]:
    import numpy as np

    little = array.dtype.newbyteorder("<")
    for piece in contiguous_pieces(
        array,
        ready=lambda a: bool(a.flags.c_contiguous) and a.dtype == little,
        materialise=lambda a: np.ascontiguousarray(a, dtype=little),
        nbytes=lambda a: int(a.nbytes),
    ):
        yield memoryview(piece.reshape(-1).view(np.uint8))


def _arrays_from(named: Sequence[tuple[str, Any]]) -> list[_Array]:
    arrays: list[_Array] = []
    torch_module = sys.modules.get("torch")
    for name, value in named:
        if torch_module is not None and isinstance(value, torch_module.Tensor):
            arrays.extend(_torch_array(n, t) for n, t in expand_quantized(name, value))
        else:
            arrays.append(_numpy_array(name, value))
    return arrays


# --- formats -------------------------------------------------------------------------------------


def format_of(path: Path) -> str:
    """The format a file is read as, from its suffix."""
    suffix = path.suffix.lower()
    if suffix in TORCH_SUFFIXES:
        return "torch"
    if suffix == ".safetensors":
        return "safetensors"
    if suffix in (".npy", ".npz"):
        return "numpy"
    return "file"


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


def _refused_note(reason: str) -> str:
    return (
        f"content not hashed: torch.load(weights_only=True) refused the file ({reason}) and it is never "
        "unpickled further; the content hash is the file sha256"
    )


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
    except pickle.UnpicklingError as exc:
        return _opaque(_refused_note(_refused_reason(exc)))
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a damaged or foreign file
        return _opaque(_unreadable("torch", exc))
    try:
        named_arrays, values = flatten(obj)
    except (ValueError, RecursionError) as exc:
        return _opaque(_unreadable("torch", exc))
    return _Content(
        format="torch",
        arrays=_arrays_from(named_arrays),
        metadata=_metadata_digests(values),
        keepalive=obj,
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
    return _Content("safetensors", arrays, _metadata_digests(values), keepalive=mapped)


def _mapped_range(mapped: mmap.mmap, entry: SafetensorsEntry) -> Buffers:
    return lambda: iter((memoryview(mapped)[entry.start : entry.end],))


def _plan_npy(path: Path) -> _Content:
    import numpy as np

    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except _NPZ_ERRORS as exc:
        return _opaque(_unreadable("NumPy", exc))
    if not isinstance(array, np.ndarray):
        return _opaque(_unreadable("NumPy", ValueError("it holds no single array")))
    return _Content("numpy", [_numpy_array(ROOT_NAME, array)], {}, keepalive=array)


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


def _plan_npz(path: Path) -> _Content:
    import numpy as np

    arrays: list[_Array] = []
    try:
        with zipfile.ZipFile(path) as archive:
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
                arrays.append(_npz_member(path, info.filename, shape, fortran_order, dtype))
    except _NPZ_ERRORS as exc:
        return _opaque(_unreadable("NumPy .npz", exc))
    return _Content("numpy", arrays, {})


def _npz_member(
    path: Path, member: str, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype[Any]
) -> _Array:
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    streamable = not fortran_order and dtype == dtype.newbyteorder("<")
    return _Array(
        name=member.removesuffix(".npy"),
        dtype=numpy_dtype_name(dtype),
        shape=tuple(int(d) for d in shape),
        nbytes=nbytes,
        buffers=(lambda: _npz_stream(path, member, nbytes))
        if streamable
        else (lambda: _npz_loaded(path, member)),
    )


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


def _npz_loaded(path: Path, member: str) -> Iterator[memoryview]:
    import numpy as np

    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except _NPZ_ERRORS as exc:
        raise _ContentError(_unreadable("NumPy .npz", exc)) from exc
    yield from _numpy_buffers(array)


def _plan(path: Path) -> _Content:
    kind = format_of(path)
    if kind == "torch":
        return _plan_torch(path)
    if kind == "safetensors":
        return _plan_safetensors(path)
    if kind == "numpy":
        return _plan_npz(path) if path.suffix.lower() == ".npz" else _plan_npy(path)
    return _opaque(None)


# --- running the hashes --------------------------------------------------------------------------


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, streamed through one reused buffer."""
    digest = hashlib.sha256()
    buffer = bytearray(FILE_CHUNK_BYTES)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as f:
        while count := f.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def _sha256_array(array: _Array) -> str:
    digest = hashlib.sha256()
    for buffer in array.buffers():
        digest.update(buffer)
    return digest.hexdigest()


@dataclass
class _Pending:
    """One file whose hashes are running on the pool."""

    path: Path
    relpath: str
    file_sha256: concurrent.futures.Future[str]
    content: _Content
    array_sha256: list[concurrent.futures.Future[str]]

    def result(self) -> CheckpointDigest:
        try:
            whole_file = self.file_sha256.result()
            size = self.path.stat().st_size
            content = self.content
            try:
                shas = [f.result() for f in self.array_sha256]
            except _ContentError as exc:
                content, shas = _opaque(str(exc)), []
        except OSError as exc:
            raise _read_problem(self.path, exc) from exc
        if content.format == "file":
            return CheckpointDigest(
                self.relpath, size, whole_file, whole_file, "file", (), {}, None, content.note
            )
        tensors = tuple(
            sorted(
                (
                    TensorDigest(a.name, a.dtype, a.shape, sha)
                    for a, sha in zip(content.arrays, shas, strict=True)
                ),
                key=TensorDigest.sort_key,
            )
        )
        return CheckpointDigest(
            path=self.relpath,
            size=size,
            file_sha256=whole_file,
            content_sha256=content_sha256(tensors),
            format=content.format,
            tensors=tensors,
            metadata=dict(sorted(content.metadata.items())),
            metadata_sha256=metadata_sha256(content.metadata),
            note=content.note,
        )


def _read_problem(path: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot read output file {path} ({exc.strerror or exc}); make sure the job leaves its outputs "
        "readable and does not remove them while they are hashed"
    )


def _submit(pool: concurrent.futures.ThreadPoolExecutor, path: Path, relpath: str) -> _Pending:
    whole_file = pool.submit(file_sha256, path)  # the largest task: start it first
    try:
        content = _plan(path)
    except OSError as exc:
        raise _read_problem(path, exc) from exc
    largest_first = sorted(content.arrays, key=lambda a: a.nbytes, reverse=True)
    futures = {id(a): pool.submit(_sha256_array, a) for a in largest_first}
    return _Pending(path, relpath, whole_file, content, [futures[id(a)] for a in content.arrays])


def _check_workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if workers < 1:
        raise UsageError(f"workers must be at least 1, not {workers}; omit it to use every available core")
    return workers


def _hash_files(files: Sequence[tuple[Path, str]], workers: int | None) -> list[CheckpointDigest]:
    """Hash files on one pool, planning a few files ahead so small and large ones overlap."""
    count = _check_workers(workers)
    ahead = max(2, 2 * count)
    results: list[CheckpointDigest] = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=count, thread_name_prefix="reprobox-hash")
    try:
        window: deque[_Pending] = deque()
        for path, relpath in files:
            window.append(_submit(pool, path, relpath))
            if len(window) > ahead:
                results.append(window.popleft().result())
        while window:
            results.append(window.popleft().result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def _relative_posix(path: Path, root: Path) -> str:
    absolute, base = Path(os.path.normpath(path.absolute())), Path(os.path.normpath(root.absolute()))
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError:
        raise UsageError(
            f"checkpoint {path} is not inside {root}; pass relative_to= the output directory that holds it"
        ) from None


def hash_checkpoint(path: Path, *, relative_to: Path, workers: int | None = None) -> CheckpointDigest:
    """Digest one checkpoint: its file sha256 and canonical content hash, hashed in parallel."""
    return _hash_files([(path, _relative_posix(path, relative_to))], workers)[0]


def content_digest(path: Path, *, workers: int | None = None) -> tuple[str, tuple[TensorDigest, ...]]:
    """The content hash and tensor digests alone, without the file's own sha256 (benchmarks, tools)."""
    content = _plan(path)
    if content.format == "file":
        return file_sha256(path), ()
    largest_first = sorted(content.arrays, key=lambda a: a.nbytes, reverse=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=_check_workers(workers)) as pool:
        shas = list(pool.map(_sha256_array, largest_first))
    tensors = tuple(
        sorted(
            (TensorDigest(a.name, a.dtype, a.shape, sha) for a, sha in zip(largest_first, shas, strict=True)),
            key=TensorDigest.sort_key,
        )
    )
    return content_sha256(tensors), tensors


def hash_outputs(
    output_dir: Path, patterns: Sequence[str], *, workers: int | None = None
) -> list[CheckpointDigest]:
    """Digest the files under ``output_dir`` matching ``patterns`` (every file when empty), by path.

    Patterns are relative globs: ``*``, ``?`` and ``[...]`` match within one path component and ``**``
    matches any number of directories. Symbolic links to directories are not descended; a symbolic link
    to a file counts only if its target lies inside ``output_dir``.
    """
    if not output_dir.is_dir():
        raise UsageError(f"output directory {output_dir} does not exist; check the job's outputs setting")
    root = output_dir.resolve()
    compiled = [_pattern_parts(p) for p in patterns]
    selected = [
        rel
        for rel in sorted(_files_under(root))
        if not compiled or any(_matches(parts, rel.split("/")) for parts in compiled)
    ]
    return _hash_files([(root / rel, rel) for rel in selected], workers)


def _files_under(root: Path) -> Iterator[str]:
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for filename in filenames:
            candidate = Path(dirpath) / filename
            try:
                if not stat.S_ISREG(candidate.stat().st_mode):
                    continue
                if candidate.is_symlink() and not candidate.resolve().is_relative_to(root):
                    continue
            except OSError:  # a dangling link or a file gone since listing
                continue
            yield candidate.relative_to(root).as_posix()


def _pattern_parts(pattern: str) -> list[str]:
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if not parts or pattern.startswith("/") or ".." in parts:
        raise UsageError(
            f"output pattern '{pattern}' must be a non-empty glob relative to the output directory, "
            "without a leading '/' or '..'"
        )
    return parts


def _matches(pattern: Sequence[str], path: Sequence[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and _matches(rest, path[1:])


# --- loading tensors for numeric comparison ------------------------------------------------------


def load_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    """The tensors (memory-mapped where the format allows) and plain values, named as hashing names them.

    A name that occurs twice gets ``#2``, ``#3`` ... appended in saved order.
    """
    kind = format_of(path)
    if kind == "torch":
        return _load_torch_tensors(path)
    if kind == "safetensors":
        return _load_safetensors_tensors(path)
    if kind == "numpy":
        return _load_numpy_tensors(path)
    return {}, {}


def _unique(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        key, n = name, 1
        while key in result:
            n += 1
            key = f"{name}#{n}"
        result[key] = value
    return result


def _load_torch_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    import torch

    try:
        obj = _torch_load(path)
    except pickle.UnpicklingError as exc:
        raise UsageError(
            f"{path} cannot be loaded safely ({_refused_reason(exc)}); save plain tensors with "
            "torch.save(model.state_dict()) or safetensors to compare it tensor by tensor"
        ) from None
    named_arrays, values = flatten(obj)
    tensors: list[tuple[str, torch.Tensor]] = []
    for name, value in named_arrays:
        if isinstance(value, torch.Tensor):
            tensors.extend(expand_quantized(name, value.detach()))
        else:
            tensors.append((name, _numpy_to_torch(value)))
    return _unique(tensors), _unique(values)


def _numpy_to_torch(array: np.ndarray[Any, Any]) -> torch.Tensor:
    import numpy as np
    import torch

    little = array.dtype.newbyteorder("<")
    if array.dtype.fields is None and array.dtype.kind in "biufc":
        if array.dtype != little:
            array = array.astype(little)
        if not array.flags.writeable:  # torch warns on read-only memory; copy-on-write maps avoid this
            array = array.copy()
        return torch.from_numpy(array)
    raw = np.ascontiguousarray(array, dtype=little).view(np.uint8)  # no torch dtype: compare bytes
    return torch.from_numpy(raw.reshape(*array.shape, little.itemsize))


def _load_safetensors_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    import numpy as np
    import torch

    try:
        entries, metadata = read_safetensors_header(path)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a valid safetensors file ({exc}); write it again") from None
    mapped = np.memmap(path, dtype=np.uint8, mode="c")  # copy-on-write: writable for torch, file untouched
    tensors: list[tuple[str, torch.Tensor]] = []
    for e in entries:
        raw = torch.from_numpy(mapped[e.start : e.end])
        torch_dtype = getattr(torch, e.dtype, None)
        if isinstance(torch_dtype, torch.dtype):
            tensors.append((e.name, raw.view(torch_dtype).reshape(e.shape)))
        else:
            tensors.append((e.name, raw))
    values: dict[str, object] = {}
    if isinstance(metadata, dict):
        values = {_join("__metadata__", k): v for k, v in metadata.items()}
    elif metadata is not None:
        values = {"__metadata__": metadata}
    return _unique(tensors), values


def _load_numpy_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, object]]:
    import numpy as np

    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                named = [(name, archive[name]) for name in archive.files]
        else:
            named = [(ROOT_NAME, np.load(path, mmap_mode="c", allow_pickle=False))]
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{path} is not a readable NumPy file ({exc}); write it again") from None
    return _unique([(name, _numpy_to_torch(array)) for name, array in named]), {}
