"""Digests of a job's data sources, made once per verify (data can be large; it is read only once).

A file source's digest is its sha256; a folder source's is the code-tree digest (`tree_digest`) over
its files' sha256, following symlinks (datasets often link into a shared store; what counts is what
the job reads). File count and bytes come with it, so a changed data set is visible at a glance.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reprobox import progress
from reprobox.codetree._tree import tree_digest
from reprobox.errors import UsageError

if TYPE_CHECKING:
    from reprobox.jobfile import DataMount

LARGE_BYTES = 256 << 20  # from this size on, hashing says what it is doing
PROGRESS_EVERY_S = 5.0
_CHUNK = 4 << 20


@dataclass(frozen=True)
class DataDigest:
    source: str
    target: str
    kind: str  # "file" or "folder"
    sha256: str
    files: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "sha256": self.sha256,
            "files": self.files,
            "bytes": self.bytes,
        }


def digest_data(mounts: Sequence[DataMount]) -> tuple[DataDigest, ...]:
    """One digest per data source, in the job file's order; large ones report progress as they go."""
    return tuple(_digest_source(m.source, m.target) for m in mounts)


def _digest_source(source: Path, target: str) -> DataDigest:
    if not source.exists():
        raise UsageError(f"data source {source} does not exist; fetch the data or fix data[].source")
    listed = [("", source)] if source.is_file() else _list_folder(source)
    total = sum(path.stat().st_size for _, path in listed)
    meter = _Meter(source, total)
    digests: dict[str, str] = {}
    for relative, path in listed:
        try:
            digests[relative] = _sha256(path, meter)
        except OSError as exc:
            raise UsageError(
                f"cannot read data file {path} ({exc.strerror}); make it readable for reprobox"
            ) from None
    meter.done()
    if source.is_file():
        return DataDigest(str(source), target, "file", digests[""], 1, total)
    return DataDigest(str(source), target, "folder", tree_digest(digests), len(listed), total)


def _list_folder(root: Path) -> list[tuple[str, Path]]:
    """Every file under `root`, links followed, each folder visited once (a link loop ends there)."""
    found: list[tuple[str, Path]] = []
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        info = Path(dirpath).stat()
        if (info.st_dev, info.st_ino) in seen:
            dirnames[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirnames.sort()
        current = Path(dirpath)
        for name in sorted(filenames):
            path = current / name
            if path.is_file():  # a dangling link or a special file holds no data
                found.append((path.relative_to(root).as_posix(), path))
    return found


class _Meter:
    """Reports progress on large sources: at the start, every few seconds, and at the end."""

    def __init__(self, source: Path, total: int) -> None:
        self.source, self.total = source, total
        self.read = 0
        self.started = self.last = time.monotonic()
        self.loud = total >= LARGE_BYTES
        if self.loud:
            progress.say(f"hashing data {source} ({_size(total)}) once for all runs ...")

    def add(self, count: int) -> None:
        self.read += count
        now = time.monotonic()
        if self.loud and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            progress.say(
                f"hashing data {self.source}: {100 * self.read // max(self.total, 1)}% of {_size(self.total)}"
            )

    def done(self) -> None:
        if self.loud:
            progress.say(f"hashed data {self.source} in {time.monotonic() - self.started:.0f} s")


def _sha256(path: Path, meter: _Meter) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            meter.add(len(chunk))
    return digest.hexdigest()


def _size(count: int) -> str:
    return f"{count / 1e9:.1f} GB" if count >= 1e9 else f"{count / 1e6:.0f} MB"
