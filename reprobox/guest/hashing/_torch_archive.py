"""Archives torch's own writer makes (``PyTorchStreamWriter``), read member by member: TorchScript's
``torch.jit.save`` files (``_torchscript``) and ``torch.export``'s PT2 archives (``_pt2``).

Both are zips whose members lie in one folder (``<archive>/``), each written once, storages and weights
uncompressed. A reader walks the members and records, in an ``ArchiveRead``, what each held: tensors (spans
of the file, read by ``pread`` when hashed, or of a nested ``torch.save`` file copied to a private temporary
folder), values, and the bytes that accounted for (``_layout``). A member no reader takes is a gap, named in
the note. Hashing and comparison are made from the same walk (``_torch_archive_read``), so they name alike.

``.data/serialization_id`` is no draw: torch's writer derives it (``writeSerializationId``) from a hash of
the record names (20 digits) and the records' CRC32s combined in write order (20 digits), so a module saved
twice, in one process or in two, gets one id. The CRC half is checked against the zip's directory: where it
holds, it says nothing the records themselves do not, and the value is the name half alone (a changed
weight then differs once, as the weight); where it does not, the value is the whole id.
"""

from __future__ import annotations

import bisect
import contextlib
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing._bounds import (
    OverLimit,
    check_expansion,
    check_zip_members,
    expansion_budget,
    limit_reason,
    loads_json,
)
from reprobox.guest.hashing._canonical import flatten
from reprobox.guest.hashing._filebytes import FileIdentity
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._pickle import read_held_pickle, read_pickle
from reprobox.guest.hashing._pickle_arrays import TensorMaker
from reprobox.guest.hashing._pickle_objects import MetaTensorSpec, TensorSpec
from reprobox.guest.hashing._pickle_torch import TORCH_ZIP_FRAMING, OpenFile, ZipStorages
from reprobox.guest.hashing._pickle_unpickler import NoStorages
from reprobox.guest.hashing._text import MAX_TEXT_BYTES
from reprobox.guest.hashing._textbounds import EntryCount, decoded, json_entries, text_value_limit
from reprobox.guest.hashing._torch_archive_read import ArchiveRead, MemberFolder
from reprobox.guest.hashing._torch_types import SavedTensor
from reprobox.guest.hashing._zipdamage import ZIP_DAMAGE, damaged_stream
from reprobox.guest.hashing._ziplayout import zip_layout

if TYPE_CHECKING:
    import torch

MAX_PICKLE_BYTES = 1 << 30
"""A pickle member (``data.pkl``, ``constants.pkl``, a debug pickle): tensors lie outside it."""

SERIALIZATION_ID = ".data/serialization_id"
_MAX_FRAMING_BYTES = 64  # a format member (version, byteorder): a few bytes
_DESCRIPTOR_FLAG = 0x08  # a member followed by a data descriptor: its CRC enters the id
_MASK = (1 << 64) - 1


@dataclass
class TorchArchive:
    """An open archive: each member by its name inside the archive's folder, with where its data lies."""

    file: OpenFile
    zip: zipfile.ZipFile
    prefix: str  # "<archive>/"
    members: dict[str, tuple[zipfile.ZipInfo, Span | None]]
    order: list[str]  # the member names in write order
    maker: TensorMaker  # every tensor of the file, within one budget of bytes they may span
    read: ArchiveRead
    taken: set[str] = field(default_factory=set)
    folder: MemberFolder | None = None

    def span(self, name: str) -> Span | None:
        return self.members[name][1]

    def data(self, name: str, limit: int) -> bytes:
        """A member's bytes, decompressed and checked against its CRC, at most ``limit`` of them."""
        info = self.members[name][0]
        if info.file_size > limit:
            raise OverLimit(f"member '{name}' holds {info.file_size} bytes, over the limit of {limit}")
        self.taken.add(name)
        with _damage_is_the_files(f"member '{name}'"):
            return self.zip.read(info)

    def text(self, name: str) -> str:
        try:
            return decoded(self.data(name, MAX_TEXT_BYTES))
        except UnicodeDecodeError:
            raise ValueError(f"member '{name}' is not UTF-8 text") from None

    def json(self, name: str) -> object:
        """A JSON member, its entries counted before it is parsed and its nesting bounded."""
        raw = self.data(name, MAX_TEXT_BYTES)
        EntryCount(text_value_limit()).add(json_entries(raw))
        try:
            return loads_json(decoded(raw), f"member '{name}'", object_pairs_hook=_unrepeated)
        except UnicodeDecodeError:
            raise ValueError(f"member '{name}' is not UTF-8 JSON") from None

    def pickle(self, name: str, storages: str | None, *, shapes_only: bool = False) -> object:
        """A pickle member read to its last byte by the safe pickle reader, as plain data; its tensors
        are spans of the file over the members of folder ``storages`` (none allowed when None). With
        ``shapes_only``, a tensor whose storage member is empty is its dtype and shape alone: torch writes
        a traced module's example inputs so (``skip_tensor_data``)."""
        persistent = (
            NoStorages().refuse
            if storages is None
            else ZipStorages(self.zip, self.prefix + storages, self.file).persistent_load
        )
        maker = self.maker
        if shapes_only and storages is not None:
            empty = {n.removeprefix(storages) for n, (i, _) in self.members.items() if n.startswith(storages)}
            empty = {key for key in empty if self.members[storages + key][0].file_size == 0}
            maker = _ShapesOnly(self.maker.budget_bytes, self.maker.byteswap, frozenset(empty))
        try:
            return read_held_pickle(self.data(name, MAX_PICKLE_BYTES), persistent, maker)
        except ValueError as exc:
            raise type(exc)(f"member '{name}': {exc}") from None

    def nested(self, name: str, under: str) -> None:
        """A member that is a file of its own (a ``torch.save`` file or a pickle), copied to a private
        temporary file and read by the safe pickle reader, named under ``under``; its layout, at its
        place, accounts for it."""
        info, span = self.members[name]
        if info.compress_type != zipfile.ZIP_STORED or span is None:
            raise ValueError(f"member '{name}' is compressed, which torch's writer never does")
        if self.folder is None:
            self.folder = MemberFolder()
            self.read.keepalive.append(self.folder)
        self.folder.count += 1
        where = self.folder.path / f"{self.folder.count}.pt"
        self._copy(span, where)
        try:
            read = read_pickle(where)
        except ValueError as exc:
            raise type(exc)(f"member '{name}': {exc}") from None
        self.taken.add(name)
        arrays, values = flatten(read.obj)
        covered = [
            (v.covers.offset, v.covers.offset + v.covers.nbytes)
            for _n, v in arrays
            if isinstance(v, SavedTensor) and v.covers is not None
        ]
        self.read.content.extend(_shifted([*read.parsed, *covered], span[0]))
        self.read.framing.extend(_shifted(read.framing, span[0]))
        self.read.keepalive.append(read)
        self.read.add_flat(under, arrays, values)

    def text_or_bytes(self, name: str) -> object:
        """An extra file the caller added: its text, or its bytes when it is not UTF-8."""
        try:
            return self.text(name)
        except ValueError as exc:
            if isinstance(exc, OverLimit):
                raise
            return self.data(name, MAX_TEXT_BYTES)

    def optional(self, name: str, read: Callable[[str], object]) -> None:
        """A member the archive is readable without: its tree (``read(name)``) under its path, or, when
        it cannot be read, a gap (``tolerant``)."""

        def add() -> None:
            self.read.add(name, read(name), self.span(name))

        self.tolerant(name, add)

    def tolerant(self, name: str, read: Callable[[], None]) -> None:
        """Read a member that the archive is readable without: one that cannot be read (within the
        limits) is left a gap, and the note says why."""
        try:
            read()
        except OverLimit:
            raise
        except ValueError as exc:
            self.taken.discard(name)
            self.read.why[name] = limit_reason(exc).removeprefix(f"member '{name}': ")

    def _copy(self, span: Span, where: Path) -> None:
        with where.open("wb") as out:
            position, end = span
            while position < end:
                piece = self.file.read_at(position, min(FILE_CHUNK_BYTES, end - position))
                if not piece:
                    raise OverLimit("the archive ends inside a member")
                out.write(piece)
                position += len(piece)

    def framing_or_id(self) -> None:
        """The format's own members: its version, byte order and alignment are framing; the
        serialization id is a value (see the module's docstring)."""
        for name in self.order:
            info, span = self.members[name]
            if span is None:
                continue
            if name == SERIALIZATION_ID and info.file_size <= _MAX_FRAMING_BYTES:
                self.read.values.append((SERIALIZATION_ID, self._serialization_id(name)))
                self.read.content.append(span)
                self.taken.add(name)
            elif name in TORCH_ZIP_FRAMING and info.compress_size <= _MAX_FRAMING_BYTES:
                self.read.framing.append(span)
                self.taken.add(name)

    def _serialization_id(self, name: str) -> str:
        text = self.data(name, _MAX_FRAMING_BYTES).decode("ascii", "replace")
        combined = 0
        for earlier in self.order[: self.order.index(name)]:
            info = self.members[earlier][0]
            if info.flag_bits & _DESCRIPTOR_FLAG:  # c10::hash_combine, as the writer folds them
                combined ^= (info.CRC + 0x9E3779B9 + (combined << 6) + (combined >> 2)) & _MASK
        if len(text) == 40 and text.isdigit() and text[20:] == f"{combined:020d}":
            return text[:20]
        return text

    def finish(self) -> ArchiveRead:
        """The walk's result: members no reader took, and none of whose bytes a tensor covers (a storage
        no tensor views), are gaps named in the note."""
        gaps = Layout.of(self.file.identity.size, self.read.content, self.read.framing).gaps()
        starts = [start for start, _end in gaps]
        for name in self.order:
            span = self.span(name)
            if name in self.taken or span is None or span[0] == span[1]:
                continue
            at = bisect.bisect_right(starts, span[0]) - 1
            if at >= 0 and gaps[at][1] >= span[1]:  # wholly inside one gap: nothing read it
                self.read.unread.append(name)
        return self.read


@dataclass
class _ShapesOnly(TensorMaker):
    """Tensors whose storage member is empty are their dtype and shape alone (``TorchArchive.pickle``)."""

    empty: frozenset[str] = frozenset()

    def tensor(self, spec: TensorSpec) -> SavedTensor | torch.Tensor:
        if spec.storage.key in self.empty:
            return self.meta(MetaTensorSpec(spec.dtype, spec.size, spec.stride))
        return super().tensor(spec)


def _shifted(spans: Iterable[Span], by: int) -> list[Span]:
    return [(start + by, end + by) for start, end in spans]


def _unrepeated(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are each given once: a repeated key's first value would go unread."""
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("a JSON object gives one key twice")
    return document


@contextlib.contextmanager
def _damage_is_the_files(what: str) -> Iterator[None]:
    """A zip reader's errors over a damaged file as ValueError naming ``what``; the machine's stay."""
    try:
        yield
    except ZIP_DAMAGE as exc:
        if isinstance(exc, ValueError):
            raise
        raise ValueError(f"{what} is damaged ({type(exc).__name__}: {exc})") from None
    except OSError as exc:  # a directory that points before the file's start: the file, not the machine
        if not damaged_stream(exc):
            raise
        raise ValueError(f"{what} is damaged ({exc.strerror or exc})") from None


@contextlib.contextmanager
def open_archive(path: Path, kind: str, reader: str) -> Iterator[TorchArchive]:
    """The archive opened for a walk; ValueError (OverLimit for a limit) if it is no readable zip of one
    folder within the limits."""
    check_zip_members(path, "the archive")
    with _damage_is_the_files("the zip archive"):
        archive = zipfile.ZipFile(path)
    with path.open("rb") as stream, archive:
        identity = FileIdentity.of(stream.fileno())
        infos = archive.infolist()
        check_expansion([(i.filename, i.file_size, i.compress_size) for i in infos], identity.size)
        read = ArchiveRead(path, identity, kind, reader)
        with _damage_is_the_files("the zip archive"):
            opened = _opened(OpenFile(path, stream, identity), archive, read)
        yield opened


def _opened(file: OpenFile, archive: zipfile.ZipFile, read: ArchiveRead) -> TorchArchive:
    infos = archive.infolist()
    if not infos or "/" not in infos[0].filename:
        raise ValueError("its first member lies in no folder, as torch's writer puts every member")
    prefix = infos[0].filename.split("/", 1)[0] + "/"
    layout = zip_layout(file.path, archive)
    read.framing.extend(layout.framing)
    members: dict[str, tuple[zipfile.ZipInfo, Span | None]] = {}
    order: list[str] = []
    for index, info in enumerate(infos):
        name = info.filename.removeprefix(prefix) if info.filename.startswith(prefix) else None
        if name is None or not name or name in members:
            raise ValueError(
                f"member '{info.filename[:200]}' is outside the archive's folder or listed twice"
            )
        members[name] = (info, layout.member(index))
        order.append(name)
    big = "byteorder" in members and archive.read(members["byteorder"][0])[:8] == b"big"
    maker = TensorMaker(expansion_budget(file.identity.size), big)
    return TorchArchive(file, archive, prefix, members, order, maker, read)
