"""A digest of the job's code tree, with per-file digests so a changed file can be named later."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from reprobox.guest.hashing import file_sha256

# Never part of "the code": version control, caches, environments, and reprobox's own run folders.
IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".venv",
        "venv",
        "runs",
    }
)
IGNORED_SUFFIXES = (".pyc", ".pyo")
IGNORED_FILES = frozenset({"reprobox.attestation.json"})  # written next to the job after a verify
CODE_TREE_SCHEMA = "reprobox.codetree/1"


@dataclass(frozen=True)
class CodeTree:
    digest: str
    files: dict[
        str, str
    ]  # relative posix path -> "sha256" (or "link:target" for symlinks); "+x" marks executables

    def to_json(self) -> dict[str, object]:
        return {"schema": CODE_TREE_SCHEMA, "sha256": self.digest, "files": self.files}


def digest_tree(root: Path, *, exclude: tuple[Path, ...] = ()) -> CodeTree:
    """Hash every file under `root` in sorted order; `exclude` lists extra folders to skip (the runs dir)."""
    excluded = {p.resolve() for p in exclude}
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        current = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if d not in IGNORED_DIRS and (current / d).resolve() not in excluded
        )
        for name in sorted(filenames):
            if name.endswith(IGNORED_SUFFIXES) or name in IGNORED_FILES:
                continue
            path = current / name
            relative = path.relative_to(root).as_posix()
            files[relative] = _entry_digest(path)
    return CodeTree(digest=tree_digest(files), files=files)


def tree_digest(files: dict[str, str]) -> str:
    """sha256 over "path\\0entry\\n" for every file in sorted path order: the contract for code digests."""
    digest = hashlib.sha256()
    for relative in sorted(files):
        digest.update(f"{relative}\0{files[relative]}\n".encode())
    return digest.hexdigest()


def changed_files(expected: dict[str, str], actual: dict[str, str]) -> dict[str, list[str]]:
    """Which files were added, removed or changed between two trees."""
    return {
        "added": sorted(set(actual) - set(expected)),
        "removed": sorted(set(expected) - set(actual)),
        "changed": sorted(p for p in set(expected) & set(actual) if expected[p] != actual[p]),
    }


def _entry_digest(path: Path) -> str:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "link:" + str(path.readlink())
    executable = "+x" if info.st_mode & stat.S_IXUSR else ""
    return file_sha256(path) + executable
