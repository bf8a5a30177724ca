"""Open: check a bundle and unpack it safely, in one pass, before anything in it runs.

Every member's name is checked (no absolute paths, no ``..``, no links leaving the root, no devices or
hard links), its size and sha256 against the index, that no member is missing (a truncated bundle),
and the whole file against its recorded digest. Members go to a private staging folder that is
removed on any failure, so a bad bundle leaves nothing behind.

A bundle may come from anyone, so before the first member is written the index is held to the caps
below (member count, each member's size, the total) and to the free space where it unpacks; sparse
members (which declare terabytes in a few blocks), oversized header extensions, and a member that
would also be a folder of another (a file/link/folder collision) are refused as they are met.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from reprobox import progress
from reprobox.bundle._index import read_index
from reprobox.bundle._model import CHUNK, Bundle, digest_file_for, refused
from reprobox.bundle._streams import HashingReader
from reprobox.bundle._tarsafe import CheckedTarInfo, Unsafe, is_sparse
from reprobox.diskspace import DiskFullFact, is_full
from reprobox.errors import DiskFull, EnvironmentProblem, UsageError

MAX_MEMBERS = 200_000  # code trees and data folders; far more files than any job ships
MAX_MEMBER_BYTES = 64 << 30  # one member: an image archive is the largest, a few GiB to tens
MAX_TOTAL_BYTES = 256 << 30  # everything a bundle may unpack to
FREE_SPACE_MARGIN = 64 << 20  # left free beyond what the index declares


def open_bundle(path: Path, dest_parent: Path, *, expected_sha256: str | None = None) -> Bundle:
    """Check and unpack a bundle under `dest_parent`; SpecError (and nothing left behind) when it is
    truncated, altered, or holds a member that could write outside its folder."""
    if not path.is_file():
        raise UsageError(f"bundle {path} does not exist; pass the .tar made by `reprobox pack`")
    expected, source = _expected_digest(path, expected_sha256)
    created = [d for d in (dest_parent, *dest_parent.parents) if not d.exists()]  # removed on failure
    dest_parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bundle-", dir=dest_parent))
    try:
        progress.say(f"checking bundle {path} ...")
        digest, index = _unpack_checked(path, staging)
        if expected is not None and digest != expected:
            raise refused(
                path,
                "",
                f"has sha256 {digest}, but {_source_text(path, source)} records {expected}: "
                "it was truncated or altered; download it again",
            )
        final = dest_parent / f"{path.stem}-{digest[:16]}"
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in created:  # deepest first; only folders this call made, and only if empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return Bundle(path=path, root=final, sha256=digest, digest_source=source, index=index)


def _expected_digest(path: Path, given: str | None) -> tuple[str | None, str]:
    if given:
        text = given.strip().lower().removeprefix("sha256:")
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            raise UsageError(f"--bundle-sha256 {given!r} is not a sha256 digest (64 hex digits)")
        return text, "given"
    recorded = digest_file_for(path)
    if not recorded.is_file():
        return None, "none"
    with recorded.open("rb") as handle:  # a sha256sum line; never the whole of a planted giant file
        words = handle.read(4096).decode("utf-8", errors="replace").split()
    if not words or len(words[0]) != 64:
        raise refused(recorded, "", "is not a sha256sum line; make it with `reprobox pack`")
    return words[0].lower(), "recorded"


def _source_text(path: Path, source: str) -> str:
    return "--bundle-sha256" if source == "given" else str(digest_file_for(path))


def _unpack_checked(path: Path, staging: Path) -> tuple[str, dict[str, Any]]:
    """One pass over the tar: members checked and written under `staging`; returns (sha256, index)."""
    links: list[tuple[str, str]] = []
    seen: set[str] = set()
    index: dict[str, Any] | None = None
    with path.open("rb") as raw:
        reader = HashingReader(raw)
        try:
            with tarfile.open(fileobj=reader, mode="r|", tarinfo=CheckedTarInfo) as archive:
                for member in archive:
                    if index is None:
                        index = read_index(path, archive, member)
                        _check_declared(path, index, staging)
                        continue
                    name = _safe_name(path, member.name)
                    entry = _entry_for(path, index, name, seen)
                    if is_sparse(member):
                        raise refused(path, name, "is a sparse file; bundles hold regular files only")
                    if member.issym():
                        _check_link(path, name, member.linkname, entry)
                        links.append((name, member.linkname))
                    elif member.isfile():
                        _extract_file(path, archive, member, name=name, entry=entry, staging=staging)
                    else:
                        raise refused(
                            path,
                            name,
                            f"is a {_kind(member)}; bundles hold regular files and in-tree links only",
                        )
                    seen.add(name)
            while reader.read(CHUNK):
                pass
        except Unsafe as exc:
            raise refused(path, exc.name, f"{exc.message}: refused") from None
        except (tarfile.TarError, EOFError, zlib.error, ValueError, OverflowError, RecursionError) as exc:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise refused(path, "", f"is truncated or not a bundle ({reason}); download it again") from None
    if index is None:
        raise refused(path, "", "is empty; it is not a bundle made by `reprobox pack`")
    missing = sorted(set(index["members"]) - seen)
    if missing:
        raise refused(
            path,
            "",
            f"is truncated: {len(missing)} member(s) listed in its index are missing "
            f"({', '.join(missing[:3])}); download it again",
        )
    _make_links(path, staging, links)
    return reader.hexdigest(), index


def _check_declared(path: Path, index: dict[str, Any], staging: Path) -> None:
    """The index, before any member is written: names, types, sizes, collisions and free space."""
    members: dict[str, Any] = index["members"]
    if len(members) > MAX_MEMBERS:
        raise refused(path, "", f"lists {len(members)} members, over the {MAX_MEMBERS} allowed: refused")
    total = 0
    for name, entry in members.items():
        _safe_name(path, name)
        kind, size = entry.get("type"), entry.get("size")
        if kind == "symlink" and isinstance(entry.get("target"), str):
            _check_link(path, name, entry["target"], entry)
            continue
        if kind != "file" or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise refused(path, name, "has no valid type and size in the bundle's index: it was altered")
        if size > MAX_MEMBER_BYTES:
            raise refused(path, name, f"declares {size} bytes, over the {MAX_MEMBER_BYTES} allowed: refused")
        total += size
    if total > MAX_TOTAL_BYTES:
        raise refused(path, "", f"declares {total} bytes in all, over the {MAX_TOTAL_BYTES} allowed: refused")
    for name in members:
        parts = name.split("/")
        for cut in range(1, len(parts)):
            if "/".join(parts[:cut]) in members:
                raise refused(
                    path, name, f"lies under {'/'.join(parts[:cut])!r}, which is itself a member: refused"
                )
    free = shutil.disk_usage(staging).free
    if free < total + FREE_SPACE_MARGIN:
        raise EnvironmentProblem(
            f"bundle {path} unpacks to {total} bytes but {staging.parent} has {free} bytes free; "
            "free some space or unpack it elsewhere"
        )


def _safe_name(path: Path, name: str) -> str:
    """The member's name if it stays inside the bundle's folder; anything else is refused."""
    pure = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or "\0" in name
        or pure.is_absolute()
        or any(part in ("..", ".", "") for part in name.split("/"))
    ):
        raise refused(path, name, "is a path outside the bundle's folder; the bundle is unsafe: refused")
    return name


def _entry_for(path: Path, index: dict[str, Any], name: str, seen: set[str]) -> dict[str, Any]:
    entry = index["members"].get(name)
    if entry is None:
        raise refused(path, name, "is not listed in the bundle's index: it was altered")
    if name in seen:
        raise refused(path, name, "appears twice in the bundle: it was altered")
    return dict(entry)


def _check_link(path: Path, name: str, target: str, entry: dict[str, Any]) -> None:
    if entry.get("type") != "symlink" or entry.get("target") != target:
        raise refused(path, name, "is a link the bundle's index does not list: it was altered")
    joined = PurePosixPath(os.path.normpath(PurePosixPath(name).parent / target))
    if PurePosixPath(target).is_absolute() or not target or joined.parts[:1] == ("..",):
        raise refused(path, name, f"links to {target!r}, outside the bundle's folder: refused")


def _extract_file(
    path: Path,
    archive: tarfile.TarFile,
    member: tarfile.TarInfo,
    *,
    name: str,
    entry: dict[str, Any],
    staging: Path,
) -> None:
    if entry.get("type") != "file" or entry.get("size") != member.size:
        raise refused(path, name, "does not have the size the bundle's index lists: it was altered")
    target = _prepare_target(path, staging, name)
    source = archive.extractfile(member)
    assert source is not None
    digest = hashlib.sha256()
    mode = 0o755 if entry.get("executable") else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        with os.fdopen(os.open(target, flags, mode), "wb") as out:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
        os.chmod(target, mode)  # noqa: PTH101 - the mode the index says, whatever the umask
    except FileExistsError:
        raise refused(path, name, "collides with another member: refused") from None
    except OSError as exc:
        if is_full(exc):  # another writer filled the disk since its free space was checked
            raise DiskFull(DiskFullFact.met(exc, staging.parent)) from None
        raise EnvironmentProblem(f"cannot unpack {name} of bundle {path} ({exc.strerror})") from None
    if digest.hexdigest() != entry.get("sha256"):
        raise refused(path, name, "does not match its sha256 in the bundle's index: it was altered")


def _prepare_target(path: Path, staging: Path, name: str) -> Path:
    """Create the member's parent folders as real folders under `staging` (no link is ever followed)."""
    current = staging
    for part in name.split("/")[:-1]:
        current = current / part
        try:
            current.mkdir()
        except FileExistsError:
            if not stat.S_ISDIR(current.lstat().st_mode):
                raise refused(path, name, "lies under a member that is not a folder: refused") from None
    return current / name.rsplit("/", maxsplit=1)[-1]


def _make_links(path: Path, staging: Path, links: list[tuple[str, str]]) -> None:
    """Links are made last (nothing is written through them) and must resolve inside the folder."""
    root = staging.resolve()
    for name, target in links:
        link = _prepare_target(path, staging, name)
        try:
            link.symlink_to(target)
        except FileExistsError:
            raise refused(path, name, "collides with another member: refused") from None
    for name, _target in links:
        resolved = Path(os.path.realpath(staging / name))
        if resolved != root and root not in resolved.parents:
            raise refused(path, name, "resolves outside the bundle's folder: refused")


def _kind(member: tarfile.TarInfo) -> str:
    if member.islnk():
        return "hard link"
    if member.isdir():
        return "folder entry"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "named pipe"
    return "special member"
