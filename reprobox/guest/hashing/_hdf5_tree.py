"""An HDF5 file's objects walked from the root group: its datasets, and its attributes and links as values.

Datasets are named by their path in the file without the leading slash (``layers/dense/vars/0``), an
attribute by its object's path, ``@`` and its name (``@keras_version`` on the root group,
``layers/dense@name`` on a group). Links are followed in order of name; an object reached a second time
(a hard link to it, or to a group above, which would make a cycle) is not read again: its second name is a
value, ``hard link to <first path>``. A soft link is a value too, ``soft link to <target>``; an external
link is refused. Group nesting, objects and values are counted against the readers' limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reprobox.guest.hashing._bounds import (
    MAX_NESTING,
    MAX_VALUES,
    OverLimit,
    check_cpu_budget,
    element_count,
)
from reprobox.guest.hashing._hdf5_bytes import Cursor, Source, Unsupported
from reprobox.guest.hashing._hdf5_data import (
    MAX_CHUNKS,
    MAX_VALUE_ELEMENTS,
    Dataset,
    checked,
    python_value,
    read_array,
)
from reprobox.guest.hashing._hdf5_dense import GlobalHeaps, btree_v2_records, fractal_heap
from reprobox.guest.hashing._hdf5_format import (
    ATTRIBUTE,
    ATTRIBUTE_INFO,
    DATASPACE,
    DATATYPE,
    FILL,
    FILL_OLD,
    FILTERS,
    IGNORED_MESSAGES,
    LAYOUT,
    LINK,
    LINK_INFO,
    NIL,
    SYMBOL_TABLE,
    Link,
    Message,
    link_message,
    object_header,
    superblock,
    symbol_table_links,
)
from reprobox.guest.hashing._hdf5_types import attribute, dataspace, datatype, fill_value, filters, layout

_READ_MESSAGES = IGNORED_MESSAGES | {
    NIL,
    DATASPACE,
    LINK_INFO,
    DATATYPE,
    FILL_OLD,
    FILL,
    LINK,
    LAYOUT,
    FILTERS,
    ATTRIBUTE,
    SYMBOL_TABLE,
    ATTRIBUTE_INFO,
}
_LINK_NAME_RECORDS, _ATTRIBUTE_NAME_RECORDS = 5, 8  # version 2 B-tree types of the name indexes


@dataclass
class Contents:
    """What the file holds: datasets to read as tensors, and named values."""

    datasets: list[Dataset] = field(default_factory=list)
    values: list[tuple[str, object]] = field(default_factory=list)
    heaps: GlobalHeaps = field(default_factory=GlobalHeaps)
    chunks: int = 0  # listed by the datasets so far
    elements: int = 0  # of the values so far

    def count_elements(self, shape: tuple[int, ...] | None, what: str) -> None:
        self.elements += 0 if shape is None else element_count(shape)
        if self.elements > MAX_VALUE_ELEMENTS:
            raise OverLimit(
                f"its attributes hold more than the limit of {MAX_VALUE_ELEMENTS} elements ({what})"
            )

    def value(self, name: str, value: object) -> None:
        if len(self.values) >= MAX_VALUES:
            raise OverLimit(f"it holds more than the limit of {MAX_VALUES} attributes and links")
        self.values.append((name, value))


def read_contents(source: Source) -> Contents:
    """Every object reachable from the root group, each read once."""
    contents = Contents()
    pending: list[tuple[str, int, int]] = [("", superblock(source), 0)]
    first_path: dict[int, str] = {}
    while pending:
        path, address, depth = pending.pop()
        if address in first_path:
            contents.value(path, f"hard link to /{first_path[address]}")
            continue
        first_path[address] = path
        check_cpu_budget(f"{len(first_path)} objects read")
        if len(first_path) > MAX_VALUES:
            raise OverLimit(f"it holds more than the limit of {MAX_VALUES} objects")
        what = f"dataset '{path}'" if path else "the root group"
        messages = object_header(source, address, f"'/{path}'")
        unknown = next((m.kind for m in messages if m.kind not in _READ_MESSAGES), None)
        if unknown is not None:
            raise Unsupported(f"'/{path}' holds a header message of type {unknown}, which is not read")
        _attributes(source, messages, path, contents)
        if any(m.kind == LAYOUT for m in messages):
            _dataset(source, messages, path, what, contents)
            continue
        if depth >= MAX_NESTING:
            raise OverLimit(f"its groups nest deeper than the limit of {MAX_NESTING} levels")
        links = sorted(_links(source, messages, f"group '/{path}'"), key=lambda link: link.name)
        for link in reversed(links):
            child = f"{path}/{link.name}" if path else link.name
            if link.address is None:
                contents.value(child, f"soft link to {link.soft}")
            else:
                pending.append((child, link.address, depth + 1))
    return contents


def _only(messages: list[Message], kind: int, what: str) -> bytes | None:
    found = [m.data for m in messages if m.kind == kind]
    if len(found) > 1:
        raise ValueError(f"{what} has {len(found)} messages of type {kind}, where one is allowed")
    return found[0] if found else None


def _dataset(source: Source, messages: list[Message], path: str, what: str, contents: Contents) -> None:
    widths = source.widths
    type_data, space_data = _only(messages, DATATYPE, what), _only(messages, DATASPACE, what)
    layout_data = _only(messages, LAYOUT, what)
    if type_data is None or space_data is None or layout_data is None:
        raise ValueError(f"{what} has no datatype, dataspace or layout")
    if any(m.kind == 0x7 for m in messages):
        raise Unsupported(f"{what} keeps its data in external files, which are not read")
    kind = datatype(type_data, widths, what)[0]
    shape = dataspace(space_data, widths, what)
    fill_data = _only(messages, FILL, what)
    fill_kind = FILL
    if fill_data is None:
        fill_data, fill_kind = _only(messages, FILL_OLD, what), FILL_OLD
    fill = None if fill_data is None else fill_value(fill_kind, fill_data, widths, what)
    filter_data = _only(messages, FILTERS, what)
    steps = () if filter_data is None else filters(filter_data, widths, what)
    if shape is None:  # a null dataspace: no elements at all (h5py.Empty)
        contents.value(path, None)
        return
    dataset = Dataset(path, shape, kind, layout(layout_data, widths, what), steps, fill)
    dataset = checked(source, dataset, MAX_CHUNKS - contents.chunks)
    contents.chunks += len(dataset.chunks)
    _note_data(source, dataset, messages)
    if kind.kind == "vlen-string":
        contents.count_elements(shape, what)
        raw = read_array(source, dataset).tobytes()
        contents.value(path, python_value(source, contents.heaps, kind, shape, raw=raw, what=what))
        return
    contents.datasets.append(dataset)


def _note_data(source: Source, dataset: Dataset, messages: list[Message]) -> None:
    """Note the dataset's raw data as content: contiguous, each chunk as stored, or compact (inside its
    layout message)."""
    stored = dataset.layout
    if stored.kind == "compact":
        source.hold(*next((m.at, len(m.data)) for m in messages if m.kind == LAYOUT))
    elif stored.kind == "contiguous" and stored.address is not None:
        source.hold(stored.address, dataset.nbytes)
    for chunk in dataset.chunks:
        source.hold(chunk.address, chunk.size)


def _attributes(source: Source, messages: list[Message], path: str, contents: Contents) -> None:
    where = f"'/{path}'"
    for message in messages:
        if message.kind == ATTRIBUTE:  # its name, type, shape and value, all parsed
            source.hold(message.at, len(message.data))
    found = [attribute(m.data, source.widths, where) for m in messages if m.kind == ATTRIBUTE]
    info = _only(messages, ATTRIBUTE_INFO, where)
    if info is not None:
        for data in _dense(source, info, _ATTRIBUTE_NAME_RECORDS, f"the attributes of {where}"):
            found.append(attribute(data, source.widths, where))
    if len({item.name for item in found}) != len(found):
        raise ValueError(f"{where} holds two attributes of one name")
    for item in sorted(found, key=lambda a: a.name):
        name = f"{path}@{item.name}"
        what = f"attribute '{item.name}' of {where}"
        contents.count_elements(item.shape, what)
        contents.value(
            name, python_value(source, contents.heaps, item.datatype, item.shape, raw=item.data, what=what)
        )


def _links(source: Source, messages: list[Message], what: str) -> list[Link]:
    links: list[Link] = []
    for message in messages:
        if message.kind == SYMBOL_TABLE:
            links.extend(symbol_table_links(source, message, what))
        elif message.kind == LINK:
            links.append(link_message(message.data, source.widths, what))
        elif message.kind == LINK_INFO:
            dense = _dense(source, message.data, _LINK_NAME_RECORDS, f"the links of {what}")
            links.extend(link_message(data, source.widths, what) for data in dense)
    names = [link.name for link in links]
    if len(set(names)) != len(names):
        raise ValueError(f"{what} holds two links of one name")
    return links


def _dense(source: Source, info: bytes, record_type: int, what: str) -> list[bytes]:
    """The objects of a link info or attribute info message's dense storage (none when it has none)."""
    cursor = Cursor(info, f"the index of {what}", source.widths)
    version, flags = cursor.u8(), cursor.u8()
    if version != 0:
        raise ValueError(f"the index of {what} has version {version} (0 is read)")
    cursor.skip((8 if record_type == _LINK_NAME_RECORDS else 2) if flags & 0x1 else 0)
    heap_address, names_address = cursor.address(), cursor.address()
    order_address = cursor.address() if flags & 0x2 else None
    if order_address is not None:  # the creation order index (B-tree type 6 or 9): the same objects,
        for _ in btree_v2_records(source, order_address, record_type + 1, what):  # its nodes noted
            check_cpu_budget(f"the creation order index of {what} read")
    if heap_address is None or names_address is None:
        return []
    heap = fractal_heap(source, heap_address, what)
    objects: list[bytes] = []
    for record in btree_v2_records(source, names_address, record_type, what):
        check_cpu_budget(f"{len(objects)} objects of {what} read")
        heap_id = record[4:] if record_type == _LINK_NAME_RECORDS else record[:8]
        objects.append(heap.object(source, heap_id))
    return objects
