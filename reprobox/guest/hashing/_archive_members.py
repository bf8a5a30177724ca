"""An archive's members written to a private folder to be read: a zip's or a tar's, one by one within
the limits (``_bounds``: the member count, each member's and the total expansion), or a compressed
file's one member (``_compressed``). Names are made safe (none leaves the folder) and unique in archive
order; a tar's headers and end are noted in its ``TarWalk`` (``_archive_layout``). Archives inside
archives are counted (``deeper``), ``MAX_ARCHIVE_DEPTH`` levels at most.
"""

from __future__ import annotations

import contextlib
import contextvars
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprobox.guest.filehash import FILE_CHUNK_BYTES
from reprobox.guest.hashing import _compressed
from reprobox.guest.hashing._archive_layout import TarWalk
from reprobox.guest.hashing._bounds import (
    MAX_ARCHIVE_DEPTH,
    MAX_ARCHIVE_MEMBERS,
    OverLimit,
    check_archive_total,
    check_expansion,
    check_zip_members,
)

Member = tuple[str, Path | str]
"""A member's name and where it was written, or, for a link or special member, what it is."""


_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("reprobox_archive_depth", default=0)


@contextlib.contextmanager
def deeper() -> Iterator[None]:
    """One level further into archives inside archives: OverLimit past ``MAX_ARCHIVE_DEPTH``."""
    depth = _DEPTH.get() + 1
    if depth > MAX_ARCHIVE_DEPTH:
        raise OverLimit(f"archives nest deeper than the limit of {MAX_ARCHIVE_DEPTH} levels")
    token = _DEPTH.set(depth)
    try:
        yield
    finally:
        _DEPTH.reset(token)


def _safe_name(raw: str) -> str:
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if raw.startswith("/") or ".." in parts or not parts:
        raise ValueError(f"member '{raw[:200]}' names a path outside the archive")
    return "/".join(parts)


class _Names:
    """Member names made unique in archive order (a zip may hold one name twice)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def unique(self, raw: str) -> tuple[str, str]:
        """The member's name in values, and its path in the archive's folder."""
        name = _safe_name(raw)
        count = self._seen.get(name, 0) + 1
        self._seen[name] = count
        return (name if count == 1 else f"{name}#{count}"), name


def extract_members(path: Path, folder: Path, kind: str, walk: TarWalk) -> list[Member]:
    """The members, written to ``folder``; a tar's headers and end noted in ``walk``."""
    if _DEPTH.get() >= MAX_ARCHIVE_DEPTH:
        raise OverLimit(f"archives nest deeper than the limit of {MAX_ARCHIVE_DEPTH} levels")
    try:
        if kind == "compressed":  # gzip, bzip2 or xz: one member, the file without its suffix
            _compressed.decompress(path, target := _target(folder, 0, _compressed.inner_name(path)))
            return [(target.name, target)]
        return _extract_zip(path, folder) if kind == "zip" else _extract_tar(path, folder, walk)
    except OSError as exc:
        if exc.errno is None:  # a compressed stream that does not decompress (bz2 says so as OSError)
            raise ValueError(str(exc)) from None
        # a member name the file system refuses (too long), or no room for the members
        raise ValueError(f"its members could not be written to a temporary folder ({exc.strerror})") from None


def _target(folder: Path, index: int, relative: str) -> Path:
    """Where a member is written: its own folder, so its name and place are as in the archive."""
    target = folder / str(index) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _copy(source: Any, target: Path, declared: int, name: str) -> None:
    """Write a member, refusing one that holds more bytes than its header declared."""
    written = 0
    with target.open("wb") as out:
        while chunk := source.read(FILE_CHUNK_BYTES):
            written += len(chunk)
            if written > declared:
                raise OverLimit(f"member '{name}' holds more bytes than its header declares")
            out.write(chunk)


def _extract_zip(path: Path, folder: Path) -> list[Member]:
    check_zip_members(path, "the archive")
    members: list[Member] = []
    names = _Names()
    with zipfile.ZipFile(path) as archive:
        infos = [info for info in archive.infolist() if not info.is_dir()]
        check_expansion([(i.filename, i.file_size, i.compress_size) for i in infos], path.stat().st_size)
        for index, info in enumerate(infos):
            name, relative = names.unique(info.filename)
            target = _target(folder, index, relative)
            with archive.open(info) as source:
                _copy(source, target, info.file_size, name)
            members.append((name, target))
    return members


def _extract_tar(path: Path, folder: Path, walk: TarWalk) -> list[Member]:
    members: list[Member] = []
    names = _Names()
    archive_bytes, total, count = path.stat().st_size, 0, 0
    with tarfile.open(path, "r:*") as archive:
        walk.watch(archive)
        while (info := archive.next()) is not None:
            count += 1
            if count > MAX_ARCHIVE_MEMBERS:
                raise OverLimit(f"the archive lists more than the limit of {MAX_ARCHIVE_MEMBERS} members")
            walk.add(info, listed=not info.isdir())
            if info.isdir():
                continue
            name, relative = names.unique(info.name)
            if not info.isreg():
                members.append((name, _special(info)))
                continue
            total += info.size
            check_archive_total(total, archive_bytes)  # before the member is decompressed
            source = archive.extractfile(info)
            if source is None:
                members.append((name, _special(info)))
                continue
            target = _target(folder, count, relative)
            with source:
                _copy(source, target, info.size, name)
            members.append((name, target))
        walk.finish(archive, path, total)
    return members


def _special(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"symbolic link to {info.linkname}"
    if info.islnk():
        return f"hard link to {info.linkname}"
    return "special file (device or FIFO)"
