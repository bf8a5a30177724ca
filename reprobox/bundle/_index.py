"""index.json, a bundle's first member: what is where, and every member's type, size and sha256.

`pack` writes it; opening a bundle reads it first and checks every later member against it.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

from reprobox import attest
from reprobox._version import __version__
from reprobox.bundle._members import Member, tree_path
from reprobox.bundle._model import (
    ATTESTATION_MEMBER,
    BUNDLE_SCHEMA,
    IMAGE_MEMBER,
    INDEX_NAME,
    MAX_INDEX_BYTES,
    PUBLISHED,
    refused,
)
from reprobox.errors import Problem, SpecError
from reprobox.fileio import loads_bounded


def build_index(
    attestation: attest.Attestation,
    *,
    code_dir: Path,
    job_file: Path,
    root: Path,
    members: list[Member],
    image: Member | None,
    published: Path | None,
    data_sources: list[Path],
) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for member in members:
        if member.link is not None:
            entries[member.name] = {"type": "symlink", "target": member.link}
        else:
            entries[member.name] = {
                "type": "file",
                "sha256": member.sha256,
                "size": member.size,
                "executable": member.executable,
            }
    attested = next(m for m in members if m.name == ATTESTATION_MEMBER)
    image_entry = None
    if image is not None and attestation.image is not None:
        image_entry = {
            "file": IMAGE_MEMBER,
            "id": attestation.image["id"],
            "tags": attestation.image.get("tags", []),
        }
    return {
        "schema": BUNDLE_SCHEMA,
        "reprobox_version": __version__,
        "job": attestation.job["name"],
        "attestation": {"file": ATTESTATION_MEMBER, "sha256": attested.sha256},
        "code": tree_path(code_dir, root),
        "job_file": tree_path(job_file, root),
        "published": PUBLISHED if published is not None else None,
        "image": image_entry,
        "data": [tree_path(s, root) for s in data_sources],
        "members": entries,
    }


def read_index(path: Path, archive: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any]:
    if member.name != INDEX_NAME or not member.isfile() or member.size > MAX_INDEX_BYTES:
        raise refused(
            path, "", f"does not start with {INDEX_NAME}; it is not a bundle made by `reprobox pack`"
        )
    handle = archive.extractfile(member)
    assert handle is not None
    try:
        index = loads_bounded(handle.read())
    except ValueError as exc:  # not JSON, not UTF-8, or nested absurdly deep
        raise refused(path, INDEX_NAME, f"is not JSON ({exc})") from None
    if not isinstance(index, dict) or index.get("schema") != BUNDLE_SCHEMA:
        found = index.get("schema") if isinstance(index, dict) else None
        raise refused(
            path,
            f"{INDEX_NAME} schema",
            f"is {found!r}, expected {BUNDLE_SCHEMA!r}; install the reprobox version that packed it",
        )
    problems = _index_problems(path, index)
    if problems:
        raise SpecError(problems)
    return index


def _index_problems(path: Path, index: dict[str, Any]) -> list[Problem]:
    members = index.get("members")
    if not isinstance(members, dict) or not all(isinstance(v, dict) for v in members.values()):
        return [Problem(path, None, f"{INDEX_NAME} members", "must map each member to its type and digest")]
    shapes = {"attestation": dict, "image": dict, "code": str, "published": str, "job_file": str}
    for key, kind in shapes.items():
        if index.get(key) is not None and not isinstance(index[key], kind):
            return [Problem(path, None, f"{INDEX_NAME} {key}", f"must be {kind.__name__}; pack it again")]
    problems = []
    pointers = {
        "attestation.file": (index.get("attestation") or {}).get("file"),
        "job_file": index.get("job_file"),
        "image.file": (index.get("image") or {}).get("file") if index.get("image") else None,
    }
    for field_name, name in pointers.items():
        if name is not None and name not in members:
            problems.append(
                Problem(path, None, f"{INDEX_NAME} {field_name}", f"names {name!r}, not a member")
            )
    for field_name, name in (("code", index.get("code")), ("published", index.get("published"))):
        if name is not None and not any(m == name or m.startswith(f"{name}/") for m in members):
            problems.append(
                Problem(path, None, f"{INDEX_NAME} {field_name}", f"names {name!r}, which is empty")
            )
    if not pointers["attestation.file"] or index.get("code") is None:
        problems.append(Problem(path, None, INDEX_NAME, "lacks the attestation or the code; pack it again"))
    return problems
