"""Pack: an attestation and its code (and optionally the image, the author's checkpoints and the data)
-> one deterministic tar and its recorded sha256."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprobox import attest, progress
from reprobox.bundle._index import build_index
from reprobox.bundle._members import (
    Member,
    bytes_member,
    data_members,
    file_member,
    find_data_sources,
    published_members,
    tree_members,
    tree_path,
)
from reprobox.bundle._model import (
    ATTESTATION_MEMBER,
    IMAGE_MEMBER,
    INDEX_NAME,
    MEMBER_MTIME,
    PackResult,
    digest_file_for,
)
from reprobox.bundle._streams import HashingReader, HashingWriter
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.fileio import AtomicFile, write_text_atomic
from reprobox.guest.filehash import file_sha256


def pack(
    attestation_path: Path,
    out: Path,
    *,
    code: Path | None = None,
    published: Path | None = None,
    data: bool = False,
    engine: Any = None,
) -> PackResult:
    """Write a bundle for `attestation_path`; checks the code against the attestation first."""
    attestation = attest.read_attestation(attestation_path)
    code_dir = (code or attest.locate_code(attestation)).absolute()
    changes = attest.code_changes(attestation, code_dir)
    if changes:
        raise UsageError(
            f"code in {code_dir} differs from the attestation ({describe_changes(changes)}); "
            "pack the checkout the attestation was made from, or pass --code DIR"
        )
    job_file = attest.job_file_in(attestation, code_dir)
    if not job_file.is_file() or file_sha256(job_file) != attestation.job["sha256"]:
        raise UsageError(f"job file {job_file} is missing or differs from the attestation; pass --code DIR")
    data_sources = find_data_sources(attestation, job_file) if data else []
    root = Path(os.path.commonpath([code_dir, job_file.parent, *data_sources]))
    out = out.absolute()
    if out.is_relative_to(code_dir):
        raise UsageError(
            f"write the bundle outside the code folder {code_dir}: inside, it would become part of the code"
        )
    members = tree_members(attestation, code_dir, root)
    if not job_file.is_relative_to(code_dir):
        members.append(file_member(tree_path(job_file, root), job_file))
    for source in data_sources:
        members.extend(data_members(source, root))
    if published is not None:
        members.extend(published_members(attestation, published))
    members.append(bytes_member(ATTESTATION_MEMBER, attestation_path.read_bytes()))
    signature = attest.model_signature_path_for(attestation_path)
    if signature.is_file():  # the model's signature goes where reproduce looks: beside the attestation
        members.append(
            bytes_member(
                attest.model_signature_path_for(Path(ATTESTATION_MEMBER)).name, signature.read_bytes()
            )
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with _image_archive(attestation, engine, out.parent) as image:
        if image is not None:
            members.append(image)
        index = build_index(
            attestation,
            code_dir=code_dir,
            job_file=job_file,
            root=root,
            members=members,
            image=image,
            published=published,
            data_sources=data_sources,
        )
        progress.say(f"writing {out} ({len(members)} files)")
        sha256, size = _write_bundle(out, index, members)
    digest_file = digest_file_for(out)
    write_text_atomic(digest_file, f"{sha256}  {out.name}\n")
    return PackResult(
        path=out,
        sha256=sha256,
        size=size,
        digest_file=digest_file,
        members=len(members) + 1,
        image=(attestation.image or {}).get("id") if image is not None else None,
        published=published is not None,
        data=index["data"],
    )


def describe_changes(changes: dict[str, list[str]], shown: int = 5) -> str:
    """'changed: train.py; added: notes.txt' (the first few of each)."""
    parts = []
    for kind in ("changed", "added", "removed"):
        names = changes.get(kind) or []
        if names:
            more = f" and {len(names) - shown} more" if len(names) > shown else ""
            parts.append(f"{kind}: {', '.join(names[:shown])}{more}")
    return "; ".join(parts)


@contextlib.contextmanager
def _image_archive(attestation: attest.Attestation, engine: Any, workdir: Path) -> Iterator[Member | None]:
    """`docker save` of the attested image into a temporary file, checked to be that image."""
    image = attestation.image
    if image is None:
        yield None
        return
    from reprobox import engine as engine_module

    connected = engine or engine_module.connect()
    refs = [*image.get("tags", []), image["id"]]
    ref = next((r for r in refs if connected.image_exists(r)), None)
    if ref is None:
        raise EnvironmentProblem(
            f"image {image['id'][:19]} of the attestation is not on this Docker engine, so it cannot be "
            "packed; pack on the machine that ran `reprobox verify`"
        )
    found = connected.inspect_image(ref)
    if found.id != image["id"]:
        raise UsageError(
            f"image {ref} on this engine is {found.id[:19]}, not the attested {image['id'][:19]}; "
            "pack on the machine that ran `reprobox verify`"
        )
    progress.say(f"saving image {ref} ({found.id[:19]}) ...")
    handle = tempfile.NamedTemporaryFile(prefix=".image-", suffix=".tar", dir=workdir, delete=False)  # noqa: SIM115
    path = Path(handle.name)
    try:
        hasher = HashingWriter(handle)
        size = engine_module.save_image(connected, ref, hasher)  # type: ignore[arg-type]
        handle.close()
        yield Member(name=IMAGE_MEMBER, source=path, sha256=hasher.hexdigest(), size=size)
    finally:
        handle.close()
        path.unlink(missing_ok=True)


def _write_bundle(out: Path, index: dict[str, Any], members: list[Member]) -> tuple[str, int]:
    """The tar, written to a temporary file and renamed into place; returns (sha256, size)."""
    with AtomicFile(out, mode=0o644) as raw:
        writer = HashingWriter(raw)
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            index_bytes = json.dumps(index, indent=1, sort_keys=True).encode()
            _add(archive, bytes_member(INDEX_NAME, index_bytes))
            for member in sorted(members, key=lambda m: m.name):
                _add(archive, member)
    return writer.hexdigest(), writer.size


def _add(archive: tarfile.TarFile, member: Member) -> None:
    info = tarfile.TarInfo(member.name)
    info.mtime = MEMBER_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if member.link is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = member.link
        info.mode = 0o777
        archive.addfile(info)
        return
    info.size = member.size
    info.mode = 0o755 if member.executable else 0o644
    if member.data is not None:
        archive.addfile(info, io.BytesIO(member.data))
        return
    assert member.source is not None
    with member.source.open("rb") as handle:
        checked = HashingReader(handle)
        archive.addfile(info, checked)
    if checked.hexdigest() != member.sha256:
        raise UsageError(f"{member.source} changed while packing; pack again")
