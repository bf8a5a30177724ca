"""The OCDBT rows of the table of readers: a database's ``manifest.ocdbt`` read as the database's keys and
values, and each of its data files as a part of it.

The manifest's row names what the latest version holds (``_ocdbt``): each zarr array whose chunks this
reader decodes as one tensor under the array's key (``_ocdbt_zarr``); every other key as a value, a JSON
value flattened under its key (``conv1.kernel.value/.zarray/dtype``), short UTF-8 text as itself, any
other bytes as ``{"sha256", "bytes"}``; and the latest commit's time, ``commit_time_ns`` (a clock
reading in nanoseconds since the epoch, judged by the run's record as any other). A key that a database
above (up to ``_sniff.OCDBT_SEARCH_LEVELS`` folders up) holds alike, the same inline bytes or the same
bytes of the same data file, is left to that database, as is an array all of whose keys it holds so:
Orbax's root database holds every key of its process databases so, and each array the job saved counts
once, under the root. Whatever a process database holds that no database above does (a key the root
lacks, a value written over since) is its own, read and compared as above, and so is the whole of an
array any of whose keys is. Which keys were left to which manifest is the row's note; the manifest's
bytes and its tree nodes stay accounted for by its own reading.

A data file (``d/<32 hex digits>``) is recognised beside the databases above it (up to
``_sniff.OCDBT_SEARCH_LEVELS`` folders up: Orbax's root database points into ``ocdbt.process_<n>/d/``).
One that a database's tree reached is that database's part: its record names the manifests that read it
(``part_of``) and the bytes they reached (its layout: tree nodes are framing, the latest values
content), and comparison compares it through them, never by its random name. A data file no database
reached is no part of one: it is compared as the plain file it is.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox.errors import UsageError
from reprobox.guest.hashing import _ocdbt_format as fmt
from reprobox.guest.hashing._archives import member_name
from reprobox.guest.hashing._arrays import _Array, _Content, _ContentError, _opaque, _refused, _unreadable
from reprobox.guest.hashing._bounds import OverLimit, check_cpu_budget, limit_reason, loads_json, over_limit
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._load import LazyTensors, Loaded, _numpy_to_torch, _unique
from reprobox.guest.hashing._ocdbt import (
    BOUNDS as DATABASE_BOUNDS,
)
from reprobox.guest.hashing._ocdbt import (
    MANIFEST_NAME,
    Database,
    data_file_layout,
    held_alike,
    read_database,
)
from reprobox.guest.hashing._ocdbt_zarr import MAX_METADATA_BYTES, ZarrArray, array_of, assemble
from reprobox.guest.hashing._sniff import ocdbt_above

if TYPE_CHECKING:
    import torch

READER_NAME = "OCDBT database reader"
DATA_READER_NAME = "OCDBT data file reader"
COMMIT_TIME = "commit_time_ns"
MAX_TEXT_BYTES = 1 << 16  # a value read as text or JSON; a longer one is its digest
BOUNDS = DATABASE_BOUNDS + "; each zarr chunk decoded to exactly its own size, each array within memory"


def _bytes(db: Database, value: bytes | fmt.Ref) -> bytes:
    return value if isinstance(value, bytes) else db.read(value)


def _length(value: bytes | fmt.Ref) -> int:
    return len(value) if isinstance(value, bytes) else value.length


def _digest(db: Database, value: bytes | fmt.Ref) -> dict[str, object]:
    if isinstance(value, bytes):
        return {"sha256": hashlib.sha256(value).hexdigest(), "bytes": len(value)}
    digest = hashlib.sha256()
    with db.data_file(value.path).open("rb") as stream:
        position, end = value.offset, value.offset + value.length
        while position < end:
            piece = os.pread(stream.fileno(), min(1 << 20, end - position), position)
            if not piece:
                raise ValueError(f"data file {value.path} is shorter than when it was read")
            digest.update(piece)
            position += len(piece)
            check_cpu_budget("a value's bytes digested")
    return {"sha256": digest.hexdigest(), "bytes": value.length}


def _value(db: Database, key: str, value: bytes | fmt.Ref) -> list[tuple[str, object]]:
    """A value that is no chunk of a decoded array: its JSON's values, its text, or its digest."""
    if _length(value) <= MAX_TEXT_BYTES:
        data = _bytes(db, value)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return [(key, _digest(db, value))]
        if text[:1] in ("{", "["):
            try:
                _arrays, values = flatten(loads_json(text, f"value {key[:80]}"))
            except OverLimit:
                raise
            except ValueError:
                return [(key, text)]
            return [(member_name(key, name), inner) for name, inner in values]
        return [(key, text)]
    return [(key, _digest(db, value))]


def _held_above(manifest: Path, db: Database) -> tuple[set[str], list[str]]:
    """The keys a database above holds alike (``held_alike``), and those databases' manifests relative to
    this one's folder. One whose manifest is not read as a database holds none."""
    held: set[str] = set()
    where: list[str] = []
    for above in ocdbt_above(manifest):
        try:
            found = held_alike(db, read_database(above))
        except (ValueError, RecursionError, OSError):
            continue  # not a database read: its manifest's record says why
        if found - held:
            where.append(os.path.relpath(above, manifest.parent).replace(os.sep, "/"))
        held |= found
    return held, where


def _contents(
    db: Database, held: set[str]
) -> tuple[list[ZarrArray], dict[str, bytes | fmt.Ref], list[tuple[str, object]]]:
    """The arrays decoded as tensors, the values by key, and the named values of everything else; an
    array all of whose keys a database above holds alike, and any other key it holds, left to it."""
    keyed = dict(db.values)
    arrays: list[ZarrArray] = []
    chunks: set[str] = set()
    for key, value in db.values:
        if key.rpartition("/")[2] not in (".zarray", "zarr.json") or _length(value) > MAX_METADATA_BYTES:
            continue
        array = array_of(key, _bytes(db, value))
        if array is None:
            continue
        mine = [array.chunk_key(index) for index in array.grid()]
        stored = [name for name in mine if name in keyed]
        if len(stored) < len(mine) and array.fill is None:
            continue  # a chunk missing and nothing to fill it with: its chunks stay values
        chunks.update(stored)
        if key not in held or not held.issuperset(stored):
            arrays.append(array)
    values = [
        named
        for key, value in db.values
        if key not in chunks and key not in held
        for named in _value(db, key, value)
    ]
    values.append((COMMIT_TIME, db.commit_time))
    return arrays, keyed, values


def _decoded(db: Database, keyed: dict[str, bytes | fmt.Ref], array: ZarrArray) -> Any:
    return assemble(array, lambda key: _bytes(db, keyed[key]) if key in keyed else None)


def _array(db: Database, keyed: dict[str, bytes | fmt.Ref], array: ZarrArray) -> _Array:
    def buffers(_budget: int) -> Iterator[bytes]:
        try:
            whole = _decoded(db, keyed, array)
        except (ValueError, OSError) as exc:  # a chunk that does not decode to its size: the file as bytes
            refusal = limit_reason(exc) if over_limit(exc) else None
            raise _ContentError(_unreadable("OCDBT database", exc), refusal) from exc
        yield whole.tobytes()  # little-endian, C order: as the contract hashes it

    return _Array(array.name, array.dtype, array.shape, array.nbytes, buffers)


def plan_manifest(path: Path) -> _Content:
    """The database's latest keys and values: its arrays as tensors, the rest as values."""
    try:
        db = read_database(path)
        held, above = _held_above(path, db)
        arrays, keyed, values = _contents(db, held)
    except (ValueError, RecursionError, OSError) as exc:
        return _refused("OCDBT database", exc)
    note = f"{len(held)} of its {len(db.values)} keys compared in {', '.join(above)}" if held else None
    return _Content(
        format="ocdbt",
        arrays=[_array(db, keyed, array) for array in arrays],
        metadata=_metadata_digests(values),
        keepalive=db,
        reader=READER_NAME,
        values_only=not arrays,
        note=note,  # held alike there: the same values at the same places, each compared once
        layout=Layout.whole(db.manifest_size),  # header, body and checksum, all parsed
    )


def _tensor(db: Database, keyed: dict[str, bytes | fmt.Ref], array: ZarrArray) -> torch.Tensor:
    import torch

    whole = _decoded(db, keyed, array)
    if array.dtype == "bfloat16":
        return torch.from_numpy(whole.copy()).view(torch.bfloat16)
    return _numpy_to_torch(whole)


def load_manifest(path: Path) -> Loaded:
    """The tensors and values ``plan_manifest`` names, for comparison."""
    try:
        db = read_database(path)
        arrays, keyed, values = _contents(db, _held_above(path, db)[0])
    except OverLimit:
        raise
    except (ValueError, RecursionError, OSError) as exc:
        raise UsageError(f"{path} is not a readable OCDBT database ({limit_reason(exc)})") from None
    loaders = {array.name: partial(_tensor, db, keyed, array) for array in arrays}
    return LazyTensors(loaders, keepalive=db), _unique(values)


def plan_data_file(path: Path) -> _Content:
    """A data file as the part of each database that reached it; a plain file if none did."""
    content: list[Span] = []
    framing: list[Span] = []
    part_of: list[str] = []
    size = path.stat().st_size
    for manifest in ocdbt_above(path):
        try:
            db = read_database(manifest)
        except (ValueError, RecursionError, OSError):
            continue  # not a database read: its manifest's record says why
        layout = data_file_layout(db, path.relative_to(manifest.parent).as_posix())
        if layout is None or layout.size != size:
            continue
        content.extend(layout.content)
        framing.extend(layout.framing)
        part_of.append(os.path.relpath(manifest, path.parent).replace(os.sep, "/"))
    if not part_of:
        return _opaque(None)
    return _Content(
        format="ocdbt",
        reader=DATA_READER_NAME,
        values_only=True,
        layout=Layout.of(size, content, framing),
        part_of=tuple(part_of),
    )


def load_data_file(path: Path) -> Loaded:
    """Nothing of its own: what it holds is compared through the manifests that read it."""
    return {}, {}


def plan_ocdbt(path: Path) -> _Content:
    return plan_manifest(path) if path.name == MANIFEST_NAME else plan_data_file(path)


def load_ocdbt(path: Path) -> Loaded:
    return load_manifest(path) if path.name == MANIFEST_NAME else load_data_file(path)
