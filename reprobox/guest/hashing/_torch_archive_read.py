"""What a walk over a torch writer's archive read (``_torch_archive``), and the reader rows made of it.

An ``ArchiveRead`` holds tensors and values by name, the bytes that accounted for (``_layout``) and the
members no reader took; ``planned`` makes hashing's ``_Content`` of it and ``loaded`` comparison's tensors
and values, so that both name alike. ``planner`` and ``loader`` are the rows' plan and load.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.errors import UsageError
from reprobox.guest.hashing._archives import member_name
from reprobox.guest.hashing._arrays import _Content, _opaque, _refused
from reprobox.guest.hashing._bounds import MAX_VALUES, OverLimit, limit_reason
from reprobox.guest.hashing._canonical import _metadata_digests, flatten
from reprobox.guest.hashing._filebytes import FileIdentity
from reprobox.guest.hashing._formats import _unchanged_arrays
from reprobox.guest.hashing._layout import Layout, Span
from reprobox.guest.hashing._load import LazyTensors, Loaded, _unique, tensor_loaders
from reprobox.guest.hashing._pickle_arrays import TorchNeeded
from reprobox.guest.hashing._torch_types import SavedTensor

_LISTED_UNREAD = 3


@dataclass
class ArchiveRead:
    """What a walk over one archive read: tensors and values by name, the bytes that accounted for, and
    the members no reader took."""

    path: Path
    identity: FileIdentity
    format: str
    reader: str
    note: str | None = None
    tensors: list[tuple[str, Any]] = field(default_factory=list)
    values: list[tuple[str, object]] = field(default_factory=list)
    content: list[Span] = field(default_factory=list)
    framing: list[Span] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # why a member was not read, where a reader tried
    keepalive: list[object] = field(default_factory=list)

    def add_tensors(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """Tensors of this file: each one's storage bytes are content when its elements are every one."""
        for name, value in pairs:
            self.tensors.append((name, value))
            covers = value.covers if isinstance(value, SavedTensor) else None
            if covers is not None and covers.path == self.path:
                self.content.append((covers.offset, covers.offset + covers.nbytes))

    def add(self, member: str, tree: object, span: Span | None) -> None:
        """A member's tree (tensors and values), named under the member's path, its bytes content."""
        self.add_flat(member, *flatten(tree))
        if span is not None:
            self.content.append(span)

    def add_flat(self, under: str, arrays: list[tuple[str, Any]], values: list[tuple[str, object]]) -> None:
        """Tensors and values ``flatten`` named, under ``under`` ("": as named)."""
        self.add_tensors((_under(under, name), value) for name, value in arrays)
        self.values.extend((_under(under, name), value) for name, value in values)
        if len(self.tensors) + len(self.values) > MAX_VALUES:
            raise OverLimit(f"the archive holds more than the limit of {MAX_VALUES} values")

    def full_note(self) -> str | None:
        if not self.unread:
            return self.note
        named = ", ".join(
            f"'{m}'" + (f" ({self.why[m]})" if m in self.why else "") for m in self.unread[:_LISTED_UNREAD]
        )
        more = len(self.unread) - _LISTED_UNREAD
        unread = f"members not read, their bytes compared by their digest and never excused: {named}" + (
            f" and {more} more" if more > 0 else ""
        )
        return f"{self.note}; {unread}" if self.note else unread


class MemberFolder:
    """A private temporary folder of nested files, removed with what reads from it (or at exit)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="reprobox-torch-archive-"))
        self.remove = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        self.count = 0


def _under(under: str, name: str) -> str:
    return member_name(under, name) if under else name


def planned(read: ArchiveRead) -> _Content:
    """What hashing makes of the walk."""
    arrays = [a for pair in read.tensors for a in _unchanged_arrays(read.path, read.identity, pair)]
    return _Content(
        format=read.format,
        arrays=arrays,
        metadata=_metadata_digests(read.values),
        note=read.full_note(),
        keepalive=read.keepalive,
        reader=read.reader,
        values_only=not arrays,
        layout=Layout.of(read.identity.size, read.content, read.framing),
    )


def loaded(read: ArchiveRead) -> Loaded:
    """What comparison reads of the walk: the same names, tensors read when looked up."""
    return LazyTensors(_unique(tensor_loaders(read.tensors)), keepalive=read.keepalive), _unique(read.values)


def planner(read: Callable[[Path], ArchiveRead], kind: str) -> Callable[[Path], _Content]:
    """A reader row's plan: the walk, or the file's bytes with the reason it could not be read."""

    def plan(path: Path) -> _Content:
        try:
            return planned(read(path))
        except (ValueError, RecursionError) as exc:
            return _refused(kind, exc)
        except TorchNeeded as exc:
            return _opaque(f"content not hashed: the file holds {exc}; the content hash is the file sha256")

    return plan


def loader(read: Callable[[Path], ArchiveRead], kind: str) -> Callable[[Path], Loaded]:
    """A reader row's load: the walk's tensors and values, or UsageError in one sentence."""

    def load(path: Path) -> Loaded:
        try:
            return loaded(read(path))
        except OverLimit:
            raise
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{path} is not a readable {kind} archive ({limit_reason(exc)})") from None

    return load
