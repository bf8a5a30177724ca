"""A code tree as data: per-file digests and the one digest over them (the contract attestations rely on)."""

from __future__ import annotations

import hashlib
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox.guest.filehash import file_sha256

CODE_TREE_SCHEMA = "reprobox.codetree/1"


@dataclass(frozen=True)
class GitFacts:
    """Where the code sat in git: the commit checked out and whether the folder differed from it."""

    commit: str | None  # None in a repository with no commit yet
    dirty: bool  # `git status --porcelain` listed something in the code folder
    root: str  # the work tree's top folder

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "dirty": self.dirty, "root": self.root}


@dataclass(frozen=True)
class CodeTree:
    digest: str
    files: dict[str, str]  # relative posix path -> sha256 ("+x" marks executables) or "link:target"
    git: GitFacts | None = None
    selection: str | None = None  # how the files were chosen: "git" or "reproboxignore"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": CODE_TREE_SCHEMA, "sha256": self.digest, "files": self.files}
        if self.selection is not None:
            data["selection"] = self.selection
            data["git"] = self.git.to_json() if self.git is not None else None
        return data


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


def entry_digest(path: Path) -> str:
    """A file's entry in the tree: its sha256 (+x when executable), or the target of a symlink."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "link:" + str(path.readlink())
    return file_sha256(path) + executable_mark(info.st_mode)


def executable_mark(mode: int) -> str:
    return "+x" if mode & stat.S_IXUSR else ""
