"""What the safe pickle reader builds in place of the objects a pickle names: inert placeholders.

Nothing here imports a module a pickle names or calls a function it names. A global is either one of
the reconstruction functions in ``_pickle_globals`` (torch tensors and storages, NumPy arrays, dtypes and
scalars, a few containers and built-in values), which check their arguments and build the placeholders
below, or a ``_StandIn`` class made for that ``module.Name``, whose instances only record how the pickle
built them. After unpickling, ``_pickle_plain.Plainer`` turns the placeholders into tensors and arrays
and every stand-in into a mapping (the names are documented in ``reprobox.guest.hashing._pickle``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from reprobox.guest.hashing._bounds import (
    MAX_DIMS,
    MAX_ELEMENTS,
    MAX_NESTING,
    MAX_VALUES,
    OverLimit,
    check_shape,
)

if TYPE_CHECKING:
    import numpy as np

    from reprobox.guest.hashing._filebytes import FileSpan
    from reprobox.guest.hashing._torch_types import TorchDType

__all__ = ["MAX_DEPTH", "MAX_DIMS", "MAX_VALUES"]


MAX_DEPTH = MAX_NESTING
"""Deeper nesting than this is refused: no checkpoint nests this deep, and every walk here recurses."""

# MAX_VALUES: objects after expanding shared references; a small pickle cannot expand into an unbounded
# tree. MAX_DIMS: dimensions of a tensor or array. Both are the limits of every reader (``_bounds``).


# How a stand-in reads once plain (the names ``reprobox.guest.hashing._pickle`` documents).
CLASS_KEY = "__class__"
ARGS_KEY = "__args__"
KWARGS_KEY = "__kwargs__"
STATE_KEY = "__state__"
ITEMS_KEY = "__items__"
ATTRIBUTE_KEY = "__attribute__"


class _Inert:
    """Our own placeholder: a pickle's BUILD lands on ``__setstate__`` here, never on a real object."""

    __slots__ = ()

    def __setstate__(self, state: object) -> None:
        raise ValueError(f"the pickle sets state on a {type(self).__name__.lstrip('_')}, which has none")


class _StandIn(_Inert):
    """An object of a class the pickle names, recorded instead of built: args, state, items."""

    __slots__ = ("_rb_args", "_rb_attribute", "_rb_items", "_rb_kwargs", "_rb_list", "_rb_state")
    rb_name: ClassVar[str] = "?"
    _rb_args: tuple[object, ...]
    _rb_kwargs: dict[str, object]
    _rb_state: list[object]
    _rb_items: list[tuple[object, object]]
    _rb_list: list[object]
    _rb_attribute: str | None

    def __new__(cls, *args: object, **kwargs: object) -> _StandIn:
        obj = object.__new__(cls)
        obj._rb_args = args
        obj._rb_kwargs = kwargs
        obj._rb_state = []
        obj._rb_items = []
        obj._rb_list = []
        obj._rb_attribute = None
        return obj

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Arguments were recorded by ``__new__``; nothing else happens."""

    def __setstate__(self, state: object) -> None:
        self._rb_state.append(state)

    def __setitem__(self, key: object, value: object) -> None:
        self._rb_items.append((key, value))

    def append(self, value: object) -> None:
        self._rb_list.append(value)

    def extend(self, values: Iterable[object]) -> None:
        if not isinstance(values, list):
            raise ValueError("the pickle extends an object with something other than a list")
        self._rb_list.extend(values)

    def __repr__(self) -> str:
        return f"<{self.rb_name}>"


def stand_in_class(qualified: str) -> type[_StandIn]:
    """A fresh inert class named ``module.Name``: calling it, NEWOBJ and BUILD only record."""
    return type(qualified, (_StandIn,), {"__slots__": (), "rb_name": qualified, "__module__": __name__})


def stand_in_of(obj: object) -> type[_StandIn] | None:
    return obj if isinstance(obj, type) and issubclass(obj, _StandIn) else None


# --- torch placeholders --------------------------------------------------------------------------


class StorageSource(Protocol):
    """Where a container keeps its storages' bytes (a zip member, or a span of a legacy file)."""

    def storage_span(self, key: str, nbytes: int) -> FileSpan:
        """Where storage ``key``'s first ``nbytes`` lie in the file (OverLimit if it holds fewer)."""
        ...


class StorageType(_Inert):
    """``torch.FloatStorage`` and friends as globals: only their element dtype matters."""

    __slots__ = ("dtype", "name")

    def __init__(self, name: str, dtype: TorchDType) -> None:
        self.name, self.dtype = name, dtype


class StorageRef(_Inert):
    """One storage a persistent id names; its bytes are looked up when a tensor is built."""

    __slots__ = ("dtype", "key", "nbytes", "source", "view")

    def __init__(
        self,
        source: StorageSource,
        key: str,
        dtype: TorchDType,
        nbytes: int,
        view: tuple[int, int] | None = None,  # legacy format: (offset, numel) into the root storage
    ) -> None:
        self.source, self.key, self.dtype, self.nbytes, self.view = source, key, dtype, nbytes, view


class TensorSpec(_Inert):
    """A tensor as ``_rebuild_tensor_v2`` describes it: storage, offset, size, stride (in elements)."""

    __slots__ = ("dtype", "metadata", "offset", "size", "storage", "stride")

    def __init__(
        self, storage: StorageRef, offset: int, size: tuple[int, ...], stride: tuple[int, ...]
    ) -> None:
        self.storage, self.dtype, self.offset = storage, storage.dtype, offset
        self.size, self.stride = size, stride
        self.metadata: dict[str, bool] = {}


class MetaTensorSpec(_Inert):
    """A tensor saved without data (``device="meta"``): dtype and shape only."""

    __slots__ = ("dtype", "size", "stride")

    def __init__(self, dtype: TorchDType, size: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self.dtype, self.size, self.stride = dtype, size, stride


class QuantizedSpec(_Inert):
    """A quantized tensor: its integer values and its quantizer's parameters."""

    __slots__ = ("base", "params")

    def __init__(self, base: TensorSpec, params: tuple[object, ...]) -> None:
        self.base, self.params = base, params


# --- NumPy placeholders --------------------------------------------------------------------------

_PLAIN_NUMPY = frozenset(
    {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"}
)


class DTypeSpec(_Inert):
    """``numpy.dtype(typestr)`` and its BUILD state; only plain numeric dtypes ever become real."""

    __slots__ = ("byteorder", "elsize", "typestr")

    def __init__(self, typestr: object, _align: object = False, _copy: object = True) -> None:
        self.typestr = typestr
        self.byteorder = "="
        self.elsize: int | None = None  # a flexible or structured dtype's element size, from its state

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) >= 2 and state[1] in ("<", ">", "|", "="):
            self.byteorder = str(state[1])
            if len(state) >= 6 and type(state[5]) is int and state[5] > 0:
                self.elsize = state[5]
            if len(state) >= 5 and (state[3] is not None or state[4] is not None):
                self.typestr = f"structured:{self.typestr}"  # fields: never rebuilt

    def resolve(self) -> np.dtype[Any] | None:
        import numpy as np

        if not isinstance(self.typestr, str) or self.typestr not in _PLAIN_NUMPY:
            return None
        order = "|" if self.typestr in ("b1", "i1", "u1") else self.byteorder
        return np.dtype(order + self.typestr if order != "=" else self.typestr)

    def describe(self) -> str:
        resolved = self.resolve()
        return str(resolved.name) if resolved is not None else f"numpy.dtype({self.typestr!r})"


class ArraySpec(_Inert):
    """``_reconstruct(ndarray, ...)`` then BUILD ``(version, shape, dtype, fortran, raw)``."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: object = None

    def __setstate__(self, state: object) -> None:
        self.state = state


class NdarrayType(_Inert):
    """``numpy.ndarray`` as a global (the subtype argument of ``_reconstruct``)."""

    __slots__ = ()


class ScalarSpec(_Inert):
    """``numpy.core.multiarray.scalar(dtype, raw)``: a NumPy scalar's dtype and bytes."""

    __slots__ = ("dtype", "raw")

    def __init__(self, dtype: object, raw: object) -> None:
        self.dtype, self.raw = dtype, raw


# --- argument checks shared with the reconstruction functions and Plainer -----------------------


def _ints(value: object, what: str) -> tuple[int, ...]:
    """A stride: at most MAX_DIMS non-negative integers, each at most MAX_ELEMENTS."""
    if not isinstance(value, (tuple, list)) or len(value) > MAX_DIMS:
        raise OverLimit(f"{what} is not a short sequence of integers")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_ELEMENTS for v in value):
        raise OverLimit(f"{what} holds something other than integers from 0 to 2**48 (the limit)")
    return tuple(int(v) for v in value)


def _shape(value: object, what: str) -> tuple[int, ...]:
    """A size or shape, checked as every reader checks one (``_bounds.check_shape``)."""
    return check_shape(_ints(value, what), what)
