"""What goes into a bundle: the attested code files, the job file, data and the author's checkpoints,
each as a member with its name in the tar, its size and its sha256."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from reprobox import attest
from reprobox.bundle._model import PUBLISHED, TRAIL_NAME, TREE
from reprobox.bundle._published import check_published
from reprobox.errors import UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.yamlsource import parse_yaml


@dataclass(frozen=True)
class Member:
    name: str
    source: Path | None = None  # a file on disk
    data: bytes | None = None  # or bytes in memory
    link: str | None = None  # or a symlink target
    executable: bool = False
    sha256: str = ""
    size: int = 0


def tree_path(path: Path, root: Path) -> str:
    """The member name of a host path under the bundle's tree/ (tree/ itself for the root)."""
    return TREE if path == root else f"{TREE}/{path.relative_to(root).as_posix()}"


def tree_members(attestation: attest.Attestation, code_dir: Path, root: Path) -> list[Member]:
    members = []
    prefix = tree_path(code_dir, root)
    for relative, entry in sorted(attestation.code["files"].items()):
        name = f"{prefix}/{relative}"
        if entry.startswith("link:"):
            members.append(Member(name=name, link=entry[len("link:") :]))
        else:
            member = file_member(name, code_dir / relative)
            if member.sha256 + ("+x" if member.executable else "") != entry:
                raise UsageError(f"{code_dir / relative} changed while packing; pack again")
            members.append(member)
    return members


def find_data_sources(attestation: attest.Attestation, job_file: Path) -> list[Path]:
    """The job's data sources as written in the job file; only relative ones can travel in a bundle."""
    raw = parse_yaml(attestation.job["text"], attestation.path).data or {}
    if not isinstance(raw, dict):
        return []
    sources = []
    for index, item in enumerate(raw.get("data") or []):
        written = str((item or {}).get("source", ""))
        if not written or Path(written).expanduser().is_absolute():
            raise UsageError(
                f"data.{index}.source {written!r} in {job_file} is an absolute path, which would not "
                "exist on the reviewer's machine; make it relative to the job file to pack it with --data"
            )
        source = Path(os.path.normpath(job_file.parent / written))
        if not source.exists():
            raise UsageError(f"data.{index}.source {source} does not exist; fetch the data before packing")
        sources.append(source)
    return sources


def data_members(source: Path, root: Path) -> list[Member]:
    if source.is_file():
        return [file_member(tree_path(source, root), source)]
    members = []
    for current, dirnames, filenames in os.walk(source):
        dirnames.sort()
        for filename in sorted(filenames):
            path = Path(current) / filename
            if path.is_symlink() or not path.is_file():
                raise UsageError(
                    f"data file {path} is a link or special file; bundles hold regular files only"
                )
            members.append(file_member(tree_path(path, root), path))
    return members


def published_members(attestation: attest.Attestation, directory: Path) -> list[Member]:
    outputs, trail = check_published(attestation, directory)
    members = [
        file_member(f"{PUBLISHED}/outputs/{entry['path']}", outputs / entry["path"])
        for entry in attestation.checkpoints
    ]
    if trail is not None:
        members.append(file_member(f"{PUBLISHED}/{TRAIL_NAME}", trail))
    return members


def file_member(name: str, source: Path) -> Member:
    info = source.stat()
    return Member(
        name=name,
        source=source,
        executable=bool(info.st_mode & stat.S_IXUSR),
        sha256=file_sha256(source),
        size=info.st_size,
    )


def bytes_member(name: str, data: bytes) -> Member:
    return Member(name=name, data=data, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
