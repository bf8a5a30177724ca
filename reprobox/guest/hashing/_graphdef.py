"""A TensorFlow ``GraphDef`` (what ``SummaryWriter.add_graph`` logs) read as values, its maps as maps.

A node's attributes are a protobuf map (``map<string, AttrValue> attr``), and protobuf writes map entries
in whatever order its hash table holds them: the same graph serializes to other bytes in some runs, so a
digest of the bytes calls a deterministic job "not reproducible". Read here with the schema of
tensorflow/core/framework/graph.proto, node_def.proto, attr_value.proto and tensor_shape.proto (field
numbers as written there), every map is a mapping keyed by its entries' keys, whatever their order.

Names, under the graph's own (``graph_def.step_0``): ``.node.<n>.name``, ``.op``, ``.input`` (a list),
``.device`` and ``.attr.<key>`` per node, in the graph's node order; ``.versions.producer``,
``.versions.min_consumer``, ``.versions.bad_consumers``. An attribute is its value: text (``s``), an
integer, a float, a bool, a dtype number, a shape as its dimension sizes, a function as its name and
attributes, a list as ``{"i": [...], "shape": [[...]], ...}``, a tensor as the sha256 of its bytes (a
TensorProto holds no map). The function library and debug info, which no PyTorch graph holds, are the
sha256 of their bytes (``.library``, ``.debug_info``).
"""

from __future__ import annotations

from reprobox.guest.hashing._logvalues import LogValues, sha256_hex
from reprobox.guest.hashing._protowire import Message, WireError, signed64, text

# GraphDef
_NODE, _LIBRARY, _VERSION, _VERSIONS, _GRAPH_DEBUG_INFO = 1, 2, 3, 4, 5
# NodeDef
_NAME, _OP, _INPUT, _DEVICE, _ATTR, _DEBUG_INFO, _EXPERIMENTAL_TYPE = 1, 2, 3, 4, 5, 6, 7
# a map entry
_KEY, _VALUE = 1, 2
# AttrValue (a oneof) and AttrValue.ListValue
_LIST, _S, _I, _F, _B, _TYPE, _SHAPE, _TENSOR, _PLACEHOLDER, _FUNC = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
_LIST_FUNC = 9  # in a ListValue, func is 9 (AttrValue's placeholder number)
_ATTR_MEMBERS = (_LIST, _S, _I, _F, _B, _TYPE, _SHAPE, _TENSOR, _PLACEHOLDER, _FUNC)
_DIGESTED_NODE_FIELDS = ((_DEBUG_INFO, "experimental_debug_info"), (_EXPERIMENTAL_TYPE, "experimental_type"))
# TensorShapeProto and its Dim
_DIM, _UNKNOWN_RANK, _DIM_SIZE, _DIM_NAME = 2, 3, 1, 2
# NameAttrList
_FUNC_NAME, _FUNC_ATTR = 1, 2

MAX_FUNC_DEPTH = 16
"""A function attribute names attributes that may be functions again; deeper than this is refused."""


def graph_values(data: bytes, name: str, found: LogValues) -> None:
    """The graph's nodes and versions as values under ``name``; WireError when it is not a GraphDef."""
    graph = Message(data)
    for index, node in enumerate(graph.messages(_NODE)):
        base = f"{name}.node.{index}"
        found.add(f"{base}.name", node.string(_NAME))
        found.add(f"{base}.op", node.string(_OP))
        found.add(f"{base}.input", node.strings(_INPUT))
        if node.has(_DEVICE):
            found.add(f"{base}.device", node.string(_DEVICE))
        for key, value in sorted(_attr_map(node, _ATTR, 0).items()):
            found.add(f"{base}.attr.{key}", value)
        for number, field in (
            (_DEBUG_INFO, "experimental_debug_info"),
            (_EXPERIMENTAL_TYPE, "experimental_type"),
        ):
            if node.has(number):
                found.add(f"{base}.{field}", sha256_hex(node.raw(number)))
    versions = graph.message(_VERSIONS)
    if versions is not None:
        found.add(f"{name}.versions.producer", signed64(versions.varint(1)))
        found.add(f"{name}.versions.min_consumer", signed64(versions.varint(2)))
        found.add(f"{name}.versions.bad_consumers", [signed64(v) for v in versions.varints(3)])
    if graph.has(_VERSION):
        found.add(f"{name}.version", signed64(graph.varint(_VERSION)))
    for number, field in ((_LIBRARY, "library"), (_GRAPH_DEBUG_INFO, "debug_info")):
        if graph.has(number):
            found.add(f"{name}.{field}", sha256_hex(graph.raw(number)))


def _attr_map(message: Message, number: int, depth: int) -> dict[str, object]:
    """A ``map<string, AttrValue>`` field: the last entry of a key wins, as protobuf's own parsers do."""
    if depth > MAX_FUNC_DEPTH:
        raise WireError(f"function attributes nest deeper than the limit of {MAX_FUNC_DEPTH} levels")
    entries: dict[str, object] = {}
    for entry in message.messages(number):
        value = entry.message(_VALUE)
        entries[entry.string(_KEY)] = None if value is None else _attr(value, depth)
    return entries


def _attr(value: Message, depth: int) -> object:  # noqa: PLR0911 - one return per member of the oneof
    """One AttrValue as a plain value: whichever member of its oneof is set (the last, if several)."""
    present = [
        n for n in (_LIST, _S, _I, _F, _B, _TYPE, _SHAPE, _TENSOR, _PLACEHOLDER, _FUNC) if value.has(n)
    ]
    if not present:
        return None
    member = max(present, key=lambda n: value.by_number[n][-1].start)
    if member == _LIST:
        listed = value.message(_LIST)
        return _list(listed, depth) if listed is not None else {}
    if member == _S:
        return _bytes_or_text(value.raw(_S))
    if member == _I:
        return value.int64(_I)
    if member == _F:
        return value.float32(_F)
    if member == _B:
        return bool(value.varint(_B))
    if member == _TYPE:
        return value.varint(_TYPE)
    if member == _SHAPE:
        shape = value.message(_SHAPE)
        return _shape(shape) if shape is not None else []
    if member == _TENSOR:
        return {"tensor_sha256": sha256_hex(value.raw(_TENSOR))}
    if member == _PLACEHOLDER:
        return {"placeholder": value.string(_PLACEHOLDER)}
    func = value.message(_FUNC)
    return _func(func, depth) if func is not None else {}


def _list(listed: Message, depth: int) -> dict[str, object]:
    found: dict[str, object] = {}
    if listed.has(_S):
        found["s"] = [_bytes_or_text(raw) for raw in listed.repeated_raw(_S)]
    if listed.has(_I):
        found["i"] = [signed64(v) for v in listed.varints(_I)]
    if listed.has(_F):
        found["f"] = listed.floats(_F)
    if listed.has(_B):
        found["b"] = [bool(v) for v in listed.varints(_B)]
    if listed.has(_TYPE):
        found["type"] = listed.varints(_TYPE)
    if listed.has(_SHAPE):
        found["shape"] = [_shape(shape) for shape in listed.messages(_SHAPE)]
    if listed.has(_TENSOR):
        found["tensor"] = [{"tensor_sha256": sha256_hex(raw)} for raw in listed.repeated_raw(_TENSOR)]
    if listed.has(_LIST_FUNC):
        found["func"] = [_func(func, depth) for func in listed.messages(_LIST_FUNC)]
    return found


def _shape(shape: Message) -> object:
    """A shape as its dimension sizes (``-1`` unknown), with their names where any is named."""
    dims = shape.messages(_DIM)
    if shape.varint(_UNKNOWN_RANK):
        return {"unknown_rank": True}
    if any(dim.has(_DIM_NAME) for dim in dims):
        return [[signed64(dim.varint(_DIM_SIZE)), dim.string(_DIM_NAME)] for dim in dims]
    return [signed64(dim.varint(_DIM_SIZE)) for dim in dims]


def _func(func: Message, depth: int) -> dict[str, object]:
    return {"name": func.string(_FUNC_NAME), "attr": _attr_map(func, _FUNC_ATTR, depth + 1)}


def _bytes_or_text(raw: bytes) -> object:
    """An ``s`` attribute: text when it is UTF-8 (PyTorch writes its attributes as JSON text), else bytes."""
    try:
        return text(raw, _S)
    except WireError:
        return raw
