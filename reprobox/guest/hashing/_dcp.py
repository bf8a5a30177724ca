"""A torch Distributed Checkpoint's index: its ``.metadata`` file, read as data and checked.

``torch.distributed.checkpoint.save(state_dict, checkpoint_id=folder)`` writes ``folder/.metadata``, a
pickle of DCP's ``Metadata`` (each tensor's dtype, global size and chunks; for each saved item the shard
file, offset and length it lies at; a ``save_id`` drawn anew by each save), and shards
``__<rank>_<n>.distcp``, each a concatenation of items, every one a ``torch.save`` of one chunk of a
tensor or of one other value (``torch/distributed/checkpoint/filesystem.py``, ``_write_item``).

The index is read by the safe pickle reader (``_pickle``), which imports and runs nothing; it is then
refused unless every class it names is DCP's own (``DCP_CLASSES``) and every place it gives lies inside
a shard beside it. The shards are read item by item in ``_dcp_shards``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from reprobox.guest.filehash import file_sha256
from reprobox.guest.hashing._bounds import (
    MAX_ARCHIVE_MEMBERS,
    OverLimit,
    budget_running,
    check_cpu_budget,
    check_shape,
)
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._pickle_objects import CLASS_KEY
from reprobox.guest.hashing._shared_reads import SharedReads
from reprobox.guest.hashing._sniff import DCP_INDEX_NAME, DCP_SHARD_SUFFIX

METADATA_NAME = DCP_INDEX_NAME
SHARD_SUFFIX = DCP_SHARD_SUFFIX
MAX_ITEMS = MAX_ARCHIVE_MEMBERS
"""Items an index may list (as an archive's members)."""

BOUNDS = (
    f"nothing imported or run, no class but DCP's; at most {MAX_ITEMS:,} items, each inside its shard; "
    "shapes as every reader's; read once for the index and its shards, each charged the CPU time it took"
)

_MAX_KEY_CHARS = 1 << 16  # a storage key's text (a fqn, an offset and an index)
_ENTRIES_PER_BUDGET_CHECK = 1 << 10  # the file's CPU budget, checked as tensors and items are read

_METADATA = "torch.distributed.checkpoint.metadata."
DCP_CLASSES = frozenset(
    {
        _METADATA + "Metadata",
        _METADATA + "TensorStorageMetadata",
        _METADATA + "BytesStorageMetadata",
        _METADATA + "ChunkStorageMetadata",
        _METADATA + "TensorProperties",
        _METADATA + "_MEM_FORMAT_ENCODING",
        _METADATA + "StorageMeta",
        _METADATA + "MetadataIndex",
        "torch.distributed.checkpoint.filesystem._StorageInfo",
        "torch.serialization._get_layout",  # a tensor's layout (torch.strided), by name
        "pathlib.PosixPath",  # storage_meta.checkpoint_id
        "pathlib.WindowsPath",
    }
)
"""The classes a DCP index may name: DCP's metadata and what its fields hold. Any other is refused."""


@dataclass(frozen=True)
class Item:
    """One saved item: a chunk of a tensor (``offsets`` its place in the tensor) or a value (None), and
    the shard bytes it lies at."""

    fqn: str
    offsets: tuple[int, ...] | None
    shard: str
    offset: int
    length: int

    @property
    def name(self) -> str:
        """``model.weight@0,0`` for a chunk, the fqn for a value."""
        return self.fqn if self.offsets is None else f"{self.fqn}@{','.join(map(str, self.offsets))}"


@dataclass(frozen=True)
class TensorEntry:
    """A tensor as the index describes it: dtype, global size, and its chunks (offsets, sizes)."""

    dtype: str
    size: tuple[int, ...]
    chunks: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


@dataclass(frozen=True)
class DcpIndex:
    """A checked index: its tensors by fqn, its items in shard order, and its other fields as values."""

    folder: Path
    tensors: dict[str, TensorEntry]
    items: tuple[Item, ...]
    other: list[tuple[str, object]]  # storage_meta (save_id, checkpoint_id as text), version, planner_data
    layout: Layout  # the index file's bytes the pickle reader parsed

    def items_in(self, shard: str) -> list[Item]:
        return [item for item in self.items if item.shard == shard]


def read_index(path: Path) -> DcpIndex:
    """The checked index in ``path``; ValueError (OverLimit for a limit) in one sentence if it is not a
    DCP index whose every item lies inside a shard beside it.

    Hashing reads a checkpoint's index for the index and for each of its shards: within a file's CPU
    budget it is read once (the last few kept, by the index's path and bytes and the shards' sizes, all
    that the read depends on), and each later reader is charged the CPU time that read took, so every
    file's budget is spent alike whichever read it first.
    """
    if not budget_running():
        return _read_index(path)
    shards = sorted(
        (shard.name, shard.is_symlink(), shard.stat().st_size if shard.is_file() else -1)
        for shard in path.parent.glob("*" + SHARD_SUFFIX)
    )
    key = (str(path.resolve()), file_sha256(path), tuple(shards))
    return _INDEXES.get(key, lambda: _read_index(path))


_INDEXES: SharedReads[DcpIndex] = SharedReads(kept=4)


def _read_index(path: Path) -> DcpIndex:
    read = read_pickle(path)
    tree = read.obj
    if not isinstance(tree, dict) or tree.get(CLASS_KEY) != _METADATA + "Metadata":
        raise ValueError("it does not hold a torch.distributed.checkpoint Metadata")
    for named in _classes(tree, 0):
        if named not in DCP_CLASSES:
            raise ValueError(f"it names {named!r}, which is not a class of a DCP index")
    tensors = _tensors(tree.get("state_dict_metadata"))
    items = _items(tree.get("storage_data"), path.parent)
    other = [
        (key, _path_text(tree[key])) for key in ("storage_meta", "version", "planner_data") if key in tree
    ]
    return DcpIndex(
        path.parent, tensors, items, other, Layout.of(read.identity.size, read.parsed, read.framing)
    )


def _classes(value: object, depth: int) -> Iterator[str]:
    """Every class the plain tree names (``__class__`` values), nesting as the pickle reader bounds it."""
    if isinstance(value, dict):
        named = value.get(CLASS_KEY)
        if isinstance(named, str):
            yield named
        for inner in value.values():
            yield from _classes(inner, depth + 1)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            yield from _classes(inner, depth + 1)


_PATH_CLASSES: dict[str, type[PurePath]] = {
    "pathlib.PosixPath": PurePosixPath,
    "pathlib.WindowsPath": PureWindowsPath,
}


def _path_text(value: object) -> object:
    """The index's values with each pathlib path (``storage_meta.checkpoint_id`` when the save was given
    one) as the path it names, a value like any other path: the run's own folders in it are then
    recognised, as in a path saved as text, rather than compared part by part."""
    if isinstance(value, dict):
        kind = _PATH_CLASSES.get(str(value.get(CLASS_KEY)))
        parts = value.get("__args__")
        parts = list(parts) if isinstance(parts, (list, tuple)) else None
        texts = [part for part in parts or () if isinstance(part, str)]
        if kind is not None and set(value) == {CLASS_KEY, "__args__"} and parts == texts:
            return str(kind(*texts))
        return {key: _path_text(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_path_text(inner) for inner in value]
    return value


def _natural(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{what} is not a non-negative integer")
    return value


def _tensors(table: object) -> dict[str, TensorEntry]:
    if not isinstance(table, dict):
        raise ValueError("its state_dict_metadata is not a mapping")
    if len(table) > MAX_ITEMS:
        raise OverLimit(f"it lists {len(table)} entries, over the limit of {MAX_ITEMS}")
    tensors: dict[str, TensorEntry] = {}
    for number, (fqn, entry) in enumerate(table.items()):
        if not number % _ENTRIES_PER_BUDGET_CHECK:
            check_cpu_budget(f"{number} tensors of the index read")
        if not isinstance(entry, dict) or entry.get(CLASS_KEY) != _METADATA + "TensorStorageMetadata":
            continue  # a BytesStorageMetadata: its value is read from its shard
        size = check_shape(entry.get("size"), f"tensor '{fqn}'")
        state = (
            entry.get("properties", {}).get("__state__")
            if isinstance(entry.get("properties"), dict)
            else None
        )
        dtype = str(state[0]).removeprefix("torch.") if isinstance(state, tuple) and state else ""
        if not dtype.isidentifier():
            raise ValueError(f"tensor '{fqn}' has no dtype")
        chunks = entry.get("chunks")
        if not isinstance(chunks, list) or len(chunks) > MAX_ITEMS:
            raise ValueError(f"tensor '{fqn}' has no list of chunks")
        tensors[str(fqn)] = TensorEntry(dtype, size, tuple(_chunk(str(fqn), size, c) for c in chunks))
    return tensors


def _chunk(fqn: str, size: tuple[int, ...], chunk: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not isinstance(chunk, dict):
        raise ValueError(f"a chunk of tensor '{fqn}' is not a ChunkStorageMetadata")
    offsets = check_shape(chunk.get("offsets"), f"a chunk of tensor '{fqn}'")
    sizes = check_shape(chunk.get("sizes"), f"a chunk of tensor '{fqn}'")
    if len(offsets) != len(size) or len(sizes) != len(size):
        raise ValueError(f"a chunk of tensor '{fqn}' has other dimensions than the tensor")
    if any(o + s > d for o, s, d in zip(offsets, sizes, size, strict=True)):
        raise ValueError(f"a chunk of tensor '{fqn}' reaches past the tensor's size {list(size)}")
    return offsets, sizes


def _items(table: object, folder: Path) -> tuple[Item, ...]:
    if not isinstance(table, dict):
        raise ValueError("its storage_data is not a mapping")
    if len(table) > MAX_ITEMS:
        raise OverLimit(f"it lists {len(table)} items, over the limit of {MAX_ITEMS}")
    sizes: dict[str, int] = {}
    items = []
    for number, (key, info) in enumerate(table.items()):
        if not number % _ENTRIES_PER_BUDGET_CHECK:
            check_cpu_budget(f"{number} items of the index read")
        items.append(_item(key, info, folder, sizes))
    return tuple(sorted(items, key=lambda item: (item.shard, item.offset)))


def _item(key: object, info: object, folder: Path, sizes: dict[str, int]) -> Item:
    fqn, offsets = _index_key(key)
    if (
        not isinstance(info, dict)
        or info.get(CLASS_KEY) != "torch.distributed.checkpoint.filesystem._StorageInfo"
    ):
        raise ValueError(f"item '{fqn}' has no storage info")
    if info.get("transform_descriptors"):
        raise ValueError(f"item '{fqn}' was saved through storage extensions, which reprobox does not read")
    shard = info.get("relative_path")
    if not isinstance(shard, str) or not shard.endswith(SHARD_SUFFIX) or Path(shard).name != shard:
        raise ValueError(f"item '{fqn}' names a shard that is not a .distcp file beside the index")
    offset = _natural(info.get("offset"), f"item '{fqn}''s offset")
    length = _natural(info.get("length"), f"item '{fqn}''s length")
    if shard not in sizes:
        where = folder / shard
        if where.is_symlink() or not where.is_file():
            raise ValueError(f"item '{fqn}' lies in shard {shard}, which is not a file beside the index")
        sizes[shard] = where.stat().st_size
    if offset + length > sizes[shard]:
        raise OverLimit(f"item '{fqn}' reaches past the end of shard {shard} ({sizes[shard]} bytes)")
    return Item(fqn, offsets, shard, offset, length)


def _index_key(key: object) -> tuple[str, tuple[int, ...] | None]:
    """A ``MetadataIndex`` key (the pickle reader spells a key that is an object as its plain repr)."""
    if not isinstance(key, str) or len(key) > _MAX_KEY_CHARS:
        raise ValueError("a storage key is not a MetadataIndex")
    try:
        index = ast.literal_eval(key)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("a storage key is not a MetadataIndex") from None
    if not isinstance(index, dict) or index.get(CLASS_KEY) != _METADATA + "MetadataIndex":
        raise ValueError("a storage key is not a MetadataIndex")
    fqn, offsets = index.get("fqn"), index.get("offset")
    if not isinstance(fqn, str):
        raise ValueError("a storage key names no fqn")
    if offsets is None:
        return fqn, None
    return fqn, check_shape(offsets, f"item '{fqn}'")
