"""Torch's tensors, dtypes, devices and quantization schemes, for reading torch files without torch.

A torch file names its dtypes as globals (``torch.float32``, ``torch.float8_e4m3fn``) and its storages
by class (``torch.FloatStorage``). The safe pickle reader turns them into the placeholders here: each
dtype has torch's name, its element size and the NumPy dtype that carries its bytes (the same bytes,
viewed as an unsigned integer of the same width where NumPy has no such number: bf16, float8, complex32).
A tensor is a ``SavedTensor``: torch's dtype and the saved shape, and a loader that reads its elements
from the file (with the saved strides applied) each time they are asked for, so no tensor's bytes are
held before it is hashed. Used as values, the placeholders canonicalise exactly as torch's own objects
do (``{"object": "torch.dtype", "repr": "torch.float32"}``), so a value's digest does not depend on which
reader read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from reprobox.guest.hashing._filebytes import FileSpan


@dataclass(frozen=True)
class TorchDType:
    """A torch dtype: its name, element size, and the NumPy typestr that holds its elements."""

    name: str
    itemsize: int
    carrier: str  # a little-endian NumPy typestr of ``itemsize`` bytes
    numeric: bool = True  # the carrier holds the values themselves (NumPy can negate or conjugate them)

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("complex")

    def __repr__(self) -> str:
        return f"torch.{self.name}"


TorchDType.__module__, TorchDType.__qualname__ = "torch", "dtype"  # as canonical_value names torch's own


def _dtype(name: str, itemsize: int, carrier: str | None = None) -> TorchDType:
    return TorchDType(name, itemsize, carrier or f"<u{itemsize}", numeric=carrier is not None)


_DTYPES = [
    _dtype("float64", 8, "<f8"),
    _dtype("float32", 4, "<f4"),
    _dtype("float16", 2, "<f2"),
    _dtype("bfloat16", 2),
    _dtype("complex128", 16, "<c16"),
    _dtype("complex64", 8, "<c8"),
    _dtype("complex32", 4),
    _dtype("int64", 8, "<i8"),
    _dtype("int32", 4, "<i4"),
    _dtype("int16", 2, "<i2"),
    _dtype("int8", 1, "|i1"),
    _dtype("uint64", 8, "<u8"),
    _dtype("uint32", 4, "<u4"),
    _dtype("uint16", 2, "<u2"),
    _dtype("uint8", 1, "|u1"),
    _dtype("bool", 1),  # as bytes: a copy never turns a stored 2 into a 1
    _dtype("float8_e5m2", 1),
    _dtype("float8_e4m3fn", 1),
    _dtype("float8_e5m2fnuz", 1),
    _dtype("float8_e4m3fnuz", 1),
    _dtype("float8_e8m0fnu", 1),
    _dtype("float4_e2m1fn_x2", 1),
    _dtype("qint8", 1),
    _dtype("quint8", 1),
    _dtype("qint32", 4),
    _dtype("quint4x2", 1),
    _dtype("quint2x4", 1),
    _dtype("bits1x8", 1),
    _dtype("bits2x4", 1),
    _dtype("bits4x2", 1),
    _dtype("bits8", 1),
    _dtype("bits16", 2),
    *(_dtype(f"uint{bits}", 1) for bits in range(1, 8)),
    *(_dtype(f"int{bits}", 1) for bits in range(1, 8)),
]
_ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "chalf": "complex32",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "bit": "uint1",
}
DTYPES: dict[str, TorchDType] = {d.name: d for d in _DTYPES}
DTYPES.update({alias: DTYPES[name] for alias, name in _ALIASES.items()})
"""Every torch dtype by each name torch gives it (``torch.float`` is ``torch.float32``)."""

STORAGE_DTYPES: dict[str, TorchDType] = {
    "DoubleStorage": DTYPES["float64"],
    "FloatStorage": DTYPES["float32"],
    "HalfStorage": DTYPES["float16"],
    "BFloat16Storage": DTYPES["bfloat16"],
    "LongStorage": DTYPES["int64"],
    "IntStorage": DTYPES["int32"],
    "ShortStorage": DTYPES["int16"],
    "CharStorage": DTYPES["int8"],
    "ByteStorage": DTYPES["uint8"],
    "BoolStorage": DTYPES["bool"],
    "ComplexDoubleStorage": DTYPES["complex128"],
    "ComplexFloatStorage": DTYPES["complex64"],
    "UntypedStorage": DTYPES["uint8"],
    # quantized storages hold their integer representation
    "QInt8Storage": DTYPES["int8"],
    "QUInt8Storage": DTYPES["uint8"],
    "QInt32Storage": DTYPES["int32"],
    "QUInt4x2Storage": DTYPES["uint8"],
    "QUInt2x4Storage": DTYPES["uint8"],
}
"""torch's storage classes and the dtype of the elements each holds."""


@dataclass(frozen=True)
class TorchQScheme:
    """A quantization scheme (``torch.per_tensor_affine``)."""

    name: str

    def __repr__(self) -> str:
        return f"torch.{self.name}"


TorchQScheme.__module__, TorchQScheme.__qualname__ = "torch", "qscheme"

QSCHEMES = {
    name: TorchQScheme(name)
    for name in (
        "per_tensor_affine",
        "per_channel_affine",
        "per_tensor_symmetric",
        "per_channel_symmetric",
        "per_channel_affine_float_qparams",
    )
}


@dataclass(frozen=True)
class TorchDevice:
    """A device (``torch.device("cuda", 0)``), as a value saved in a checkpoint."""

    type: str
    index: int | None = None

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


TorchDevice.__module__, TorchDevice.__qualname__ = "torch", "device"

TORCH_VALUE_TYPES = (TorchDType, TorchQScheme, TorchDevice)
"""What the reader keeps as values of their own (not as the name of a global)."""


@dataclass(frozen=True, eq=False)
class SavedTensor:
    """A tensor as the file holds it: its dtype and shape, and how to read its elements from the file.

    ``load`` reads the elements, with the tensor's shape and the dtype's carrier, and is called anew on
    each access to ``values`` (nothing is cached: a file's tensors are never all held at once); it is
    ``None`` for a tensor saved without data, on the meta device. ``stream``, when set, is the same bytes
    as one row-major run of the file, hashed as they are read. ``conj`` and ``neg`` are torch's lazy
    conjugate and negative bits: the values they stand for are ``-conj(values)``, resolved as they are
    hashed. ``covers`` is set when its elements are every byte of the span they lie in, each once (a
    dense block, its dimensions in any order): hashing them accounts for those bytes (``_layout``).
    """

    dtype: TorchDType
    shape: tuple[int, ...]
    load: Callable[[], np.ndarray[Any, Any]] | None
    stream: FileSpan | None = None
    conj: bool = False
    neg: bool = False
    covers: FileSpan | None = None  # the file's bytes that are its elements, each once: what it accounts for

    @property
    def values(self) -> np.ndarray[Any, Any] | None:
        """The elements, read from the file now (a strided view of a buffer that holds what they span)."""
        return None if self.load is None else self.load()

    @property
    def nbytes(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count * self.dtype.itemsize if self.load is not None else 0

    def resolved(self, piece: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A piece of ``values`` as the values it stands for, copied contiguous as torch copies it."""
        import numpy as np

        if self.dtype.name == "bool":  # torch's copy writes any nonzero byte of a bool as 1
            return np.ascontiguousarray(piece != 0).view(np.uint8)
        if self.conj:
            piece = np.conj(piece)
        if self.neg:
            piece = np.negative(piece)
        return np.ascontiguousarray(piece)
