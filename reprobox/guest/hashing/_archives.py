"""Zip and tar archives of outputs read as folders: each member by the reader the table gives it.

Stable-Baselines3, sb3-contrib and the RL Zoo save a model as a zip of ``policy.pth``,
``policy.optimizer.pth``, ``pytorch_variables.pth``, a JSON ``data`` member and two text members; a Keras
``.keras`` file is a zip of JSON and HDF5 (``_hdf5``); people tar their checkpoint folders. Hashed as
bytes, the members' times, order and compression make every run "differ" and hide the weights. Read here: each
member is written to a private temporary folder and read through the same table of readers
(``_readers``) as any output file, within the same limits, so its tensors and values enter the verdict.

Names: what a member holds is named ``<member path>/<name inside it>`` (``policy.pth/mlp_extractor.
policy_net.0.weight``, ``data/learning_rate``); a member's root value or tensor is the member path
itself (``weights.npy``). A member no reader reads is one value, its text, when it is UTF-8 of at most
``MAX_MEMBER_TEXT_BYTES`` (``_stable_baselines3_version``, ``system_info.txt``); any other such member
(a damaged checkpoint, an HDF5 file with a feature its reader refuses) makes the whole archive one
compared by its bytes, with a note naming the member: no verdict is given over content that was not
read.
A link or other special member of a tar is ``{"member": "symbolic link to <target>"}``. A name that
occurs twice in one archive gets ``#2``, ``#3`` ... in archive order. Directories are not members.

Limits (``_bounds``): the member count, before a zip's directory is read; each member's and the members'
total expansion (a zip bomb is refused from its directory, a compressed tar as its headers come); the
bytes written in all; archives inside archives, ``MAX_ARCHIVE_DEPTH`` levels. A member name that leaves
the archive's folder (``..``, an absolute path) refuses the archive. A refused archive is compared by its
bytes, with a note saying why. A single gzip, bzip2 or xz file is read here too, as an archive of one
member (``_compressed``); the members are written out by ``_archive_members``. Torch's own zip
(``data.pkl``) and NumPy's ``.npz`` are not archives here: the table gives them to their own readers
first.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
import tarfile
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from reprobox.errors import UsageError
from reprobox.guest.hashing import _sniff
from reprobox.guest.hashing._archive_layout import TarWalk, archive_layout
from reprobox.guest.hashing._archive_members import deeper, extract_members
from reprobox.guest.hashing._arrays import _Array, _Content, _opaque, _refused
from reprobox.guest.hashing._bounds import (
    OverLimit,
    limit_reason,
)
from reprobox.guest.hashing._canonical import _metadata_digests
from reprobox.guest.hashing._layout import Layout
from reprobox.guest.hashing._load import LazyTensors, Loaded, Loader
from reprobox.guest.hashing._zipdamage import ZIP_DAMAGE

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a member first, or an empty archive's end record
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz")
_TAR_MAGIC_AT, _TAR_MAGIC = 257, b"ustar"

MAX_MEMBER_TEXT_BYTES = 1 << 20
"""A member no reader reads is its text up to this size (compared, and masked, as text)."""

MEMBER_SEPARATOR = "/"

_ERRORS: tuple[type[Exception], ...] = (*ZIP_DAMAGE, tarfile.TarError, gzip.BadGzipFile)

CONTAINERS = {"zip": "zip archive", "tar": "tar archive", "compressed": "compressed file"}
"""Each kind of container in sentences; a compressed file (``_compressed``) is an archive of one member."""


def is_zip_archive(path: Path) -> bool:
    return _sniff.head(path)[:4] in ZIP_MAGICS


def is_tar_archive(path: Path) -> bool:
    """A tar by its suffix (``.tar.gz``), or an uncompressed one by the magic in its first header."""
    if path.name.lower().endswith(TAR_SUFFIXES):
        return True
    return _sniff.head(path)[_TAR_MAGIC_AT : _TAR_MAGIC_AT + len(_TAR_MAGIC)] == _TAR_MAGIC


def member_name(member: str, inner: str) -> str:
    """The name of what a member holds: the member path, then the name inside it."""
    return f"{member}{MEMBER_SEPARATOR}{inner}" if inner else member


@dataclass(frozen=True)
class MemberReaders:
    """How an archive reads its members: through the one table of readers (``_readers``), which hands
    itself in, so that a member, an archive inside an archive included, is read as any output file is."""

    plan: Callable[[Path], _Content]  # what hashing makes of a member
    load: Callable[[Path], Loaded | None]  # its tensors and values for comparison; None when no row reads it


def plan_archive(path: Path, readers: MemberReaders) -> _Content:
    """Each member's tensors and values under its name, or the archive's bytes with the reason."""
    kind = _kind(path)
    folder = _Folder()
    walk = TarWalk()
    try:
        members = extract_members(path, folder.path, kind, walk)
    except _ERRORS as exc:
        folder.remove()
        return _refused(CONTAINERS[kind].removesuffix(" file"), exc)
    accounted: list[Layout | None] = []  # each member's bytes, as what read it accounted for them
    arrays: list[_Array] = []
    metadata: dict[str, str] = {}
    kept: list[object] = [folder]  # the folder goes when the plan does: the members' maps point into it
    notes: list[str] = []
    refusal: str | None = None
    with deeper():
        for name, where in members:
            if isinstance(where, str):
                metadata.update(_metadata_digests([(name, {"member": where})]))
                accounted.append(Layout.whole(0))  # a link or special member: its header is all it is
                continue
            content = readers.plan(where)
            as_text = Layout.whole(where.stat().st_size) if content.format == "file" else None
            accounted.append(as_text or content.layout)  # as text (or refused: see below), or by its reader
            kept.append(content.keepalive)
            if content.note is not None:
                notes.append(f"member '{name}': {content.note}")
            if content.refusal is not None and refusal is None:
                refusal = f"member '{name}': {content.refusal}"
            if content.format == "file":
                text = _text_value(where)
                if text is None:  # no verdict is given over what is not read: the archive is bytes
                    folder.remove()
                    return _opaque(_unread_member(kind, name, content.note), content.refusal)
                metadata.update(_metadata_digests([(name, text)]))
                continue
            arrays.extend(dataclasses.replace(a, name=member_name(name, a.name)) for a in content.arrays)
            metadata.update({member_name(name, key): digest for key, digest in content.metadata.items()})
    return _Content(
        format=kind,
        arrays=arrays,
        metadata=metadata,
        note="; ".join(notes) or None,
        keepalive=kept,
        reader=f"{CONTAINERS[kind]} reader",
        refusal=refusal,
        values_only=not arrays,
        layout=archive_layout(path, kind, walk, accounted),
    )


def load_archive(path: Path, readers: MemberReaders) -> Loaded:
    """Each member's tensors and values under the names ``plan_archive`` gives them (for comparison).

    The members are read from a private temporary folder that the returned tensors keep until they are
    let go: each is read from its member's file when it is looked up (``LazyTensors``).
    """
    kind = _kind(path)
    loaders: dict[str, Loader] = {}
    values: dict[str, object] = {}
    folder = _Folder()
    try:
        try:
            members = extract_members(path, folder.path, kind, TarWalk())
        except OverLimit:
            raise
        except _ERRORS as exc:
            raise UsageError(f"{path} is not a readable {CONTAINERS[kind]} ({limit_reason(exc)})") from None
        with deeper():
            for name, where in members:
                if isinstance(where, str):
                    values[name] = {"member": where}
                    continue
                try:
                    read = readers.load(where)
                except (UsageError, ValueError):
                    read = None  # read as bytes, as hashing did
                inner_tensors, inner_values = read or ({}, {})
                if read is None or (
                    not inner_tensors and not inner_values and _planned_as_bytes(where, readers)
                ):
                    text = _text_value(where)
                    if text is None:
                        raise UsageError(f"{path}: {_unread_member(kind, name, None)}")
                    values[name] = text
                    continue
                loaders.update(
                    {member_name(name, k): partial(inner_tensors.__getitem__, k) for k in inner_tensors}
                )
                values.update({member_name(name, k): v for k, v in inner_values.items()})
    except BaseException:
        folder.remove()
        raise
    return LazyTensors(loaders, keepalive=folder), values


def _planned_as_bytes(path: Path, readers: MemberReaders) -> bool:
    """Whether hashing read this member as bytes (a reader recognised it but could not read its content)."""
    return readers.plan(path).format == "file"


class _Folder:
    """A private temporary folder of members, removed with the plan that reads from it (or at exit)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="reprobox-archive-"))
        self.remove = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


def _kind(path: Path) -> str:
    return "zip" if is_zip_archive(path) else "tar" if is_tar_archive(path) else "compressed"


def _text_value(path: Path) -> str | None:
    """A member no reader reads, as its text when it is short UTF-8; None for anything else."""
    if path.stat().st_size > MAX_MEMBER_TEXT_BYTES:
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unread_member(kind: str, name: str, why: str | None) -> str:
    return (
        f"content not hashed: member '{name}' of the {CONTAINERS[kind]} is in no format reprobox reads"
        f"{f' ({why})' if why else ''}; the archive is compared as bytes"
    )
