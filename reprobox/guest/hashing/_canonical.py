"""The content-hash contract in code: the canonical serialisations and the flattening.

The contract is stated in the package docstring (``reprobox.guest.hashing``); the serialisations it fixes
live here, so that a change to the contract is a change to this file. The records they fill are in
``_digests``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _ascii_string
from typing import TYPE_CHECKING, Any

from reprobox.guest.hashing._bounds import MAX_NESTING, MAX_VALUES, OverLimit, check_cpu_budget
from reprobox.guest.hashing._digests import TensorDigest
from reprobox.guest.hashing._loaded import loaded
from reprobox.guest.hashing._torch_types import SavedTensor

if TYPE_CHECKING:
    import numpy as np
    import torch

ROOT_NAME = ""


# --- the canonical serialisations (the contract) --------------------------------------------------


_CANONICAL_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
)
"""``json.dumps`` with these arguments builds an encoder per call; one made once writes the same text."""


def canonical_json(value: object) -> str:
    """The one JSON spelling every digest here is computed over."""
    return _CANONICAL_ENCODER.encode(value)


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def content_sha256(tensors: Sequence[TensorDigest]) -> str:
    """The content hash over tensor digests, in the order the contract fixes (not the caller's)."""
    rows = [[t.name, t.dtype, list(t.shape), t.sha256] for t in sorted(tensors, key=TensorDigest.sort_key)]
    return hashlib.sha256(
        json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    ).hexdigest()


def metadata_sha256(metadata: Mapping[str, str]) -> str:
    """One digest over all non-tensor values, so a record says at a glance whether any differ.

    It is the sha256 of ``canonical_json(dict(metadata))``, hashed a slice of names at a time: a log's
    values may number a million, and their whole spelling would be hundreds of MiB.
    """
    names = sorted(metadata)
    digest = hashlib.sha256(b"{")
    for start in range(0, len(names), _NAMES_PER_SLICE):
        members = ",".join(
            f"{_ascii_string(name)}:{_ascii_string(metadata[name])}"
            for name in names[start : start + _NAMES_PER_SLICE]
        )
        digest.update((members if start == 0 else "," + members).encode("ascii"))
    digest.update(b"}")
    return digest.hexdigest()


_NAMES_PER_SLICE = 8192


MAX_DECIMAL_BITS = 14_000
"""Integers longer than this (about 4,200 decimal digits) are spelled in hexadecimal: Python refuses to
convert an integer of over 4,300 digits to decimal, and a file may hold one (a pickle's LONG4, a YAML
``0x`` or sexagesimal number). The check is on the bit length, before any conversion."""


def _long_int(value: object) -> bool:
    return type(value) is int and abs(value).bit_length() > MAX_DECIMAL_BITS


def canonical_value(value: object) -> object:
    """A JSON-able form of a non-tensor value that is equal exactly when the values are."""
    canonical: object
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > MAX_DECIMAL_BITS:
        # an int subclass (an IntEnum) is spelled the same way: bit_length is int's own
        canonical = {"int": hex(value)}  # too long for a decimal spelling: Python refuses to write it
    elif value is None or isinstance(value, (bool, str, int, float)):
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


_KNOWN_SPELLINGS = 1 << 16
"""Spellings whose digest is remembered: a log's repeated values are, a million distinct ones are not."""


def _metadata_digests(values: Sequence[tuple[str, object]]) -> dict[str, str]:
    """Each name's digest: its value's, or for a name given several values, the digest of their sorted
    digests. A name given one value (the usual case: millions of them in a long log) holds its digest
    alone, never a list of one."""
    grouped: dict[str, str | list[str]] = {}
    known: dict[str, str] = {}  # logs repeat their values: each spelling is hashed once
    for count, (name, value) in enumerate(values):
        if count % 8192 == 8191:
            check_cpu_budget(f"{count + 1} values digested")
        text = _value_text(value)
        digest = known.get(text)
        if digest is None:
            digest = _sha256_text(text)
            if len(known) < _KNOWN_SPELLINGS:
                known[text] = digest
        earlier = grouped.get(name)
        if earlier is None:
            grouped[name] = digest
        elif isinstance(earlier, str):
            grouped[name] = [earlier, digest]
        else:
            earlier.append(digest)
    del known
    for name, digests in grouped.items():  # values of existing keys replaced: the dict is not resized
        if isinstance(digests, list):
            grouped[name] = _sha256_text("\n".join(sorted(digests)))
    return grouped  # type: ignore[return-value]  # every list was replaced by its digest


def _value_text(value: object) -> str:
    """``canonical_json`` of a value, with no encoder call for the usual plain ones (a str, a finite
    float, a short int): their spellings are the ones the encoder writes."""
    kind = type(value)
    if kind is str:
        return _ascii_string(value)  # type: ignore[arg-type]
    if (kind is float and value - value == 0) or (kind is int and not _long_int(value)):  # type: ignore[operator]
        return repr(value)
    plain = kind in (int, float, bool, type(None)) and not _long_int(value)
    return canonical_json(value if plain else canonical_value(value))


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
    types: list[type] = [SavedTensor]
    if (torch_module := loaded("torch")) is not None:
        types.append(torch_module.Tensor)
    if (numpy_module := loaded("numpy")) is not None:
        types.append(numpy_module.ndarray)
    return tuple(types)


_PLAIN_TYPES = (str, int, float, bool, type(None))
"""Values that are never containers nor arrays: ``visit`` would name each as it stands."""


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def flatten(obj: object) -> tuple[list[tuple[str, Any]], list[tuple[str, object]]]:
    """Split a loaded checkpoint into (name, tensor) and (name, plain value) pairs, in saved order.

    Objects the safe pickle reader (``_pickle``) recorded instead of building arrive here as mappings
    (``{"__class__": "train.Config", "output": ...}``), so their fields are named like any other
    mapping's.
    """
    flattener = _Flattener(_array_types())
    flattener.visit(obj, ROOT_NAME, 0)
    return flattener.arrays, flattener.values


def flatten_rows(rows: Iterable[object]) -> list[tuple[str, object]]:
    """``flatten(list(rows))``'s plain values, built row by row (a JSON Lines file's lines, a CSV's rows),
    so that the value limit stops a long file before its rows are all in memory.

    A list of plain values is one value (``flatten``): rows are held back until one is a container,
    and a file of plain rows alone is one value, named ``ROOT_NAME``.
    """
    flattener = _Flattener(_array_types())
    containers = (*flattener.array_types, Mapping, list, tuple)
    plain: list[object] | None = []  # the rows read while none is a container
    for index, row in enumerate(rows):
        if plain is not None and not isinstance(row, containers):
            plain.append(row)
            continue
        if plain is not None:
            for held, value in enumerate(plain):
                flattener.visit(value, str(held), 1)
            plain = None
        flattener.visit(row, str(index), 1)
    if plain is not None:
        flattener.visit(plain, ROOT_NAME, 0)
    if flattener.arrays:  # rows of text never hold arrays; a guard, not a case
        raise ValueError("holds arrays")
    return flattener.values


@dataclass
class _Flattener:
    """The walk, bounded (``_bounds``): what ``torch.load`` or a JSON parser built may nest or fan out
    without limit, and the walk recurses and records a digest per value."""

    array_types: tuple[type, ...]
    arrays: list[tuple[str, Any]] = field(default_factory=list)
    values: list[tuple[str, object]] = field(default_factory=list)
    open_containers: set[int] = field(default_factory=set)

    def visit(self, obj: object, name: str, depth: int) -> None:
        if depth > MAX_NESTING:
            raise OverLimit(f"the saved object nests deeper than the limit of {MAX_NESTING} levels")
        self._check_count()
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
        values, room = self.values, MAX_VALUES - len(self.arrays)
        for key, value in items:
            if type(value) in _PLAIN_TYPES and depth < MAX_NESTING:  # what visit would do, without a call
                if len(values) >= room:
                    self._check_count()
                values.append((_join(name, key), value))
            else:
                self.visit(value, _join(name, key), depth + 1)
        self.open_containers.discard(id(obj))

    def _check_count(self) -> None:
        if len(self.arrays) + len(self.values) >= MAX_VALUES:
            raise OverLimit(f"the saved object holds more than the limit of {MAX_VALUES} values")


def _integer_view(tensor: torch.Tensor) -> torch.Tensor:
    """A quantized tensor's integer values as a view of its storage with its own strides: ``int_repr()``
    would copy them whole, and an expanded (stride-0) one spans far more than it stores."""
    import torch

    integer = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}.get(
        tensor.dtype
    )
    if integer is None:  # sub-byte packings (quint4x2): their integer form is not their storage
        return tensor.int_repr()
    view = torch.empty(0, dtype=integer)
    return view.set_(tensor.untyped_storage(), tensor.storage_offset(), tensor.size(), tensor.stride())


def expand_quantized(name: str, tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """A quantized tensor as plain tensors: its integer values and its quantizer's parameters."""
    import torch

    if not tensor.is_quantized:
        return [(name, tensor)]
    parts = [(name, _integer_view(tensor))]
    if tensor.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        parts.append((f"{name}.q_scale", torch.tensor([tensor.q_scale()], dtype=torch.float64)))
        parts.append((f"{name}.q_zero_point", torch.tensor([tensor.q_zero_point()], dtype=torch.int64)))
    else:
        parts.append((f"{name}.q_per_channel_scales", tensor.q_per_channel_scales()))
        parts.append((f"{name}.q_per_channel_zero_points", tensor.q_per_channel_zero_points()))
        parts.append((f"{name}.q_per_channel_axis", torch.tensor([tensor.q_per_channel_axis()])))
    return parts
