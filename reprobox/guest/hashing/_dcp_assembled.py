"""A torch Distributed Checkpoint as a whole: its index's values, and each tensor assembled by its fqn.

The ``.metadata`` row yields, per tensor, its dtype and global size (``<fqn>.dtype``, ``<fqn>.size``),
and under ``<fqn>`` the sha256 of the whole tensor's bytes (row-major, little-endian) put together from
its chunks in the shards. The same weights saved by one rank or by two then compare equal by name,
whatever the chunks: how the tensor was cut is recorded apart, under names that say it is layout
(``layout.chunks.<fqn>``, ``layout.items.<fqn>@<offsets>``: shard, offset, length). A difference only
in ``layout.`` names is a reshard, not a difference in numbers. The save's own fields follow as values
(``storage_meta.save_id``, drawn anew by each save, ``storage_meta.checkpoint_id``, ``version``).

A tensor is assembled in memory within ``MAX_IN_MEMORY_BYTES`` and the file's CPU budget; one that is
not gets the value ``not assembled (<why>)``, and its chunks are still hashed in their shards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprobox.errors import UsageError
from reprobox.guest.hashing._arrays import _Content, _refused, _saved_array
from reprobox.guest.hashing._bounds import (
    FILE_CPU_SECONDS,
    MAX_IN_MEMORY_BYTES,
    OverLimit,
    check_in_memory,
    cpu_share,
    element_count,
    limit_reason,
)
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._dcp import DcpIndex, Item, TensorEntry, read_index
from reprobox.guest.hashing._dcp_shards import ItemFolder, shard_items
from reprobox.guest.hashing._load import Loaded, _unique
from reprobox.guest.hashing._pickle import read_pickle
from reprobox.guest.hashing._torch_types import SavedTensor

READER_NAME = "DCP index reader"
LAYOUT_PREFIX = "layout."


def index_values(index: DcpIndex) -> list[tuple[str, object]]:
    """The index's values by name: per tensor its dtype, size and assembled digest; the layout; the rest."""
    values: list[tuple[str, object]] = []
    with cpu_share(FILE_CPU_SECONDS / 2):  # half the file's budget: the rest is for the index's values
        assembled = {fqn: _assembled(index, fqn, entry) for fqn, entry in index.tensors.items()}
    for fqn, entry in index.tensors.items():
        values.append((fqn, assembled[fqn]))
        values.append((f"{fqn}.dtype", entry.dtype))
        values.append((f"{fqn}.size", list(entry.size)))
        chunks = [{"offsets": list(offsets), "sizes": list(sizes)} for offsets, sizes in entry.chunks]
        values.append((f"{LAYOUT_PREFIX}chunks.{fqn}", chunks))
    for item in index.items:
        values.append((f"{LAYOUT_PREFIX}items.{item.name}", [item.shard, item.offset, item.length]))
    values.extend(flatten(dict(index.other))[1])
    return values


def plan_index(path: Path) -> _Content:
    try:
        index = read_index(path)
        values = index_values(index)
    except (ValueError, RecursionError) as exc:
        return _refused("DCP index", exc)
    return _Content(
        format="dcp",
        metadata=_metadata_digests(values),
        reader=READER_NAME,
        values_only=True,
        layout=index.layout,
    )


def load_index(path: Path) -> Loaded:
    try:
        values = index_values(read_index(path))
    except OverLimit:
        raise
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path} is not a readable DCP index ({limit_reason(exc)})") from None
    return {}, _unique(values)


def _assembled(index: DcpIndex, fqn: str, entry: TensorEntry) -> str:
    """The sha256 of the tensor put together from its chunks, or why it was not."""
    items = [item for item in index.items if item.fqn == fqn and item.offsets is not None]
    try:
        return "sha256:" + _assemble(index, entry, items)
    except (ValueError, OSError) as exc:  # OverLimit included: its chunks are still hashed in the shards
        return f"not assembled ({limit_reason(exc)})"


def _assemble(index: DcpIndex, entry: TensorEntry, items: list[Item]) -> str:
    """The sha256 of the tensor's bytes, each chunk's put in its place (zeros where no chunk lies)."""
    import numpy as np

    whole: np.ndarray[Any, Any] | None = None
    folder = ItemFolder()
    try:
        for offsets, chunk in _chunks(index, items, folder):
            if chunk.dtype.name != entry.dtype:
                raise ValueError(f"a chunk holds {chunk.dtype.name}, not the index's {entry.dtype}")
            if len(offsets) != len(entry.size) or any(
                o + n > d for o, n, d in zip(offsets, chunk.shape, entry.size, strict=True)
            ):
                raise ValueError(f"a chunk at {list(offsets)} does not fit the size {list(entry.size)}")
            itemsize = chunk.dtype.itemsize
            if whole is None:
                nbytes = element_count(entry.size) * itemsize
                check_in_memory(nbytes, "the assembled tensor", "to assemble it from its chunks")
                whole = np.zeros((*entry.size, itemsize), dtype=np.uint8)
            raw = b"".join(_saved_array("", chunk).buffers(MAX_IN_MEMORY_BYTES))
            place = tuple(slice(o, o + s) for o, s in zip(offsets, chunk.shape, strict=True))
            whole[place] = np.frombuffer(raw, dtype=np.uint8).reshape(*chunk.shape, itemsize)
    finally:
        folder.remove()
    return hashlib.sha256(b"" if whole is None else whole.data).hexdigest()


def _chunks(
    index: DcpIndex, items: list[Item], folder: ItemFolder
) -> Iterator[tuple[tuple[int, ...], SavedTensor]]:
    for shard in sorted({item.shard for item in items}):
        mine = [item for item in items if item.shard == shard]
        for item, where in shard_items(index.folder / shard, mine, folder):
            chunk = read_pickle(where).obj
            if not isinstance(chunk, SavedTensor) or item.offsets is None:
                raise ValueError(f"item '{item.name}' is not one saved tensor")
            if len(chunk.shape) != len(item.offsets):
                raise ValueError(f"item '{item.name}' has other dimensions than its tensor")
            yield item.offsets, chunk
            where.unlink()
