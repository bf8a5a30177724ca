"""A read-only, content-addressed copy of the code that every run of one verify runs from.

The user's folder keeps changing while a verify runs (an editor saves, a log is written); the runs must
not see that. So the selected files are copied once into `<store>/<tree digest>/`, written to a
temporary folder and renamed into place, and every run gets the copy as its code folder. The copy's
files are read-only (an in-place edit would need a chmod first), its folders stay writable so that
`rm -rf runs` keeps working; a copy whose listing, sizes or modes no longer match is replaced, not
reused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from reprobox import saferead
from reprobox.codetree._digest import digest_selection
from reprobox.codetree._select import IGNORED_DIRS, IGNORED_SUFFIXES, select_files
from reprobox.codetree._tree import CodeTree, executable_mark, tree_digest
from reprobox.diskspace import DiskFullFact, is_full
from reprobox.errors import DiskFull, UsageError

SNAPSHOTS_DIR = ".code"  # under runs/<job>/: a dot name, so listings of runs skip it
_CHUNK = 1 << 20


@dataclass(frozen=True)
class CodeSnapshot:
    """The user's code folder, its tree, and the copy the runs run from."""

    source: Path
    path: Path
    tree: CodeTree
    reused: bool

    def manifest_entry(self) -> dict[str, Any]:
        """The manifest's `code` section: the user's folder, the tree and git facts, and the copy."""
        return {"path": str(self.source), **self.tree.to_json(), "snapshot": str(self.path)}


def snapshot_code(source: Path, store: Path, *, exclude: tuple[Path, ...] = ()) -> CodeSnapshot:
    """Copy the code in `source` into `store/<tree digest>/`, or reuse the copy already there."""
    selection = select_files(source, exclude=exclude)
    tree = digest_selection(selection)
    store = store.absolute()  # runtimes get it as the job's code folder, which is always absolute
    store.mkdir(parents=True, exist_ok=True)
    target = store / tree.digest
    if _holds(target, tree, source):
        return CodeSnapshot(source, target, tree, reused=True)
    temporary = store / f".tmp-{os.urandom(6).hex()}"
    try:
        copied = _copy(source, temporary, tree)
        if copied != tree.files:  # a file changed while copying: the copy is what the runs will run
            tree = replace(tree, files=copied, digest=tree_digest(copied))
            target = store / tree.digest
        _move_into_place(temporary, target, tree, source)
    finally:
        if temporary.exists():
            _remove(temporary)
    return CodeSnapshot(source, target, tree, reused=False)


def _copy(source: Path, destination: Path, tree: CodeTree) -> dict[str, str]:
    """Copy every file of `tree`, hashing the bytes as they are written; returns the copy's entries."""
    copied: dict[str, str] = {}
    destination.mkdir()
    for relative in sorted(tree.files):
        origin, copy = source / relative, destination / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            info = origin.lstat()
            if stat.S_ISLNK(info.st_mode):
                target = str(origin.readlink())
                copy.symlink_to(_link_text(relative, target, source))
                copied[relative] = "link:" + target
            else:
                copied[relative] = _copy_file(origin, copy) + executable_mark(info.st_mode)
                copy.chmod(0o555 if executable_mark(info.st_mode) else 0o444)
        except FileNotFoundError:
            continue  # removed since it was digested
        except OSError as exc:
            if is_full(exc):
                raise DiskFull(DiskFullFact.met(exc, destination.parent)) from None
            raise UsageError(
                f"cannot copy {origin} into the code snapshot {destination} ({exc.strerror}); "
                "check the permissions and free space of the runs folder (--runs-dir)"
            ) from None
    return copied


def _copy_file(origin: Path, copy: Path) -> str:
    """Copy one regular file; one replaced by a FIFO or a device since it was selected is refused."""
    digest = hashlib.sha256()
    try:
        fd = saferead.open_regular(origin)
    except saferead.UnsafeFile as exc:
        raise UsageError(
            f"{exc.message} (it changed while the code was being copied); remove it or list it in "
            ".reproboxignore, then run again"
        ) from None
    with os.fdopen(fd, "rb") as reader, copy.open("xb") as writer:
        while chunk := reader.read(_CHUNK):
            digest.update(chunk)
            writer.write(chunk)
    return digest.hexdigest()


def _link_text(relative: str, target: str, source: Path) -> str:
    """A link that points inside the tree is copied as is; one that leaves it points at the original
    place, so the copy finds what the folder found (a link is recorded by its text either way)."""
    if PurePosixPath(target).is_absolute():
        return target
    inside = os.path.normpath(PurePosixPath(relative).parent / target)
    if inside != ".." and not inside.startswith("../"):
        return target
    return os.path.normpath(source.absolute() / PurePosixPath(relative).parent / target)


def _move_into_place(temporary: Path, target: Path, tree: CodeTree, source: Path) -> None:
    try:
        temporary.rename(target)
        return
    except OSError:
        if _holds(target, tree, source):  # another verify of the same code got there first
            return
    stale = target.with_name(f".stale-{os.urandom(6).hex()}")  # a damaged copy: replace it
    target.rename(stale)
    temporary.rename(target)
    _remove(stale)


def _holds(folder: Path, tree: CodeTree, source: Path) -> bool:
    """Whether `folder` is an intact copy of `tree`: the same entries, links, sizes and read-only modes.

    Contents are not re-read: files are written read-only, so changing one in place takes a chmod.
    """
    if not folder.is_dir():
        return False
    expected = dict(tree.files)
    for dirpath, dirnames, filenames in os.walk(folder):
        current = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d not in IGNORED_DIRS or (current / d).is_symlink()]
        for name in [*filenames, *(d for d in dirnames if (current / d).is_symlink())]:
            if name.endswith(IGNORED_SUFFIXES):
                continue
            path = current / name
            relative = path.relative_to(folder).as_posix()
            entry = expected.pop(relative, None)
            if entry is None or not _entry_matches(path, relative, entry, source):
                return False
        dirnames[:] = [d for d in dirnames if not (current / d).is_symlink()]
    return not expected


def _entry_matches(path: Path, relative: str, entry: str, source: Path) -> bool:
    info = path.lstat()
    if entry.startswith("link:"):
        return stat.S_ISLNK(info.st_mode) and str(path.readlink()) == _link_text(
            relative, entry[len("link:") :], source
        )
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o222:
        return False
    if executable_mark(info.st_mode) != ("+x" if entry.endswith("+x") else ""):
        return False
    try:
        return info.st_size == (source / relative).stat().st_size
    except OSError:
        return False


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
