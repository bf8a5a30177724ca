"""``joblib.dump``'s files: a pickle whose NumPy arrays are not pickled but written as raw bytes into the
stream, each right after the ``joblib.numpy_pickle.NumpyArrayWrapper`` that describes it.

joblib's own unpickler reads the wrapper, then at its BUILD reads the array's bytes from the file and
puts the array on the stack in its place. So does this reader, without importing joblib: the wrapper is
a stand-in like any other global, and its state (dtype, shape, order, alignment) says how many bytes
follow. When the wrapper asks for alignment, one byte gives the padding's length and that many bytes of
padding follow (framing); then the array's bytes, which become a tensor named by the wrapper's place in
the object and are read by ``pread`` only when hashed, as torch's storages are. An array of Python
objects follows as a nested pickle, read by this same safe unpickler. A dtype NumPy's plain numbers do
not cover (strings, records, big-endian numbers) is a tensor of its raw bytes, one more dimension of
the element's size.

The C unpickler cannot stop inside the stream, so a joblib file is unpickled by Python's own
``pickle._Unpickler``, with the safe reader's globals and a memory charge for each opcode in place of
the opcode walk made before the C unpickler runs. A plain pickle is read by the C unpickler first; this
reader runs only where that one failed or met a wrapper, and its reason counts only if it met one.
"""

from __future__ import annotations

import math
import pickle
import pickletools
import struct
from collections.abc import Callable
from typing import IO, Any, ClassVar

from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget
from reprobox.guest.hashing._filebytes import FileSpan
from reprobox.guest.hashing._layout import Span, complement
from reprobox.guest.hashing._pickle_objects import DTypeSpec, StorageRef, TensorSpec, _shape, _StandIn
from reprobox.guest.hashing._pickle_torch import OpenFile, Unpickled
from reprobox.guest.hashing._pickle_unpickler import (
    MEMORY_FLOOR,
    MEMORY_PER_DATA_BYTE,
    OPCODE_COST,
    OPCODE_FLOOR_COST,
    Globals,
    NoStorages,
    SafeUnpickler,
    load_checked,
)
from reprobox.guest.hashing._torch_types import DTYPES, TorchDType

WRAPPERS = frozenset(
    {
        "joblib.numpy_pickle.NumpyArrayWrapper",
        "sklearn.externals.joblib.numpy_pickle.NumpyArrayWrapper",  # scikit-learn's copy, before 0.23
    }
)
_RAW_BYTES = DTYPES["uint8"]
_TYPESTR_CODES = frozenset("bBiufcSUVMm")
_CPU_CHECK_EVERY = 1 << 14  # opcodes between checks of the file's CPU budget


class _Bounded:
    """The file as the unpickler reads it: no read reaches past its end, whatever length a pickle asks."""

    def __init__(self, stream: IO[bytes], end: int) -> None:
        self.stream, self.end = stream, end

    def read(self, n: int = -1) -> bytes:
        left = self.end - self.stream.tell()
        return self.stream.read(left if n < 0 else min(n, left))

    def readline(self) -> bytes:
        return self.stream.readline(self.end - self.stream.tell())


class _ArrayBytes:
    """Where one joblib array's bytes lie: the storage its tensor is a view of."""

    def __init__(self, file: OpenFile, offset: int) -> None:
        self.file, self.offset = file, offset

    def storage_span(self, key: str, nbytes: int) -> FileSpan:
        return self.file.span(self.offset, nbytes)


class _Read:
    """What one file's unpicklers share: the globals, the memory left, and the bytes that are not pickle."""

    def __init__(self, file: OpenFile) -> None:
        self.file = file
        self.globals = Globals()
        self.budget = MEMORY_PER_DATA_BYTE * file.identity.size + MEMORY_FLOOR
        self.opcodes = 0
        self.arrays: list[Span] = []  # each array's bytes
        self.framing: list[Span] = []  # each padding-length byte and its padding


def _charged(name: str, op: Callable[[Any], None]) -> Callable[[Any], None]:
    cost = OPCODE_COST.get(name, OPCODE_FLOOR_COST)

    def charged(unpickler: JoblibUnpickler) -> None:
        shared = unpickler.shared
        shared.budget -= cost
        shared.opcodes += 1
        if not shared.opcodes % _CPU_CHECK_EVERY:
            check_cpu_budget(f"{shared.opcodes} opcodes of a joblib file read")
        if shared.budget < 0:
            raise OverLimit(
                f"the pickle would build far more objects than its bytes hold "
                f"(over {MEMORY_PER_DATA_BYTE} bytes of memory per byte)"
            )
        op(unpickler)

    return charged


_NAMES = {opcode.code.encode("latin1")[0]: opcode.name for opcode in pickletools.opcodes}


class JoblibUnpickler(pickle._Unpickler):
    """Python's unpickler with the safe reader's globals, which reads an array after each wrapper."""

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = {
        key: _charged(_NAMES.get(key, "?"), op) for key, op in pickle._Unpickler.dispatch.items()
    }

    # set by Python's unpickler as it loads (typeshed declares none of them)
    stack: list[Any]
    append: Callable[[object], None]
    read: Callable[[int], bytes]
    readinto: Callable[[bytearray], int]

    def __init__(self, shared: _Read, nested: bool = False) -> None:
        super().__init__(_Bounded(shared.file.stream, shared.file.identity.size), encoding="latin1")
        self.shared, self.nested = shared, nested
        self.met_wrapper = False

    def find_class(self, module: str, name: str) -> Any:
        return self.shared.globals.find(module, name)

    def persistent_load(self, pid: Any) -> Any:
        return NoStorages().refuse(pid)

    def load_bytearray8(self) -> None:
        """As Python's, but the length is checked against the file before the bytearray is made."""
        (length,) = struct.unpack("<Q", self.read(8))
        if length > self.shared.file.identity.size:
            raise OverLimit(f"a bytearray of {length} bytes is longer than the file")
        data = bytearray(length)
        self.readinto(data)
        self.append(data)

    def load_wrapper_build(self) -> None:
        pickle._Unpickler.load_build(self)  # type: ignore[attr-defined]
        top = self.stack[-1]
        if not self.nested and isinstance(top, _StandIn) and top.rb_name in WRAPPERS:
            self.met_wrapper = True
            self.stack[-1] = _array_after(top, self.shared)

    dispatch[pickle.BYTEARRAY8[0]] = _charged("BYTEARRAY8", load_bytearray8)
    dispatch[pickle.BUILD[0]] = _charged("BUILD", load_wrapper_build)


def _array_after(wrapper: _StandIn, shared: _Read) -> object:
    """The array whose bytes follow ``wrapper`` in the file, as joblib's ``read_array`` reads them."""
    state = wrapper._rb_state[-1] if wrapper._rb_state else None
    if not isinstance(state, dict):
        raise ValueError("a joblib NumpyArrayWrapper has no state")
    shape = _shape(state.get("shape"), "a joblib array's shape")
    dtype, order, alignment = (
        state.get("dtype"),
        state.get("order", "C"),
        state.get("numpy_array_alignment_bytes"),
    )
    if not isinstance(dtype, DTypeSpec) or order not in ("C", "F"):
        raise ValueError("a joblib NumpyArrayWrapper has no NumPy dtype or an order other than 'C' or 'F'")
    stream = shared.file.stream
    if isinstance(dtype.typestr, str) and dtype.typestr.startswith("O"):
        return JoblibUnpickler(shared, nested=True).load()  # an array of objects: a pickle of its own
    if alignment is not None:
        start = stream.tell()
        padding = stream.read(1)
        if not padding or start + 1 + padding[0] > shared.file.identity.size:
            raise ValueError("a joblib array's padding runs past the end of the file (the file is truncated)")
        shared.framing.append((start, start + 1 + padding[0]))
        stream.seek(start + 1 + padding[0])
    offset = stream.tell()
    element, itemsize = _element(dtype)
    nbytes = math.prod(shape) * itemsize
    if offset + nbytes > shared.file.identity.size:
        raise ValueError(
            f"a joblib array of shape {list(shape)} needs {nbytes} bytes at byte {offset}, past the end of "
            f"the file ({shared.file.identity.size} bytes): the file is truncated or its shape is wrong"
        )
    shared.arrays.append((offset, offset + nbytes))
    stream.seek(offset + nbytes)
    storage = StorageRef(_ArrayBytes(shared.file, offset), f"joblib array at byte {offset}", element, nbytes)
    strides = _strides(shape, fortran=order == "F")
    if element is _RAW_BYTES and itemsize != 1:  # each element as its bytes, one more dimension
        return TensorSpec(storage, 0, (*shape, itemsize), (*(s * itemsize for s in strides), 1))
    return TensorSpec(storage, 0, shape, strides)


def _element(dtype: DTypeSpec) -> tuple[TorchDType, int]:
    """The tensor dtype an array's elements are read as, and the bytes of one element."""
    import numpy as np

    resolved = dtype.resolve()
    if resolved is not None and (resolved.byteorder != ">" or resolved.itemsize == 1):
        return DTYPES[resolved.name], resolved.itemsize
    typestr = dtype.typestr if isinstance(dtype.typestr, str) else ""
    if dtype.elsize is not None:
        return _RAW_BYTES, dtype.elsize
    if typestr[:1] in _TYPESTR_CODES and typestr[1:].isdigit():
        return _RAW_BYTES, np.dtype(typestr).itemsize
    raise ValueError(f"a joblib array's dtype {typestr!r} has no element size the reader knows")


def _strides(size: tuple[int, ...], fortran: bool) -> tuple[int, ...]:
    """Row-major strides, or column-major ones for an array joblib wrote in Fortran order."""
    dims = list(reversed(size)) if not fortran else list(size)
    strides, step = [], 1
    for dim in dims:
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides)) if not fortran else tuple(strides)


def read_plain(file: OpenFile) -> Unpickled:
    """A plain pickle or a joblib file; ValueError (or OverLimit) with the reason it cannot be read."""
    stream = file.stream
    try:
        unpickler = SafeUnpickler(stream, NoStorages().refuse)
        obj = load_checked(unpickler, stream, file.identity.size)
    except (ValueError, pickle.UnpicklingError, TypeError, AttributeError, OverflowError) as exc:
        return _read_joblib(file, exc)
    plain = Unpickled(obj, unpickler.global_names, parsed=((0, stream.tell()),))
    return plain if WRAPPERS.isdisjoint(unpickler.global_names.values()) else _read_joblib(file, plain)


def _read_joblib(file: OpenFile, plain: Unpickled | BaseException) -> Unpickled:
    """The file as joblib reads it, where it holds a wrapper; else what the C unpickler made of it (its
    result, or its failure: a pickle the C unpickler's checks refused is refused)."""
    stream = file.stream
    stream.seek(0)
    shared = _Read(file)
    unpickler = JoblibUnpickler(shared)
    try:
        obj = unpickler.load()
    except (IndexError, KeyError, EOFError, struct.error, pickle.UnpicklingError) as exc:
        if not unpickler.met_wrapper:
            return _plain(plain)
        reason = f"an unknown opcode {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__
        raise ValueError(f"not a readable joblib file ({reason}, before byte {stream.tell()})") from None
    except Exception:
        if not unpickler.met_wrapper:
            return _plain(plain)
        raise
    if not unpickler.met_wrapper:
        return _plain(plain)
    end = stream.tell()
    parsed = complement(end, [*shared.arrays, *shared.framing])
    return Unpickled(obj, shared.globals.names, parsed=tuple(parsed), framing=tuple(shared.framing))


def _plain(plain: Unpickled | BaseException) -> Unpickled:
    if isinstance(plain, BaseException):
        raise plain
    return plain
