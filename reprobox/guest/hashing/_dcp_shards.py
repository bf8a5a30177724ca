"""A torch Distributed Checkpoint's shards (``__0_0.distcp``), read item by item where its index says.

Each item of a shard is a ``torch.save`` file of its own (one chunk of a tensor, or one other value),
written one after another (``_dcp``). Its bytes are copied, within the shard's size, to a private
temporary file and read there by the torch reader, as an archive's members are (``_archives``); the
item's tensor is named ``<fqn>@<chunk offsets>`` (``model.weight@0,0``), a value by its fqn. The
shard's layout is each item's as the torch reader accounted for it, at the item's place in the shard:
bytes between or after the items the index lists are a gap, never excused.

An item that is no ``torch.save`` file (DCP's default planner saves every value so; a custom planner's
raw bytes are not) leaves the shard compared by its bytes. A shard the index lists no item in (left by an
earlier save) is one gap. A shard with no readable index beside it is compared by its bytes: with
nothing to say where its items lie, its reader cannot say which bytes it read.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from reprobox.errors import UsageError
from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._archives import member_name
from reprobox.guest.hashing._arrays import _Array, _Content, _opaque, _refused
from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget, limit_reason
from reprobox.guest.hashing._dcp import BOUNDS as INDEX_BOUNDS
from reprobox.guest.hashing._dcp import METADATA_NAME, DcpIndex, Item, read_index
from reprobox.guest.hashing._formats import _plan_torch
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._load import LazyTensors, Loaded, Loader, _load_torch_tensors

READER_NAME = "DCP shard reader"
BOUNDS = INDEX_BOUNDS + "; each item read as a torch.save file"


class ItemFolder:
    """A private temporary folder of a shard's items, removed with what reads from it (or at exit)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="reprobox-dcp-"))
        self.remove = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


def shard_items(shard: Path, items: list[Item], folder: ItemFolder) -> Iterator[tuple[Item, Path]]:
    """Each item's bytes copied from the shard to a file of its own in ``folder``, in shard order."""
    with shard.open("rb") as stream:
        for number, item in enumerate(items):
            check_cpu_budget(f"{number} items of {shard.name} read")
            where = folder.path / f"{number}.pt"
            with where.open("wb") as out:
                position, end = item.offset, item.offset + item.length
                while position < end:
                    piece = os.pread(stream.fileno(), min(FILE_CHUNK_BYTES, end - position), position)
                    if not piece:
                        raise OverLimit(f"shard {shard.name} ends before item '{item.name}'")
                    out.write(piece)
                    position += len(piece)
            yield item, where


def _index_of(shard: Path) -> DcpIndex | str:
    """The index beside the shard, or why there is none to read it by."""
    index = shard.parent / METADATA_NAME
    if not index.is_file():
        return f"no {METADATA_NAME} beside it says where its items lie"
    try:
        return read_index(index)
    except (ValueError, RecursionError) as exc:
        return f"its {METADATA_NAME} cannot be read ({limit_reason(exc)})"


def plan_shard(path: Path) -> _Content:
    """The shard's items as the torch reader reads them, named by fqn and chunk offsets."""
    index = _index_of(path)
    if isinstance(index, str):
        return _opaque(f"content not hashed: a DCP shard, but {index}; the content hash is the file sha256")
    folder = ItemFolder()
    arrays: list[_Array] = []
    metadata: dict[str, str] = {}
    content: list[Span] = []
    framing: list[Span] = []
    kept: list[object] = [folder]
    try:
        for item, where in shard_items(path, index.items_in(path.name), folder):
            read = _plan_torch(where)
            if read.format == "file":
                folder.remove()
                return _refused("DCP shard", ValueError(f"item '{item.name}': {read.note}"))
            kept.append(read.keepalive)
            arrays.extend(dataclasses.replace(a, name=member_name(item.name, a.name)) for a in read.arrays)
            metadata.update({member_name(item.name, key): d for key, d in read.metadata.items()})
            if read.layout is not None and read.layout.size == item.length:
                content.extend(_shifted(read.layout.content, item.offset))
                framing.extend(_shifted(read.layout.framing, item.offset))
    except (ValueError, OSError) as exc:
        folder.remove()
        return _refused("DCP shard", exc)
    return _Content(
        format="dcp",
        arrays=arrays,
        metadata=metadata,
        keepalive=kept,
        reader=READER_NAME,
        values_only=not arrays,
        layout=Layout.of(path.stat().st_size, content, framing),
    )


def _shifted(spans: tuple[Span, ...], by: int) -> list[Span]:
    return [(start + by, end + by) for start, end in spans]


def load_shard(path: Path) -> Loaded:
    """The shard's tensors and values under the names ``plan_shard`` gives them (for comparison)."""
    index = _index_of(path)
    if isinstance(index, str):
        return {}, {}  # compared by its bytes, as hashing did
    folder = ItemFolder()
    loaders: dict[str, Loader] = {}
    values: dict[str, object] = {}
    try:
        for item, where in shard_items(path, index.items_in(path.name), folder):
            tensors, inner = _load_torch_tensors(where)
            loaders.update({member_name(item.name, k): partial(tensors.__getitem__, k) for k in tensors})
            values.update({member_name(item.name, k): v for k, v in inner.items()})
    except OverLimit:
        folder.remove()
        raise
    except (ValueError, OSError, UsageError) as exc:
        folder.remove()
        raise UsageError(f"{path} is not a readable DCP shard ({limit_reason(exc)})") from None
    return LazyTensors(loaders, keepalive=folder), values
