"""A file's first bytes, read once while the table of readers decides which reader takes the file, and
the recognisers of the formats whose readers are heavy to import.

Each row's ``detect`` looks at the first bytes (a zip's ``PK``, a pickle's protocol, a tar's ``ustar``);
tried in order, they would open a file they do not recognise once each. Within ``session`` the first
``HEAD_BYTES`` and what the detectors derive from them are read once per file and kept until the
decision is made; outside one, each call reads the file itself.

Every file meets the rows' detectors in order until one takes it, so a detector that lived in its reader
would import that reader (SQLite, DCP, PT2, TorchScript: their readers and all they build on) for every
file that merely passes its row. Their recognisers are here instead, with the signatures they check;
each reader is imported only when a file of its format is read (``_readers``).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from reprobox.guest.hashing._bounds import MAX_ARCHIVE_MEMBERS, zip_member_count
from reprobox.guest.hashing._zipdamage import ZIP_DAMAGE

HEAD_BYTES = 512
"""Enough for every detector: a tar's magic sits at byte 257."""

TEXT_FORMATS = {
    ".json": "json",
    ".ipynb": "json",  # a Jupyter notebook is one JSON document (nbformat): its outputs read as values
    ".jsonl": "jsonl",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".csv": "csv",
    ".tsv": "tsv",  # CatBoost's catboost_info/time_left.tsv and learn_error.tsv
    ".tab": "tsv",
}
"""Each structured text format (``_text``) by the suffixes that name it."""

SQLITE_MAGIC = b"SQLite format 3\x00"
OCDBT_MANIFEST, OCDBT_SEARCH_LEVELS = "manifest.ocdbt", 4
_OCDBT_MAGIC = bytes.fromhex("0cdb3a2a")  # a manifest's magic, big-endian
_OCDBT_DATA_NAME = re.compile(r"[0-9a-f]{32}")
DCP_INDEX_NAME = ".metadata"  # a torch Distributed Checkpoint's index (``_dcp``) ...
DCP_SHARD_SUFFIX = ".distcp"  # ... beside its shards (``_dcp_shards``)
_ZIP_LOCAL_HEADER = b"PK\x03\x04"
_NOT_A_ZIP_OF_OURS: tuple[type[Exception], ...] = (*ZIP_DAMAGE, OSError)
ZIP_MAGIC = _ZIP_LOCAL_HEADER  # a torch zip starts with its first member
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."  # pickle.dumps(0x1950A86A20F9469CFC6C, 2)
_PICKLE_PROTO, _PICKLE_HIGHEST_PROTOCOL = 0x80, 5  # pickle.PROTO and HIGHEST_PROTOCOL, without pickle
PICKLE_SUFFIXES = frozenset({".pkl", ".pickle"})
TORCH_SUFFIXES = frozenset({".pt", ".pth", ".bin", ".ckpt"})

T = TypeVar("T")

_SEEN: contextvars.ContextVar[dict[tuple[Path, str], object] | None] = contextvars.ContextVar(
    "reprobox_sniffed", default=None
)


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Keep what the detectors read while one file's reader is chosen."""
    token = _SEEN.set({})
    try:
        yield
    finally:
        _SEEN.reset(token)


def memo(path: Path, what: str, compute: Callable[[Path], T]) -> T:
    """``compute(path)``, once per file within a session."""
    seen = _SEEN.get()
    if seen is None:
        return compute(path)
    key = (path, what)
    if key not in seen:
        seen[key] = compute(path)
    return seen[key]  # type: ignore[return-value]


def suffix(path: Path) -> str:
    """The file's suffix in lower case (``.json``)."""
    return memo(path, "suffix", lambda p: p.suffix.lower())


def head(path: Path) -> bytes:
    """The file's first ``HEAD_BYTES`` (fewer when it is shorter)."""
    return memo(path, "head", _read_head)


def _read_head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(HEAD_BYTES)


def pickled_kind(path: Path) -> str | None:
    """``"torch"`` for torch.save files, ``"pickle"`` for other pickles, else None; once per file within a
    session (it may read a zip's directory)."""
    return memo(path, "pickled_kind", _pickled_kind)


def _pickled_kind(path: Path) -> str | None:
    start = head(path)[: len(LEGACY_MAGIC)]
    if start.startswith(ZIP_MAGIC):
        return "torch" if zip_pickle_name(path) is not None else None
    if start.startswith(LEGACY_MAGIC):
        return "torch"
    if len(start) >= 3 and start[0] == _PICKLE_PROTO and 2 <= start[1] <= _PICKLE_HIGHEST_PROTOCOL:
        return "pickle"
    return None


def zip_pickle_name(path: Path) -> str | None:
    """A torch zip's ``<archive>/data.pkl``, or None (an archive of too many members is not looked into)."""
    try:
        if zip_member_count(path) > MAX_ARCHIVE_MEMBERS:
            return None
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except _NOT_A_ZIP_OF_OURS:  # damaged: not a torch archive, whatever its suffix
        return None
    return next((n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")), None)


def is_pickle_file(path: Path) -> bool:
    """A pickle: by a pickle suffix, or by its first bytes."""
    return suffix(path) in PICKLE_SUFFIXES or pickled_kind(path) == "pickle"


def is_torch_file(path: Path) -> bool:
    """A ``torch.save`` file: by its first bytes (``checkpoint.pth.tar``), else by a torch suffix unless
    its bytes are another container's (a zip without ``data.pkl`` is an archive). A ``.pkl`` suffix
    names the pickle reader, whatever the bytes."""
    name_suffix = suffix(path)
    if name_suffix in PICKLE_SUFFIXES:
        return False
    if pickled_kind(path) == "torch":
        return True
    return name_suffix in TORCH_SUFFIXES and head(path)[:4] not in (b"PK\x03\x04", b"PK\x05\x06")


def text_format(path: Path) -> str | None:
    """The structured text format a file is read as, from its suffix, or None."""
    return TEXT_FORMATS.get(suffix(path))


def is_sqlite(path: Path) -> bool:
    return head(path)[: len(SQLITE_MAGIC)] == SQLITE_MAGIC


def is_dcp_index(path: Path) -> bool:
    """A DCP ``.metadata`` file: by its name and a shard beside it."""
    return path.name == DCP_INDEX_NAME and any(path.parent.glob("*" + DCP_SHARD_SUFFIX))


def is_dcp_shard(path: Path) -> bool:
    return suffix(path) == DCP_SHARD_SUFFIX


def is_ocdbt(path: Path) -> bool:
    """A TensorStore OCDBT database's ``manifest.ocdbt``, or a data file ``d/<32 hex digits>`` with a
    manifest up to ``OCDBT_SEARCH_LEVELS`` folders above it."""
    if path.name == OCDBT_MANIFEST:
        return head(path)[:4] == _OCDBT_MAGIC
    return path.parent.name == "d" and bool(_OCDBT_DATA_NAME.fullmatch(path.name)) and bool(ocdbt_above(path))


def ocdbt_above(path: Path) -> list[Path]:
    """The manifests of the databases a data file may belong to, nearest first."""
    found, folder = [], path.parent.parent
    for _ in range(OCDBT_SEARCH_LEVELS):
        if (folder / OCDBT_MANIFEST).is_file():
            found.append(folder / OCDBT_MANIFEST)
        if folder.parent == folder:
            break
        folder = folder.parent
    return found


def is_pt2(path: Path) -> bool:
    """A zip whose folder holds ``archive_format`` reading ``pt2`` (as ``is_pt2_package`` judges it)."""
    if head(path)[:4] != _ZIP_LOCAL_HEADER:
        return False
    return memo(path, "pt2", _is_pt2)


def _is_pt2(path: Path) -> bool:
    try:
        if zip_member_count(path) > MAX_ARCHIVE_MEMBERS:
            return False  # not looked into: the archive reader refuses it by the same limit
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if not names or "/" not in names[0]:
                return False
            member = names[0].split("/", 1)[0] + "/archive_format"
            if member not in names or archive.getinfo(member).file_size > 16:
                return False
            return archive.read(member) == b"pt2"
    except _NOT_A_ZIP_OF_OURS:  # damaged: not a PT2 archive, whatever it says
        return False


def is_torchscript(path: Path) -> bool:
    """A torch zip (``<archive>/data.pkl``) with TorchScript's code or constants beside its data."""
    if pickled_kind(path) != "torch":
        return False
    return memo(path, "torchscript", _is_torchscript)


def _is_torchscript(path: Path) -> bool:
    """Whether a torch zip archive is TorchScript's (``torch.jit.save``): it carries code beside data.pkl."""
    name = zip_pickle_name(path)
    if name is None:
        return False
    prefix = name.removesuffix("data.pkl")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    return any(n.startswith(prefix + "code/") for n in names) or prefix + "constants.pkl" in names
