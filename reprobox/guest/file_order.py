"""`verify --vary file-order`: directory listings of the job's code and data folders, reversed.

reprotest reorders a build's directory entries with a FUSE layer (disorderfs); a job's container has no
FUSE, so the startup hook reorders them where Python reads them instead: `os.listdir` and `os.scandir`,
which `os.walk`, `glob` and `pathlib` (`iterdir`, `glob`, `rglob`) call. A listing of a folder under one
of the roots comes back in the reverse of the order the file system gave, so any job that relies on that
order sees a different one (a sorted-descending order would equal the file system's on some). The limit:
listings made outside Python (a C extension's or another program's `readdir`) keep the file system's
order. Imported only when the variation is asked for, so unvaried runs pay nothing for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from reprobox.guest import settings

REVERSED = "reversed"


def _resolve(path: Any) -> str | None:
    """The real absolute folder a listing reads (a path, bytes, or a descriptor), None when unknown."""
    try:
        if isinstance(path, int):
            return os.readlink(f"/proc/self/fd/{path}")  # noqa: PTH115 - the folder a descriptor reads
        return os.path.realpath(os.fsdecode(path))
    except (OSError, TypeError, ValueError):
        return None


class _Reordered:
    """What os.scandir returns (an iterator and a context manager), over entries already read."""

    def __init__(self, entries: list[os.DirEntry[Any]]) -> None:
        self._entries: Iterator[os.DirEntry[Any]] = iter(entries)

    def __iter__(self) -> _Reordered:
        return self

    def __next__(self) -> os.DirEntry[Any]:
        return next(self._entries)

    def __enter__(self) -> _Reordered:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._entries = iter(())


def install_from_env(env: Mapping[str, str]) -> None:
    """Apply settings.FILE_ORDER to the folders settings.FILE_ORDER_ROOTS names (else the code folder)."""
    if env.get(settings.FILE_ORDER) != REVERSED:
        return
    roots = env.get(settings.FILE_ORDER_ROOTS) or env.get(settings.CODE_DIR) or ""
    install(roots.split(os.pathsep))


def install(roots: Sequence[str]) -> None:
    """Reverse Python-level listings of folders under `roots` in this process (and its forks)."""
    real_roots = tuple(os.path.realpath(root) for root in roots if root)
    if not real_roots:
        return
    original_listdir, original_scandir = os.listdir, os.scandir

    def covered(path: Any) -> bool:
        folder = _resolve(path)
        return folder is not None and any(
            folder == root or folder.startswith(root.rstrip(os.sep) + os.sep) for root in real_roots
        )

    def listdir(path: Any = None) -> list[Any]:
        names = original_listdir(path)  # None lists ".", as os.listdir() does
        if covered("." if path is None else path):
            names.reverse()
        return names

    def scandir(path: Any = None) -> Any:
        found = original_scandir(path)
        if not covered("." if path is None else path):
            return found
        with found:
            entries = list(found)
        entries.reverse()
        return _Reordered(entries)

    os.listdir = listdir
    os.scandir = scandir
