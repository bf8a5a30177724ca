"""Choosing the output files to hash: a walk that stays inside the output directory, and the globs."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from reprobox.errors import UsageError


def _files_under(root: Path) -> Iterator[str]:
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for filename in filenames:
            candidate = Path(dirpath) / filename
            try:
                if not stat.S_ISREG(candidate.stat().st_mode):
                    continue
                if candidate.is_symlink() and not candidate.resolve().is_relative_to(root):
                    continue
            except OSError:  # a dangling link or a file gone since listing
                continue
            yield candidate.relative_to(root).as_posix()


def _pattern_parts(pattern: str) -> list[str]:
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if not parts or pattern.startswith("/") or ".." in parts:
        raise UsageError(
            f"output pattern '{pattern}' must be a non-empty glob relative to the output directory, "
            "without a leading '/' or '..'"
        )
    return parts


def _matches(pattern: Sequence[str], path: Sequence[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and _matches(rest, path[1:])
