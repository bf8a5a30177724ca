"""Turning what the safe pickle reader unpickled into plain data: tensors, arrays, mappings, scalars.

Placeholders become torch tensors (views of the memory-mapped file) and NumPy arrays; stand-ins become
mappings named as ``reprobox.guest.hashing._pickle`` documents. Every walk is bounded: nesting depth,
the size of the tree once shared references are expanded, and the bytes all tensors may span.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reprobox.guest.hashing._pickle_objects import (
    MAX_DEPTH,
    MAX_VALUES,
    ArraySpec,
    DTypeSpec,
    MetaTensorSpec,
    NdarrayType,
    QuantizedSpec,
    ScalarSpec,
    StorageRef,
    StorageType,
    TensorSpec,
    _ints,
    _StandIn,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

CLASS_KEY = "__class__"
ARGS_KEY = "__args__"
KWARGS_KEY = "__kwargs__"
STATE_KEY = "__state__"
ITEMS_KEY = "__items__"
ATTRIBUTE_KEY = "__attribute__"


@dataclass
class Plainer:
    """Turns an unpickled tree into dicts, lists, tuples, scalars, tensors and arrays, with bounds."""

    global_names: Mapping[int, str]
    budget_bytes: int  # the logical bytes all tensors may span (a stride-0 tensor spans more than it stores)
    byteswap: bool = False
    done: dict[int, object] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)
    storages: dict[int, np.ndarray[Any, Any]] = field(default_factory=dict)
    keep: list[object] = field(default_factory=list)  # ids stay valid while their objects live

    def plain(self, obj: object) -> object:
        result, _size = self._visit(obj, 0)
        return result

    def _visit(self, obj: object, depth: int) -> tuple[object, int]:
        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
            return obj, 1
        key = id(obj)
        if key in self.done:
            return self.done[key], self.sizes[key]
        if depth > MAX_DEPTH:
            raise ValueError(f"the pickled object is nested deeper than {MAX_DEPTH} levels")
        if key in self.open:
            return f"<cycle: {_type_name(obj)}>", 1
        self.open.add(key)
        try:
            result, size = self._convert(obj, depth + 1)
        finally:
            self.open.discard(key)
        if size > MAX_VALUES:
            raise ValueError(f"the pickled object expands to more than {MAX_VALUES} values")
        self.done[key], self.sizes[key] = result, size
        self.keep.append(obj)
        return result, size

    def _convert(self, obj: object, depth: int) -> tuple[object, int]:  # noqa: PLR0911 - one branch a kind
        if id(obj) in self.global_names:
            return self.global_names[id(obj)], 1
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj), 1
        if isinstance(obj, Mapping):
            return self._mapping(list(obj.items()), depth, {})
        if isinstance(obj, (list, tuple)):
            items, size = self._items(obj, depth)
            return (tuple(items) if isinstance(obj, tuple) else items), size
        if isinstance(obj, (set, frozenset)):
            return {self._key(v, depth) for v in obj}, len(obj) + 1
        if isinstance(obj, _StandIn):
            return self._stand_in(obj, depth)
        if isinstance(obj, type) and issubclass(obj, _StandIn):
            return obj.rb_name, 1
        return self._placeholder(obj, depth), 1

    def _placeholder(self, obj: object, depth: int) -> object:  # noqa: PLR0911 - one branch a kind
        if isinstance(obj, TensorSpec):
            return self._tensor(obj)
        if isinstance(obj, StorageRef):
            return self._tensor(TensorSpec(obj, 0, (self._numel(obj),), (1,)))
        if isinstance(obj, QuantizedSpec):
            return self._quantized(obj, depth)
        if isinstance(obj, MetaTensorSpec):
            import torch

            return torch.empty_strided(obj.size, obj.stride, dtype=obj.dtype, device="meta")
        if isinstance(obj, ArraySpec):
            return self._array(obj, depth)
        if isinstance(obj, ScalarSpec):
            return self._scalar(obj, depth)
        if isinstance(obj, DTypeSpec):
            return obj.describe()
        if isinstance(obj, StorageType):
            return f"torch.{obj.name}"
        if isinstance(obj, NdarrayType):
            return "numpy.ndarray"
        if isinstance(obj, (slice, range)) or _is_torch_value(obj):
            return obj
        return f"<{_type_name(obj)}>"

    def _items(self, values: Iterable[object], depth: int) -> tuple[list[object], int]:
        items: list[object] = []
        total = 1
        for value in values:
            plain, size = self._visit(value, depth)
            items.append(plain)
            total += size
            if total > MAX_VALUES:
                raise ValueError(f"the pickled object expands to more than {MAX_VALUES} values")
        return items, total

    def _mapping(
        self, pairs: list[tuple[object, object]], depth: int, result: dict[object, object]
    ) -> tuple[dict[object, object], int]:
        values, size = self._items((v for _, v in pairs), depth)
        for (k, _), value in zip(pairs, values, strict=True):
            result[self._key(k, depth)] = value
        return result, size

    def _key(self, key: object, depth: int) -> object:
        """A hashable, readable form of a key or set member (stand-ins become their description)."""
        if key is None or isinstance(key, (bool, int, float, complex, str, bytes)):
            return key
        plain, _size = self._visit(key, depth)
        if isinstance(plain, tuple):
            try:
                hash(plain)
            except TypeError:
                return repr(plain)
            return plain
        if isinstance(plain, (dict, list, set)):
            return repr(plain)
        return plain

    def _stand_in(self, obj: _StandIn, depth: int) -> tuple[dict[object, object], int]:
        out: dict[object, object] = {}
        pairs: list[tuple[object, object]] = []
        for state in obj._rb_state:
            if isinstance(state, tuple) and len(state) == 2 and all(_dict_or_none(s) for s in state):
                for part in state:  # (__dict__, slots)
                    pairs.extend(part.items() if isinstance(part, dict) else ())
            elif isinstance(state, dict):
                pairs.extend(state.items())
            elif state is not None:
                pairs.append((STATE_KEY, state))
        pairs.extend(obj._rb_items)
        if obj._rb_args:
            pairs.append((ARGS_KEY, list(obj._rb_args)))
        if obj._rb_kwargs:
            pairs.append((KWARGS_KEY, dict(obj._rb_kwargs)))
        if obj._rb_list:
            pairs.append((ITEMS_KEY, list(obj._rb_list)))
        if obj._rb_attribute is not None:
            pairs.append((ATTRIBUTE_KEY, obj._rb_attribute))
        out, size = self._mapping(pairs, depth, out)
        out[CLASS_KEY] = obj.rb_name
        return out, size + 1

    # tensors -------------------------------------------------------------------------------

    def _storage_bytes(self, ref: StorageRef) -> np.ndarray[Any, Any]:
        if id(ref) not in self.storages:
            self.storages[id(ref)] = ref.source.storage_bytes(ref.key, ref.nbytes)
            self.keep.append(ref)
        raw = self.storages[id(ref)]
        if ref.view is not None:
            offset, numel = ref.view
            itemsize = ref.dtype.itemsize
            if (offset + numel) * itemsize > raw.size:
                raise ValueError(f"a storage view of '{ref.key}' lies outside its storage")
            raw = raw[offset * itemsize : (offset + numel) * itemsize]
        return raw

    def _numel(self, ref: StorageRef) -> int:
        size = self._storage_bytes(ref).size
        return size // ref.dtype.itemsize if ref.dtype.itemsize else 0

    def _tensor(self, spec: TensorSpec) -> torch.Tensor:
        import numpy as np
        import torch

        raw = self._storage_bytes(spec.storage)
        itemsize = spec.dtype.itemsize
        if len(spec.size) != len(spec.stride):
            raise ValueError("a tensor's size and stride differ in length")
        if raw.size % itemsize:
            raise ValueError(f"storage '{spec.storage.key}' does not hold whole {spec.dtype} elements")
        if self.byteswap and itemsize > 1:
            width = itemsize // 2 if spec.dtype.is_complex else itemsize
            raw = np.ascontiguousarray(raw.reshape(-1, width)[:, ::-1]).reshape(-1)
        extent = 0
        if 0 not in spec.size:
            extent = spec.offset + sum((s - 1) * t for s, t in zip(spec.size, spec.stride, strict=True)) + 1
        if extent > raw.size // itemsize:
            raise ValueError(f"a tensor of size {list(spec.size)} lies outside storage '{spec.storage.key}'")
        self.budget_bytes -= math.prod(spec.size) * itemsize
        if self.budget_bytes < 0:
            raise ValueError("the tensors span far more bytes than the file holds (repeated strides)")
        flat = torch.from_numpy(raw).view(spec.dtype) if spec.dtype != torch.uint8 else torch.from_numpy(raw)
        tensor = torch.as_strided(flat, spec.size, spec.stride, spec.offset)
        if spec.metadata.get("conj"):
            tensor = tensor.conj()
        if spec.metadata.get("neg"):
            tensor = torch._neg_view(tensor)
        return tensor

    def _quantized(self, spec: QuantizedSpec, depth: int) -> torch.Tensor:
        import torch

        values = self._tensor(spec.base)
        scheme, *params = spec.params
        plain_params = [self._visit(p, depth)[0] for p in params]
        if scheme == torch.per_tensor_affine and len(params) == 2:
            scale, zero_point = plain_params
            if type(scale) is float and type(zero_point) is int:
                return torch._make_per_tensor_quantized_tensor(values, scale, zero_point)
        if scheme in (torch.per_channel_affine, torch.per_channel_affine_float_qparams) and len(params) == 3:
            scales, zero_points, axis = plain_params
            if type(axis) is int and 0 <= axis < values.dim():
                scales_t, points_t = _as_tensor(scales, torch.float64), _as_tensor(zero_points, torch.int64)
                if scales_t.numel() == points_t.numel() == values.shape[axis]:
                    return torch._make_per_channel_quantized_tensor(values, scales_t, points_t, axis)
        raise ValueError("a quantized tensor has quantizer parameters the reader does not know")

    # NumPy -------------------------------------------------------------------------------------

    def _array(self, spec: ArraySpec, depth: int) -> object:
        import numpy as np

        state = spec.state
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise ValueError("a NumPy array has no (version, shape, dtype, order, data) state")
        shape, dtype_spec, fortran, raw = state[-4:]
        shape = _ints(shape, "a NumPy array's shape")
        dtype = dtype_spec.resolve() if isinstance(dtype_spec, DTypeSpec) else None
        if dtype is None or not isinstance(raw, (bytes, bytearray)):
            described, _size = self._visit(raw, depth)
            kind = dtype_spec.describe() if isinstance(dtype_spec, DTypeSpec) else str(dtype_spec)
            return {CLASS_KEY: "numpy.ndarray", "dtype": kind, "shape": list(shape), "data": described}
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"a NumPy array of shape {list(shape)} does not hold {len(raw)} bytes")
        return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape, order="F" if fortran else "C")

    def _scalar(self, spec: ScalarSpec, depth: int) -> object:
        import numpy as np

        dtype = spec.dtype.resolve() if isinstance(spec.dtype, DTypeSpec) else None
        if dtype is None or not isinstance(spec.raw, (bytes, bytearray)) or len(spec.raw) != dtype.itemsize:
            kind = spec.dtype.describe() if isinstance(spec.dtype, DTypeSpec) else "?"
            return {CLASS_KEY: "numpy.generic", "dtype": kind, "data": self._visit(spec.raw, depth)[0]}
        return np.frombuffer(bytes(spec.raw), dtype=dtype)[0].item()


def _as_tensor(value: object, dtype: torch.dtype) -> torch.Tensor:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)) and all(type(v) in (int, float) for v in value):
        return torch.tensor(value, dtype=dtype)
    raise ValueError("quantizer parameters are neither tensors nor lists of numbers")


def _dict_or_none(value: object) -> bool:
    return value is None or isinstance(value, dict)


def _is_torch_value(obj: object) -> bool:
    torch_module = sys.modules.get("torch")
    return torch_module is not None and isinstance(
        obj, (torch_module.dtype, torch_module.device, torch_module.Size, torch_module.qscheme)
    )


def _type_name(obj: object) -> str:
    if isinstance(obj, _StandIn):
        return obj.rb_name
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"
