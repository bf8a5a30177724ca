"""A structural reader for pickled checkpoints that imports and runs nothing named in the file.

``torch.load(weights_only=True)`` refuses whole files for one foreign global: ``torch.save(model)``,
timm's ``.pth.tar`` (an ``argparse.Namespace``), Hugging Face's ``training_args.bin`` and
``rng_state.pth``, Lightning's ``.ckpt`` (``AttributeDict``), plain ``.pkl`` files. This reader still
yields their tensors and plain values. It is a ``pickle.Unpickler`` whose ``find_class`` never imports:
a small table of known globals (torch tensors and storages, NumPy arrays, dtypes and scalars,
``OrderedDict``, ``set``, ``bytes`` and the like) is rebuilt by our own functions, and every other
global becomes an inert stand-in class that records its arguments, state and items. Tensor bytes are
read from the file itself (memory-mapped, copy-on-write), never through ``torch.load``.

``fickling`` is not used: it decides whether a pickle is safe to hand to the real unpickler (by an
allowlist of imports) or decompiles it to Python source, but it yields no values without running the
allowed globals, and it would be one more locked dependency in every job image.

Containers: torch's zip format (``<archive>/data.pkl`` with storages in ``<archive>/data/<key>``),
torch's legacy non-zip format (a magic number, then pickles, then raw storages) and plain pickles of
protocol 0 to 5. Torch's pre-1.0 tar format is refused.

A stand-in becomes a mapping, so its fields get dotted names like any other mapping's:

- ``__class__``: the ``module.Name`` the pickle named (``args.__class__ = "argparse.Namespace"``);
- its state's keys, merged in (``args.output``, ``_modules.fc._parameters.weight``), then the items
  set on it (``AttributeDict`` keys, ``hyper_parameters.lr``);
- ``__args__`` and ``__kwargs__``: what the class was called with (``SchedulerType("linear")``),
  ``__state__``: a state that is not a mapping, ``__items__``: items appended to it,
  ``__attribute__``: the member of ``getattr(Class, "MEMBER")`` (how enums pickle).

A global used as a value is its ``"module.Name"`` string; NumPy scalars become Python scalars; NumPy
arrays of other than plain numeric dtypes become ``{"__class__": "numpy.ndarray", "dtype", "shape",
"data"}``; an object reached again while it is being read is ``"<cycle: module.Name>"``.

A malformed, truncated or hostile file raises ``ValueError`` with a short reason: the opcodes are
checked against the data before anything is unpickled, and nesting depth, expanded size and the bytes
tensors span are bounded.
"""

from __future__ import annotations

import io
import mmap
import pickle
import pickletools
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from reprobox.guest.hashing._pickle_objects import (
    MODULE_ALIASES,
    SAFE_CALLABLES,
    NdarrayType,
    StorageRef,
    StorageType,
    stand_in_class,
)
from reprobox.guest.hashing._pickle_plain import Plainer

if TYPE_CHECKING:
    import numpy as np

READER_NAME = "safe pickle reader"

PICKLE_SUFFIXES = frozenset({".pkl", ".pickle"})

_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."  # pickle.dumps(0x1950A86A20F9469CFC6C, 2)
_ZIP_MAGIC = b"PK\x03\x04"
_MAX_GLOBALS = 10_000
_MAX_PICKLE_BYTES = 1 << 30  # a zip's data.pkl; tensors live outside it
_EXPANSION = 16  # tensors may span this many times the file's bytes (stride-0 tensors); at least 1 GiB

_ERRORS = (
    pickle.UnpicklingError,
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    EOFError,
    RuntimeError,
    OverflowError,
    RecursionError,
    MemoryError,
    struct.error,
    zipfile.BadZipFile,
)


@dataclass(frozen=True)
class PickleRead:
    """A pickled file as plain data: dicts, lists, tuples, scalars, tensors and NumPy arrays."""

    obj: object
    container: str  # "torch" (zip or legacy torch.save) or "pickle"
    keepalive: object  # the memory map the tensors point into


def pickled_kind(path: Path) -> str | None:
    """``"torch"`` for torch.save files, ``"pickle"`` for other pickles, else None; reads a few bytes."""
    with path.open("rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
    if head.startswith(_ZIP_MAGIC):
        return "torch" if _zip_pickle_name(path) is not None else None
    if head.startswith(_LEGACY_MAGIC):
        return "torch"
    if len(head) >= 3 and head[0] == pickle.PROTO[0] and 2 <= head[1] <= pickle.HIGHEST_PROTOCOL:
        return "pickle"
    return None


def _zip_pickle_name(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    return next((n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")), None)


def read_pickle(path: Path) -> PickleRead:
    """The file's object tree, without importing or running anything it names; ValueError if unreadable."""
    size = path.stat().st_size
    if size == 0:
        raise ValueError("the file is empty")
    with path.open("rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    budget = max(_EXPANSION * size, 1 << 30)
    try:
        if head.startswith(_ZIP_MAGIC):
            obj, plainer = _read_zip(path, mapped, budget)
            container = "torch"
        elif head.startswith(_LEGACY_MAGIC):
            obj, plainer = _read_legacy(mapped, budget)
            container = "torch"
        else:
            source = _NoStorages()
            unpickler = _SafeUnpickler(mapped, source.refuse)
            obj, plainer = _load(unpickler, mapped, len(mapped)), Plainer(unpickler.global_names, budget)
            container = "pickle"
        plain = plainer.plain(obj)
    except _ERRORS as exc:
        raise ValueError(_reason(exc)) from None
    return PickleRead(plain, container, mapped)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the pickle nests too deeply"
    if isinstance(exc, MemoryError):
        return "the pickle asks for more memory than there is"
    text = str(exc).splitlines()[0].strip() if str(exc).strip() else ""
    return text[:200] or type(exc).__name__


# --- unpickling ----------------------------------------------------------------------------------


class _SafeUnpickler(pickle.Unpickler):
    """Globals come from our table or are stand-ins; persistent ids go to the container's callback."""

    def __init__(self, stream: IO[bytes] | mmap.mmap, persistent: Callable[[object], object]) -> None:
        super().__init__(stream, encoding="latin1")  # py2 str; an mmap reads like a file
        self._persistent = persistent
        self._classes: dict[str, object] = {}
        self.global_names: dict[int, str] = {}  # id(global) -> "module.Name", for globals used as values

    def find_class(self, module: str, name: str) -> Any:
        if not isinstance(module, str) or not isinstance(name, str):
            raise ValueError("a global is named by something other than text")
        module = MODULE_ALIASES.get(module, module)
        qualified = f"{module}.{name}"
        if qualified not in self._classes:
            if len(self._classes) >= _MAX_GLOBALS:
                raise ValueError(f"the pickle names more than {_MAX_GLOBALS} globals")
            found = _known_global(module, name)
            self._classes[qualified] = found if found is not None else stand_in_class(qualified)
            self.global_names[id(self._classes[qualified])] = qualified
        return self._classes[qualified]

    def persistent_load(self, pid: Any) -> Any:
        return self._persistent(pid)


def _known_global(module: str, name: str) -> object | None:
    safe = SAFE_CALLABLES.get((module, name))
    if safe is not None:
        return safe
    if module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray") and name == "ndarray":
        return NdarrayType()
    if module in ("torch", "torch.storage"):
        storage = _storage_types().get(name)
        if storage is not None:
            return storage
    if module == "torch":
        return _torch_values().get(name)
    return None


_STORAGE_NAMES = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
    "UntypedStorage": "uint8",
    # quantized storages hold their integer representation
    "QInt8Storage": "int8",
    "QUInt8Storage": "uint8",
    "QInt32Storage": "int32",
    "QUInt4x2Storage": "uint8",
    "QUInt2x4Storage": "uint8",
}


def _storage_types() -> dict[str, StorageType]:
    import torch

    return {name: StorageType(name, getattr(torch, dtype)) for name, dtype in _STORAGE_NAMES.items()}


def _torch_values() -> dict[str, object]:
    """torch's dtypes and quantization schemes by name (``torch.float32`` pickled as a global)."""
    import torch

    return {n: v for n, v in vars(torch).items() if isinstance(v, (torch.dtype, torch.qscheme))}


def _check_opcodes(stream: IO[bytes] | mmap.mmap, end: int) -> None:
    """Walk the opcodes before unpickling: counted data, frames and memo indices must fit the file."""
    start = stream.tell()
    readable = cast("IO[bytes]", stream)  # an mmap reads like a binary file
    for ops, (op, arg, pos) in enumerate(pickletools.genops(readable), start=1):
        number = arg if isinstance(arg, int) else 0
        if op.name == "PROTO" and not 0 <= number <= pickle.HIGHEST_PROTOCOL:
            raise ValueError(f"unknown pickle protocol {arg}")
        if op.name == "FRAME" and number > end - (pos or 0):
            raise ValueError("a pickle frame runs past the end of the data")
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and number > ops:
            raise ValueError("a pickle memo index is out of range")
    stream.seek(start)


def _load(unpickler: _SafeUnpickler, stream: IO[bytes] | mmap.mmap, end: int) -> object:
    _check_opcodes(stream, end)
    return unpickler.load()


class _NoStorages:
    def refuse(self, pid: object) -> object:
        raise ValueError("a plain pickle refers to persistent ids, which only torch files define")


# --- torch's zip format ----------------------------------------------------------------------------


class _ZipStorages:
    """Storages of a torch zip archive: uncompressed members, read in place from the memory map."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str, mapped: mmap.mmap) -> None:
        self._members = {info.filename: info for info in archive.infolist()}
        self._prefix = prefix
        self._mapped = mapped
        self._refs: dict[str, StorageRef] = {}

    def persistent_load(self, pid: object) -> StorageRef:
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise ValueError("a persistent id is not a torch storage")
        _tag, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, StorageType) or not isinstance(key, str):
            raise ValueError("a persistent id names no storage type or key")
        if type(numel) is not int or numel < 0:
            raise ValueError(f"storage '{key}' has no valid element count")
        if key not in self._refs:
            self._refs[key] = StorageRef(self, key, storage_type.dtype, numel * storage_type.dtype.itemsize)
        return self._refs[key]

    def storage_bytes(self, key: str, nbytes: int) -> np.ndarray[Any, Any]:
        info = self._members.get(f"{self._prefix}data/{key}")
        if info is None:
            raise ValueError(f"storage '{key}' is missing from the archive")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"storage '{key}' is compressed, which torch never writes")
        if info.file_size < nbytes:
            raise ValueError(f"storage '{key}' holds {info.file_size} bytes, fewer than its {nbytes}")
        start = _member_data_offset(self._mapped, info)
        return _bytes_at(self._mapped, start, nbytes)


def _member_data_offset(mapped: mmap.mmap, info: zipfile.ZipInfo) -> int:
    header = mapped[info.header_offset : info.header_offset + 30]
    if len(header) < 30 or not header.startswith(_ZIP_MAGIC):
        raise ValueError(f"member '{info.filename}' has no local header")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    offset: int = info.header_offset + 30 + name_len + extra_len
    return offset


def _bytes_at(mapped: mmap.mmap, start: int, nbytes: int) -> np.ndarray[Any, Any]:
    import numpy as np

    if start < 0 or start + nbytes > len(mapped):
        raise ValueError("a storage runs past the end of the file")
    return np.frombuffer(mapped, dtype=np.uint8, count=nbytes, offset=start)  # a view, never copied


def _read_zip(path: Path, mapped: mmap.mmap, budget: int) -> tuple[object, Plainer]:
    name = _zip_pickle_name(path)
    if name is None:
        raise ValueError("not a torch zip archive (no <archive>/data.pkl member, or a damaged directory)")
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > min(len(mapped), _MAX_PICKLE_BYTES):
            raise ValueError("data.pkl is compressed or larger than the file")
        data = archive.read(info)
        prefix = name.removesuffix("data.pkl")
        byteorder = prefix + "byteorder"
        big = byteorder in archive.namelist() and archive.read(byteorder)[:8] == b"big"
        storages = _ZipStorages(archive, prefix, mapped)
    stream = io.BytesIO(data)
    unpickler = _SafeUnpickler(stream, storages.persistent_load)
    obj = _load(unpickler, stream, len(data))
    return obj, Plainer(unpickler.global_names, budget, byteswap=big)


# --- torch's legacy format -------------------------------------------------------------------------


class _LegacyStorages:
    """Storages of the legacy format: after the pickles, each is an 8-byte count and its raw bytes."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self._mapped = mapped
        self._roots: dict[str, StorageRef] = {}
        self._spans: dict[str, tuple[int, int]] = {}

    def persistent_load(self, pid: object) -> object:
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] in ("module", b"module"):
            return pid[1]  # a module class saved with its source: the stand-in class
        if not isinstance(pid, tuple) or len(pid) != 6 or pid[0] not in ("storage", b"storage"):
            raise ValueError("a persistent id is not a torch storage")
        _tag, storage_type, key, _location, numel, view = pid
        if not isinstance(storage_type, StorageType) or not isinstance(key, str):
            raise ValueError("a persistent id names no storage type or key")
        if type(numel) is not int or numel < 0:
            raise ValueError(f"storage '{key}' has no valid element count")
        if key not in self._roots:
            self._roots[key] = StorageRef(self, key, storage_type.dtype, numel * storage_type.dtype.itemsize)
        if view is None:
            return self._roots[key]
        if not isinstance(view, tuple) or len(view) != 3 or not all(type(v) is int for v in view[1:]):
            raise ValueError(f"storage '{key}' has a malformed view")
        _view_key, offset, view_numel = view
        root = self._roots[key]
        return StorageRef(self, key, root.dtype, root.nbytes, view=(offset, view_numel))

    def locate(self, keys: object, start: int) -> None:
        """Find each storage's bytes, in the order the key list gives them."""
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("the storage key list is malformed")
        position = start
        for key in keys:
            root = self._roots.get(key)
            if root is None:
                raise ValueError(f"storage '{key}' is listed but never used")
            count = self._mapped[position : position + 8]
            if len(count) < 8:
                raise ValueError("the file ends before its storages")
            (numel,) = struct.unpack("<q", count)
            nbytes = numel * root.dtype.itemsize
            if numel < 0 or nbytes != root.nbytes or position + 8 + nbytes > len(self._mapped):
                raise ValueError(f"storage '{key}' does not fit the file")
            self._spans[key] = (position + 8, nbytes)
            position += 8 + nbytes

    def storage_bytes(self, key: str, nbytes: int) -> np.ndarray[Any, Any]:
        span = self._spans.get(key)
        if span is None:
            raise ValueError(f"storage '{key}' has no data in the file")
        return _bytes_at(self._mapped, span[0], min(nbytes, span[1]))


def _read_legacy(mapped: mmap.mmap, budget: int) -> tuple[object, Plainer]:
    storages = _LegacyStorages(mapped)
    mapped.seek(0)
    end = len(mapped)
    header = [_load(_SafeUnpickler(mapped, _NoStorages().refuse), mapped, end) for _ in range(3)]
    magic, version, info = header
    if magic != 0x1950A86A20F9469CFC6C or version != 1001 or not isinstance(info, dict):
        raise ValueError("the legacy torch header is malformed")
    unpickler = _SafeUnpickler(mapped, storages.persistent_load)
    obj = _load(unpickler, mapped, end)
    keys = _load(_SafeUnpickler(mapped, _NoStorages().refuse), mapped, end)
    storages.locate(keys, mapped.tell())
    return obj, Plainer(unpickler.global_names, budget)  # legacy storages are always little-endian
