"""Tensors and NumPy arrays from the safe pickle reader's placeholders: tensors as spans of the file read
on demand (``SavedTensor``), within a budget of bytes they may span (``_bounds.expansion_budget``)
checked before anything is read. A tensor whose elements are one row-major run of its storage is
streamed from the file as it is hashed; any other (a strided or expanded view, a big-endian archive's,
a lazily negated or conjugated one) reads the bytes its elements span when it is hashed and lets them
go after. Torch is imported only for what NumPy cannot hold: quantized tensors, and lazily negated or
conjugated values of dtypes NumPy has no numbers for (bf16, float8, complex32). Where torch is not
importable, those raise ``TorchNeeded``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reprobox.guest.hashing._bounds import OverLimit
from reprobox.guest.hashing._filebytes import FileSpan
from reprobox.guest.hashing._pickle_objects import (
    CLASS_KEY,
    ArraySpec,
    DTypeSpec,
    MetaTensorSpec,
    QuantizedSpec,
    ScalarSpec,
    StorageRef,
    TensorSpec,
    _shape,
)
from reprobox.guest.hashing._torch_types import QSCHEMES, SavedTensor, TorchDType

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np
    import torch

Plain = Callable[[object], object]
"""Turns a nested value into plain data (``Plainer``'s walk, with its bounds)."""


class TorchNeeded(Exception):
    """The file holds a tensor only torch can build, and torch is not importable in this process.

    Not a ValueError: the file is fine, so the safe reader lets this through to the caller, which
    records the file by its bytes and says why.
    """


def import_torch(what: str) -> ModuleType:
    """torch, for ``what`` NumPy cannot hold; TorchNeeded where it is not importable."""
    try:
        import torch
    except ImportError:
        raise TorchNeeded(f"{what}, which only torch can read, and torch is not importable here") from None
    return torch


@dataclass
class TensorMaker:
    """Builds the tensors of one file as spans of it; no storage's bytes are read here."""

    budget_bytes: int  # the logical bytes all tensors may span (a stride-0 tensor spans more than it stores)
    byteswap: bool = False

    def storage_span(self, ref: StorageRef) -> FileSpan:
        span = ref.source.storage_span(ref.key, ref.nbytes)
        if ref.view is not None:
            offset, numel = ref.view
            itemsize = ref.dtype.itemsize
            if (offset + numel) * itemsize > span.nbytes:
                raise OverLimit(f"a storage view of '{ref.key}' lies outside its storage")
            span = span.part(offset * itemsize, numel * itemsize)
        return span

    def whole_storage(self, ref: StorageRef) -> SavedTensor | torch.Tensor:
        """A storage used as a value: one flat tensor over all of it."""
        size = self.storage_span(ref).nbytes
        numel = size // ref.dtype.itemsize if ref.dtype.itemsize else 0
        return self.tensor(TensorSpec(ref, 0, (numel,), (1,)))

    def tensor(self, spec: TensorSpec) -> SavedTensor | torch.Tensor:
        """The tensor as a span of the file, its bounds checked; a torch tensor only for a lazy negation
        or conjugation NumPy cannot compute on the dtype."""
        span = self.storage_span(spec.storage)
        dtype = spec.dtype
        itemsize = dtype.itemsize
        if len(spec.size) != len(spec.stride):
            raise ValueError("a tensor's size and stride differ in length")
        if span.nbytes % itemsize:
            raise ValueError(f"storage '{spec.storage.key}' does not hold whole {dtype} elements")
        extent = 0
        if 0 not in spec.size:
            extent = spec.offset + sum((s - 1) * t for s, t in zip(spec.size, spec.stride, strict=True)) + 1
        if extent > span.nbytes // itemsize:
            raise OverLimit(f"a tensor of size {list(spec.size)} lies outside storage '{spec.storage.key}'")
        self.budget_bytes -= math.prod(spec.size) * itemsize
        if self.budget_bytes < 0:
            raise OverLimit("the tensors span far more bytes than the file holds (repeated strides)")
        conj, neg = bool(spec.metadata.get("conj")), bool(spec.metadata.get("neg"))
        conj = conj and dtype.is_complex
        swap = self.byteswap and itemsize > 1
        spanned = span.part(spec.offset * itemsize, (extent - spec.offset) * itemsize) if extent else None
        elements = _Elements(spanned, dtype, spec.size, spec.stride, swap)
        stream = None
        if elements.span is not None and not (conj or neg or swap) and _row_major(spec.size, spec.stride):
            stream = elements.span
        covers = elements.span if _dense(spec.size, spec.stride) else None
        saved = SavedTensor(dtype, spec.size, elements.load, stream, conj=conj, neg=neg, covers=covers)
        if (saved.conj or saved.neg) and not dtype.numeric:
            return _resolved_by_torch(saved)
        return saved

    def meta(self, spec: MetaTensorSpec) -> SavedTensor:
        """A tensor saved without data: its dtype and shape alone."""
        return SavedTensor(spec.dtype, spec.size, None)

    def quantized(self, spec: QuantizedSpec, plain: Plain) -> torch.Tensor:
        torch_module = import_torch("a quantized tensor")
        stored = self.storage_span(spec.base.storage).nbytes
        if math.prod(spec.base.size) * spec.base.dtype.itemsize > stored:
            # torch copies a quantized tensor's values whole when it builds one: an expanded view would
            # be copied to every element it shows
            raise OverLimit(
                f"a quantized tensor of size {list(spec.base.size)} spans more bytes than its storage "
                f"'{spec.base.storage.key}' holds (a repeated stride), which would be copied whole"
            )
        base = self.tensor(spec.base)
        values = to_torch(base) if isinstance(base, SavedTensor) else base
        scheme, *params = spec.params
        plain_params = [plain(p) for p in params]
        if scheme is QSCHEMES["per_tensor_affine"] and len(params) == 2:
            scale, zero_point = plain_params
            if type(scale) is float and type(zero_point) is int:
                quantized: torch.Tensor = torch_module._make_per_tensor_quantized_tensor(
                    values, scale, zero_point
                )
                return quantized
        per_channel = (QSCHEMES["per_channel_affine"], QSCHEMES["per_channel_affine_float_qparams"])
        if scheme in per_channel and len(params) == 3:
            scales, zero_points, axis = plain_params
            if type(axis) is int and 0 <= axis < values.dim():
                scales_t, points_t = (
                    _as_tensor(scales, torch_module.float64),
                    _as_tensor(zero_points, torch_module.int64),
                )
                if scales_t.numel() == points_t.numel() == values.shape[axis]:
                    channels: torch.Tensor = torch_module._make_per_channel_quantized_tensor(
                        values, scales_t, points_t, axis
                    )
                    return channels
        raise ValueError("a quantized tensor has quantizer parameters the reader does not know")


@dataclass(frozen=True)
class _Elements:
    """How to read one tensor's elements: the bytes they span, then the saved strides over them."""

    span: FileSpan | None  # from the first element to the last; None when the tensor has no elements
    dtype: TorchDType
    size: tuple[int, ...]
    stride: tuple[int, ...]
    byteswap: bool  # a big-endian archive's elements, turned little-endian once read

    def load(self) -> np.ndarray[Any, Any]:
        import numpy as np

        carrier = np.dtype(self.dtype.carrier)
        if self.span is None:
            return np.empty(self.size, dtype=carrier)
        raw = self.span.read()  # by ``pread``: FileChanged if the file changed
        if self.byteswap:
            width = self.dtype.itemsize // 2 if self.dtype.is_complex else self.dtype.itemsize
            raw = np.ascontiguousarray(raw.reshape(-1, width)[:, ::-1]).reshape(-1)
        itemsize = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            raw.view(carrier), shape=self.size, strides=tuple(t * itemsize for t in self.stride)
        )


def _dense(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether the elements are every element from the first to the last, each once: the strides,
    smallest first, step over exactly the dimensions before them (a transpose is dense, a slice with a
    step or a repeated stride is not)."""
    expected = 1
    dims = [(dim, step) for dim, step in zip(size, stride, strict=True) if dim != 1]
    for dim, step in sorted(dims, key=lambda pair: pair[1]):
        if step != expected:
            return False
        expected *= dim
    return True


def _row_major(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether elements of these strides are one contiguous row-major run (as NumPy judges it: the
    strides of dimensions of size 1 do not count)."""
    expected = 1
    for dim, step in zip(reversed(size), reversed(stride), strict=True):
        if dim != 1 and step != expected:
            return False
        expected *= dim
    return True


def to_torch(saved: SavedTensor) -> torch.Tensor:
    """The torch tensor a SavedTensor stands for, sharing its memory (comparison, quantized tensors)."""
    import torch

    dtype = getattr(torch, saved.dtype.name)
    values = saved.values
    if values is None:
        return torch.empty(saved.shape, dtype=dtype, device="meta")
    tensor = torch.from_numpy(values)
    if tensor.dtype != dtype:  # a carrier of the same width: the same bytes, read as the saved dtype
        tensor = tensor.view(dtype)
    if saved.conj:
        tensor = tensor.conj()
    if saved.neg:
        tensor = torch._neg_view(tensor)
    return tensor


def _resolved_by_torch(saved: SavedTensor) -> torch.Tensor:
    import_torch(f"a lazily negated or conjugated {saved.dtype.name} tensor")
    return to_torch(saved).resolve_conj().resolve_neg()


def numpy_array(spec: ArraySpec, plain: Plain) -> object:
    """A real array for plain numeric dtypes; otherwise a mapping that describes it."""
    import numpy as np

    state = spec.state
    if not isinstance(state, tuple) or len(state) not in (4, 5):
        raise ValueError("a NumPy array has no (version, shape, dtype, order, data) state")
    shape, dtype_spec, fortran, raw = state[-4:]
    shape = _shape(shape, "a NumPy array's shape")
    dtype = dtype_spec.resolve() if isinstance(dtype_spec, DTypeSpec) else None
    if dtype is None or not isinstance(raw, (bytes, bytearray)):
        described = plain(raw)
        kind = dtype_spec.describe() if isinstance(dtype_spec, DTypeSpec) else str(dtype_spec)
        return {CLASS_KEY: "numpy.ndarray", "dtype": kind, "shape": list(shape), "data": described}
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise OverLimit(f"a NumPy array of shape {list(shape)} does not hold {len(raw)} bytes")
    return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape, order="F" if fortran else "C")


def numpy_scalar(spec: ScalarSpec, plain: Plain) -> object:
    """A Python scalar for plain numeric dtypes; otherwise a mapping that describes it."""
    import numpy as np

    dtype = spec.dtype.resolve() if isinstance(spec.dtype, DTypeSpec) else None
    if dtype is None or not isinstance(spec.raw, (bytes, bytearray)) or len(spec.raw) != dtype.itemsize:
        kind = spec.dtype.describe() if isinstance(spec.dtype, DTypeSpec) else "?"
        return {CLASS_KEY: "numpy.generic", "dtype": kind, "data": plain(spec.raw)}
    return np.frombuffer(bytes(spec.raw), dtype=dtype)[0].item()


def _as_tensor(value: object, dtype: torch.dtype) -> torch.Tensor:
    import torch

    if isinstance(value, SavedTensor):
        value = to_torch(value)
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)) and all(type(v) in (int, float) for v in value):
        return torch.tensor(value, dtype=dtype)
    raise ValueError("quantizer parameters are neither tensors nor lists of numbers")
