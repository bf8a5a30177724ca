"""Turning what the safe pickle reader unpickled into plain data: tensors, arrays, mappings, scalars.

Placeholders become tensors (spans of the file that keep torch's dtype) and NumPy arrays
(``_pickle_arrays``); stand-ins become mappings named as ``reprobox.guest.hashing._pickle`` documents.
Every walk is bounded: nesting depth, the size of the tree once shared references are expanded, and the
bytes all tensors may span.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reprobox.guest.hashing import _pickle_objects as placeholder
from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget
from reprobox.guest.hashing._pickle_arrays import TensorMaker, numpy_array, numpy_scalar
from reprobox.guest.hashing._pickle_objects import (
    ARGS_KEY,
    ATTRIBUTE_KEY,
    CLASS_KEY,
    ITEMS_KEY,
    KWARGS_KEY,
    MAX_DEPTH,
    MAX_VALUES,
    STATE_KEY,
    _StandIn,
)
from reprobox.guest.hashing._torch_types import TORCH_VALUE_TYPES

_CONVERSIONS_PER_BUDGET_CHECK = 1 << 12  # the file's CPU budget, checked as objects are converted


@dataclass
class Plainer:
    """Turns an unpickled tree into dicts, lists, tuples, scalars, tensors and arrays, with bounds."""

    global_names: Mapping[int, str]
    tensors: TensorMaker  # builds the tensors, within the bytes they may span
    done: dict[int, object] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)
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
            raise OverLimit(f"the pickled object nests deeper than the limit of {MAX_DEPTH} levels")
        if key in self.open:
            return f"<cycle: {_type_name(obj)}>", 1
        self.open.add(key)
        try:
            result, size = self._convert(obj, depth + 1)
        finally:
            self.open.discard(key)
        if size > MAX_VALUES:
            raise OverLimit(f"the pickled object expands to more than {MAX_VALUES} values")
        self.done[key], self.sizes[key] = result, size
        self.keep.append(obj)
        if not len(self.keep) % _CONVERSIONS_PER_BUDGET_CHECK:
            check_cpu_budget(f"{len(self.keep)} objects of the pickle converted")
        return result, size

    def _convert(self, obj: object, depth: int) -> tuple[object, int]:  # noqa: PLR0911 - one branch a kind
        if isinstance(obj, TORCH_VALUE_TYPES):  # torch.float32 as a value is torch's dtype, not a name
            return obj, 1
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
        if isinstance(obj, placeholder.TensorSpec):
            return self.tensors.tensor(obj)
        if isinstance(obj, placeholder.StorageRef):
            return self.tensors.whole_storage(obj)
        if isinstance(obj, placeholder.QuantizedSpec):
            return self.tensors.quantized(obj, lambda value: self._visit(value, depth)[0])
        if isinstance(obj, placeholder.MetaTensorSpec):
            return self.tensors.meta(obj)
        if isinstance(obj, placeholder.ArraySpec):
            return numpy_array(obj, lambda value: self._visit(value, depth)[0])
        if isinstance(obj, placeholder.ScalarSpec):
            return numpy_scalar(obj, lambda value: self._visit(value, depth)[0])
        if isinstance(obj, placeholder.DTypeSpec):
            return obj.describe()
        if isinstance(obj, placeholder.StorageType):
            return f"torch.{obj.name}"
        if isinstance(obj, placeholder.NdarrayType):
            return "numpy.ndarray"
        if isinstance(obj, (slice, range)):
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
                raise OverLimit(f"the pickled object expands to more than {MAX_VALUES} values")
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


def _dict_or_none(value: object) -> bool:
    return value is None or isinstance(value, dict)


def _type_name(obj: object) -> str:
    if isinstance(obj, _StandIn):
        return obj.rb_name
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"
