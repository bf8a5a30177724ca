"""Torch's two pickle containers, each storage found as a span of the file (read only when a tensor over
it is hashed): the zip format (``<archive>/data.pkl``, storages in ``<archive>/data/<key>``) and the
legacy format (a magic number, pickles, then raw storages)."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from reprobox.guest.hashing._bounds import OverLimit, check_zip_members
from reprobox.guest.hashing._filebytes import FileIdentity, FileSpan
from reprobox.guest.hashing._layout import Span
from reprobox.guest.hashing._pickle_objects import StorageRef, StorageType
from reprobox.guest.hashing._pickle_unpickler import NoStorages, SafeUnpickler, load_checked
from reprobox.guest.hashing._sniff import ZIP_MAGIC, zip_pickle_name
from reprobox.guest.hashing._zipdamage import damaged_stream
from reprobox.guest.hashing._ziplayout import zip_layout

_MAX_PICKLE_BYTES = 1 << 30  # a zip's data.pkl; tensors live outside it


@dataclass(frozen=True)
class Unpickled:
    """A torch file's pickle, unpickled: the tree, the globals used as values, the storages' byte order,
    and the bytes of the file it parsed as pickles (``parsed``) and as the container's framing; the
    storages' bytes are accounted for by the tensors over them (``SavedTensor.covers``)."""

    obj: object
    global_names: dict[int, str]
    big_endian: bool = False
    parsed: tuple[Span, ...] = ()
    framing: tuple[Span, ...] = ()


TORCH_ZIP_FRAMING = frozenset(
    {
        "version",
        ".data/version",
        "byteorder",
        ".format_version",
        ".storage_alignment",
        ".data/serialization_id",
    }
)
"""The members torch.save writes beside data.pkl and the storages: a few bytes each that describe the
format (its version, byte order, alignment, an id torch derives from the data), never a saved value."""

_MAX_FRAMING_MEMBER_BYTES = 64


@dataclass(frozen=True)
class OpenFile:
    """The file being read: its path, a stream over it, and what it was when it was opened."""

    path: Path
    stream: IO[bytes]
    identity: FileIdentity

    def span(self, offset: int, nbytes: int) -> FileSpan:
        """``nbytes`` from ``offset``, which must lie within the file (OverLimit otherwise)."""
        if offset < 0 or offset + nbytes > self.identity.size:
            raise OverLimit("a storage runs past the end of the file")
        return FileSpan(self.path, self.identity, offset, nbytes)

    def read_at(self, offset: int, nbytes: int) -> bytes:
        """At most ``nbytes`` from ``offset`` (fewer at the end of the file), read by pread."""
        return os.pread(self.stream.fileno(), nbytes, offset)


class ZipStorages:
    """Storages of a torch zip archive: uncompressed members of one folder (``<archive>/data/``; a
    TorchScript archive's ``constants/`` too), found in place in the file."""

    def __init__(self, archive: zipfile.ZipFile, folder: str, file: OpenFile) -> None:
        self._members = {info.filename: info for info in archive.infolist()}
        self._folder = folder
        self._file = file
        self._refs: dict[str, StorageRef] = {}
        self._spans: dict[str, FileSpan] = {}

    def persistent_load(self, pid: object) -> StorageRef:
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise ValueError("a persistent id is not a torch storage")
        _tag, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, StorageType) or not isinstance(key, str):
            raise ValueError("a persistent id names no storage type or key")
        if type(numel) is not int or numel < 0:
            raise ValueError(f"storage '{key}' has no valid element count")
        if key not in self._refs:
            self._refs[key] = StorageRef(self, key, storage_type.dtype, numel * storage_type.dtype.itemsize)
        return self._refs[key]

    def storage_span(self, key: str, nbytes: int) -> FileSpan:
        if key not in self._spans:
            info = self._members.get(f"{self._folder}{key}")
            if info is None:
                raise ValueError(f"storage '{key}' is missing from the archive")
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"storage '{key}' is compressed, which torch never writes")
            if info.file_size < nbytes:
                raise OverLimit(f"storage '{key}' holds {info.file_size} bytes, fewer than its {nbytes}")
            self._spans[key] = self._file.span(_member_data_offset(self._file, info), nbytes)
        return self._spans[key]


def _member_data_offset(file: OpenFile, info: zipfile.ZipInfo) -> int:
    header = file.read_at(info.header_offset, 30) if info.header_offset >= 0 else b""
    if len(header) < 30 or not header.startswith(ZIP_MAGIC):
        raise ValueError(f"member '{info.filename}' has no local header")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    offset: int = info.header_offset + 30 + name_len + extra_len
    return offset


def read_zip(file: OpenFile) -> Unpickled:
    try:
        return _read_zip(file)
    except OSError as exc:  # a directory that points before the file's start: the file, not the machine
        if not damaged_stream(exc):
            raise
        raise ValueError(f"a damaged zip archive ({exc.strerror or exc})") from None


def _read_zip(file: OpenFile) -> Unpickled:
    path = file.path
    check_zip_members(path, "the archive")
    name = zip_pickle_name(path)
    if name is None:
        raise ValueError("not a torch zip archive (no <archive>/data.pkl member, or a damaged directory)")
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > min(
            file.identity.size, _MAX_PICKLE_BYTES
        ):
            raise OverLimit("data.pkl is compressed or larger than the file")
        data = archive.read(info)
        prefix = name.removesuffix("data.pkl")
        byteorder = prefix + "byteorder"
        big = byteorder in archive.namelist() and archive.read(byteorder)[:8] == b"big"
        storages = ZipStorages(archive, prefix + "data/", file)
        zipped = zip_layout(path, archive)
        members = archive.infolist()
    stream = io.BytesIO(data)
    unpickler = SafeUnpickler(stream, storages.persistent_load)
    obj = load_checked(unpickler, stream, len(data))
    framing = list(zipped.framing)
    parsed: list[Span] = []
    for member, span in zip(members, zipped.data, strict=True):
        if span is None:
            continue
        if member is info and stream.tell() == len(data):  # the pickle, read to its last byte
            parsed.append(span)
        elif _framing_member(member, prefix):
            framing.append(span)
    return Unpickled(obj, unpickler.global_names, big, tuple(parsed), tuple(framing))


def _framing_member(member: zipfile.ZipInfo, prefix: str) -> bool:
    inner = member.filename.removeprefix(prefix) if member.filename.startswith(prefix) else None
    return inner in TORCH_ZIP_FRAMING and member.compress_size <= _MAX_FRAMING_MEMBER_BYTES


class _LegacyStorages:
    """Storages of the legacy format: after the pickles, each is an 8-byte count and its raw bytes."""

    def __init__(self, file: OpenFile) -> None:
        self._file = file
        self._roots: dict[str, StorageRef] = {}
        self._spans: dict[str, FileSpan] = {}
        self.counts: list[Span] = []  # each storage's element count: framing

    def persistent_load(self, pid: object) -> object:
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] in ("module", b"module"):
            return pid[1]  # a module class saved with its source: the stand-in class
        if not isinstance(pid, tuple) or len(pid) != 6 or pid[0] not in ("storage", b"storage"):
            raise ValueError("a persistent id is not a torch storage")
        _tag, storage_type, key, _location, numel, view = pid
        if not isinstance(storage_type, StorageType) or not isinstance(key, str):
            raise ValueError("a persistent id names no storage type or key")
        if type(numel) is not int or numel < 0:
            raise ValueError(f"storage '{key}' has no valid element count")
        if key not in self._roots:
            self._roots[key] = StorageRef(self, key, storage_type.dtype, numel * storage_type.dtype.itemsize)
        if view is None:
            return self._roots[key]
        if not isinstance(view, tuple) or len(view) != 3 or not all(type(v) is int for v in view[1:]):
            raise ValueError(f"storage '{key}' has a malformed view")
        _view_key, offset, view_numel = view
        root = self._roots[key]
        return StorageRef(self, key, root.dtype, root.nbytes, view=(offset, view_numel))

    def locate(self, keys: object, start: int) -> None:
        """Find each storage's bytes, in the order the key list gives them."""
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("the storage key list is malformed")
        position = start
        for key in keys:
            root = self._roots.get(key)
            if root is None:
                raise ValueError(f"storage '{key}' is listed but never used")
            count = self._file.read_at(position, 8)
            if len(count) < 8:
                raise OverLimit("the file ends before its storages")
            (numel,) = struct.unpack("<q", count)
            nbytes = numel * root.dtype.itemsize
            if numel < 0 or nbytes != root.nbytes or position + 8 + nbytes > self._file.identity.size:
                raise OverLimit(f"storage '{key}' does not fit the file")
            self._spans[key] = self._file.span(position + 8, nbytes)
            self.counts.append((position, position + 8))
            position += 8 + nbytes

    def storage_span(self, key: str, nbytes: int) -> FileSpan:
        span = self._spans.get(key)
        if span is None:
            raise ValueError(f"storage '{key}' has no data in the file")
        return span.part(0, min(nbytes, span.nbytes))


def read_legacy(file: OpenFile) -> Unpickled:
    storages = _LegacyStorages(file)
    stream = file.stream
    stream.seek(0)
    end = file.identity.size
    header = [load_checked(SafeUnpickler(stream, NoStorages().refuse), stream, end) for _ in range(3)]
    magic, version, info = header
    if magic != 0x1950A86A20F9469CFC6C or version != 1001 or not isinstance(info, dict):
        raise ValueError("the legacy torch header is malformed")
    unpickler = SafeUnpickler(stream, storages.persistent_load)
    obj = load_checked(unpickler, stream, end)
    keys = load_checked(SafeUnpickler(stream, NoStorages().refuse), stream, end)
    pickles_end = stream.tell()
    storages.locate(keys, pickles_end)
    # legacy storages are always little-endian
    return Unpickled(obj, unpickler.global_names, False, ((0, pickles_end),), tuple(storages.counts))
