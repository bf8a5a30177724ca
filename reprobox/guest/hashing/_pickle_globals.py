"""The globals a pickle may name that the safe reader rebuilds with its own code: torch tensors and
storages, NumPy arrays, dtypes and scalars, a few containers and built-in values, dates and times
(``_pickle_dates``), and the copyreg functions that instantiate a class (only ever a stand-in). Each
checks its arguments and builds an inert placeholder; every other global becomes a stand-in class."""

from __future__ import annotations

import collections
from collections.abc import Callable

from reprobox.guest.hashing._pickle_dates import make_date, make_datetime
from reprobox.guest.hashing._pickle_objects import (
    MAX_DIMS,
    ArraySpec,
    DTypeSpec,
    MetaTensorSpec,
    NdarrayType,
    QuantizedSpec,
    ScalarSpec,
    StorageRef,
    TensorSpec,
    _ints,
    _shape,
    _StandIn,
    stand_in_of,
)
from reprobox.guest.hashing._torch_types import TorchDevice, TorchDType


def _index(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} is not a non-negative integer")
    return value


def _storage(value: object) -> StorageRef:
    if not isinstance(value, StorageRef):
        raise ValueError("a tensor's storage is not a storage from the archive")
    return value


def _metadata(value: object) -> dict[str, bool]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        k in ("conj", "neg") and type(v) is bool for k, v in value.items()
    ):
        raise ValueError("tensor metadata holds keys other than conj and neg")
    return {str(k): bool(v) for k, v in value.items()}


def rebuild_tensor(storage: object, offset: object, size: object, stride: object, *_: object) -> TensorSpec:
    return TensorSpec(
        _storage(storage),
        _index(offset, "offset"),
        _shape(size, "a tensor's size"),
        _ints(stride, "a tensor's stride"),
    )


def rebuild_tensor_v2(
    storage: object,
    offset: object,
    size: object,
    stride: object,
    _requires_grad: object = False,
    _hooks: object = None,
    metadata: object = None,
) -> TensorSpec:
    spec = rebuild_tensor(storage, offset, size, stride)
    spec.metadata = _metadata(metadata)
    return spec


def rebuild_tensor_v3(  # noqa: PLR0917 - torch's own signature
    storage: object,
    offset: object,
    size: object,
    stride: object,
    _requires_grad: object,
    _hooks: object,
    dtype: object,
    metadata: object = None,
) -> TensorSpec:
    spec = rebuild_tensor_v2(storage, offset, size, stride, metadata=metadata)
    spec.dtype = _torch_dtype(dtype)
    return spec


def _torch_dtype(value: object) -> TorchDType:
    if not isinstance(value, TorchDType):
        raise ValueError("a tensor's dtype is not a torch dtype")
    return value


def rebuild_parameter(data: object, *_: object) -> object:
    return data  # a Parameter hashes as its tensor; hooks and extra state are not data


def rebuild_from_type_v2(func: object, _new_type: object, args: object, _state: object) -> object:
    if not callable(func) or not isinstance(args, tuple):
        raise ValueError("_rebuild_from_type_v2 got no rebuild function and argument tuple")
    return func(*args)  # func came from find_class: one of ours, or a stand-in


def rebuild_meta_tensor(dtype: object, size: object, stride: object, *_: object) -> MetaTensorSpec:
    return MetaTensorSpec(
        _torch_dtype(dtype), _shape(size, "a tensor's size"), _ints(stride, "a tensor's stride")
    )


def rebuild_qtensor(
    storage: object, offset: object, size: object, stride: object, params: object, *_: object
) -> QuantizedSpec:
    if not isinstance(params, tuple) or not params:
        raise ValueError("a quantized tensor has no quantizer parameters")
    return QuantizedSpec(rebuild_tensor(storage, offset, size, stride), params)


def torch_size(dims: object = ()) -> tuple[int, ...]:
    """``torch.Size``: a tuple of ints, which is how the content hash spells it anyway."""
    if not isinstance(dims, (tuple, list)) or len(dims) > MAX_DIMS or not all(type(d) is int for d in dims):
        raise ValueError("torch.Size holds something other than integers")
    return tuple(dims)


def torch_device(kind: object, index: object = None) -> TorchDevice:
    if not isinstance(kind, str) or len(kind) > 64 or (index is not None and type(index) is not int):
        raise ValueError("torch.device got something other than a name and an index")
    name, colon, number = kind.partition(":")
    if colon and index is None and number.isdigit():  # torch.device("cuda:1")
        index = int(number)
    if not name.isidentifier() or (colon and not number.isdigit()):
        raise ValueError(f"torch.device({kind!r}) is not a device")
    return TorchDevice(name, index if type(index) is int else None)


def ordered_dict(items: object = ()) -> collections.OrderedDict[object, object]:
    result: collections.OrderedDict[object, object] = collections.OrderedDict()
    for pair in _sequence(items, "OrderedDict items"):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError("OrderedDict items are not pairs")
        result[pair[0]] = pair[1]
    return result


def default_dict(_factory: object = None, items: object = None) -> dict[object, object]:
    """A plain dict: the default factory is never called, and values are what was saved."""
    return dict(ordered_dict(items or ()))


def _sequence(value: object, what: str) -> list[object] | tuple[object, ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{what} is not a list or tuple")
    return value


def make_set(items: object = ()) -> set[object]:
    return set(_sequence(items, "set items"))


def make_frozenset(items: object = ()) -> frozenset[object]:
    return frozenset(_sequence(items, "frozenset items"))


def make_slice(*args: object) -> slice:
    if len(args) > 3 or not all(a is None or type(a) is int for a in args):
        raise ValueError("slice got something other than integers")
    return slice(*args)


def make_complex(real: object = 0.0, imag: object = 0.0) -> complex:
    if not isinstance(real, (int, float)) or not isinstance(imag, (int, float)):
        raise ValueError("complex got something other than numbers")
    return complex(real, imag)


_TEXT_ENCODINGS = frozenset({"latin1", "latin-1", "iso-8859-1", "utf-8", "utf8", "ascii"})


def encode_text(text: object, encoding: object = "utf-8") -> bytes:
    """``_codecs.encode``: how protocol 2 spells bytes (``encode(text, "latin1")``)."""
    if not isinstance(text, str) or not isinstance(encoding, str) or encoding.lower() not in _TEXT_ENCODINGS:
        raise ValueError("_codecs.encode got something other than text and a plain encoding")
    return text.encode(encoding)


def make_bytearray(data: object = b"", encoding: object = None) -> bytearray:
    if isinstance(data, str):
        return bytearray(encode_text(data, encoding or "utf-8"))
    if isinstance(data, (bytes, bytearray)) or (isinstance(data, list) and all(type(b) is int for b in data)):
        return bytearray(data)
    raise ValueError("bytearray got something other than bytes")


def make_bytes(data: object = b"") -> bytes:
    return bytes(make_bytearray(data))


def reconstructor(cls: object, _base: object, state: object) -> _StandIn:
    """``copyreg._reconstructor``: protocol 0 and 1 objects; only a stand-in class is instantiated."""
    stand_in = stand_in_of(cls)
    if stand_in is None:
        raise ValueError("copyreg._reconstructor names a class the reader does not stand in for")
    obj = stand_in()
    if isinstance(state, dict):  # a dict subclass: its items
        obj._rb_items.extend(state.items())
    elif isinstance(state, list):  # a list subclass
        obj._rb_list.extend(state)
    elif state is not None:
        obj._rb_args = (state,)
    return obj


def new_object(cls: object, *args: object) -> _StandIn:
    stand_in = stand_in_of(cls)
    if stand_in is None:
        raise ValueError("copyreg.__newobj__ names a class the reader does not stand in for")
    return stand_in.__new__(stand_in, *args)


def new_object_ex(cls: object, args: object, kwargs: object) -> _StandIn:
    stand_in = stand_in_of(cls)
    if stand_in is None or not isinstance(args, tuple) or not isinstance(kwargs, dict):
        raise ValueError("copyreg.__newobj_ex__ names a class the reader does not stand in for")
    return stand_in.__new__(stand_in, *args, **{str(k): v for k, v in kwargs.items()})


def numpy_reconstruct(subtype: object, *_: object) -> ArraySpec | _StandIn:
    stand_in = stand_in_of(subtype)
    if stand_in is not None:  # an ndarray subclass: recorded, not rebuilt
        return stand_in()
    if not isinstance(subtype, NdarrayType):
        raise ValueError("numpy _reconstruct names no array type")
    return ArraySpec()


def numpy_scalar(dtype: object, raw: object = None) -> ScalarSpec:
    return ScalarSpec(dtype, raw)


def numpy_frombuffer(buffer: object, dtype: object, shape: object, order: object) -> ArraySpec:
    """Protocol 5 arrays: ``_frombuffer(buffer, dtype, shape, order)``, as BUILD state for ``ArraySpec``."""
    spec = ArraySpec()
    spec.state = (1, shape, dtype, order == "F", buffer)  # in-band buffers arrive as bytes or bytearray
    return spec


def getattr_of(owner: object, name: object) -> _StandIn:
    """``builtins.getattr(Class, "MEMBER")`` (how enums pickle): a member of the stand-in class."""
    stand_in = stand_in_of(owner)
    if stand_in is None or not isinstance(name, str):
        raise ValueError("builtins.getattr is used on something other than a class the pickle names")
    member = stand_in()
    member._rb_attribute = name
    return member


SAFE_CALLABLES: dict[tuple[str, str], Callable[..., object]] = {
    ("torch._utils", "_rebuild_tensor"): rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
    ("torch._utils", "_rebuild_meta_tensor_no_storage"): rebuild_meta_tensor,
    ("torch._utils", "_rebuild_qtensor"): rebuild_qtensor,
    ("torch._tensor", "_rebuild_from_type_v2"): rebuild_from_type_v2,
    ("torch.tensor", "_rebuild_from_type_v2"): rebuild_from_type_v2,
    ("torch", "Size"): torch_size,
    ("torch", "device"): torch_device,
    ("collections", "OrderedDict"): ordered_dict,
    ("collections", "defaultdict"): default_dict,
    ("builtins", "set"): make_set,
    ("builtins", "frozenset"): make_frozenset,
    ("builtins", "slice"): make_slice,
    ("builtins", "complex"): make_complex,
    ("builtins", "bytearray"): make_bytearray,
    ("builtins", "bytes"): make_bytes,
    ("builtins", "getattr"): getattr_of,
    ("datetime", "datetime"): make_datetime,
    ("datetime", "date"): make_date,
    ("_codecs", "encode"): encode_text,
    ("copyreg", "_reconstructor"): reconstructor,
    ("copyreg", "__newobj__"): new_object,
    ("copyreg", "__newobj_ex__"): new_object_ex,
    ("numpy.core.multiarray", "_reconstruct"): numpy_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): numpy_reconstruct,
    ("numpy.core.multiarray", "scalar"): numpy_scalar,
    ("numpy._core.multiarray", "scalar"): numpy_scalar,
    ("numpy.core.numeric", "_frombuffer"): numpy_frombuffer,
    ("numpy._core.numeric", "_frombuffer"): numpy_frombuffer,
    ("numpy", "dtype"): DTypeSpec,
}
"""Globals rebuilt by our own code; every other global becomes a stand-in class."""


MODULE_ALIASES = {"__builtin__": "builtins", "copy_reg": "copyreg"}
"""Python 2 module names, which protocol 0-2 pickles still write (``__builtin__ set``)."""
