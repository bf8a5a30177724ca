"""Air-gapped bundles: one tar with the attestation, the code, the job, the image and (optionally) the
author's checkpoints and data, so a reviewer can reproduce with no registry and no network.

Layout (plain tar, deterministic: sorted names, owner 0, fixed mtime, modes 644/755):

    index.json          first member: schema, what is where, and every member's size and sha256
    attestation.json    the attestation exactly as published (signed or not)
    tree/...            the attested code files, the job file and packed data at their relative places
    published/...       the author's checkpoints (outputs/...) and trail, when packed
    image.tar           `docker save` of the job's image, when the job ran in one

The bundle's own sha256 is written next to it as ``BUNDLE.sha256`` (sha256sum format). Opening a bundle
checks everything before anything runs: every member's name (no absolute paths, no ``..``, no links
leaving the root, no devices or hard links), size and sha256 against the index, that no member is
missing (a truncated bundle), and the whole file against its recorded digest. Members go to a private
staging folder that is removed on any failure, so a bad bundle leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import yaml

from reprobox import attest
from reprobox._version import __version__
from reprobox.errors import EnvironmentProblem, Problem, ReproboxError, SpecError, UsageError
from reprobox.manifest import MANIFEST_NAME, write_text_atomic

BUNDLE_SCHEMA = "reprobox.bundle/1"
INDEX_NAME = "index.json"
ATTESTATION_MEMBER = "attestation.json"
TREE = "tree"
PUBLISHED = "published"
IMAGE_MEMBER = "image.tar"
TRAIL_NAME = "trail.jsonl"
MEMBER_MTIME = 946684800  # 2000-01-01T00:00:00Z, as in image build contexts
MAX_INDEX_BYTES = 64 << 20
CHUNK = 1 << 20

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    """A progress callback that shows nothing."""


@dataclass(frozen=True)
class PackResult:
    path: Path
    sha256: str
    size: int
    digest_file: Path
    members: int
    image: str | None
    published: bool
    data: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "bundle": str(self.path),
            "sha256": self.sha256,
            "bytes": self.size,
            "digest_file": str(self.digest_file),
            "members": self.members,
            "image": self.image,
            "published": self.published,
            "data": self.data,
        }


@dataclass(frozen=True)
class Bundle:
    """A bundle checked and unpacked into `root`; the paths point inside it."""

    path: Path
    root: Path
    sha256: str
    digest_source: str  # "recorded" (BUNDLE.sha256), "given" (--bundle-sha256) or "none"
    index: dict[str, Any]

    @property
    def attestation(self) -> Path:
        return self.root / str(self.index["attestation"]["file"])

    @property
    def code_dir(self) -> Path:
        return self.root / str(self.index["code"])

    @property
    def image_archive(self) -> Path | None:
        image = self.index.get("image")
        return self.root / str(image["file"]) if image else None

    @property
    def published(self) -> Path | None:
        name = self.index.get("published")
        return self.root / str(name) if name else None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "digest_checked_against": self.digest_source,
            "unpacked_to": str(self.root),
            "image": (self.index.get("image") or {}).get("id"),
        }


def digest_file_for(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + ".sha256")


def looks_like_bundle(path: Path) -> bool:
    """A bundle is a tar; an attestation is JSON (starts with `{`). Decided by content, not name."""
    try:
        with path.open("rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    return bool(head) and not head.lstrip().startswith(b"{")


# -- published checkpoints ------------------------------------------------------------------------


def published_parts(directory: Path) -> tuple[Path, Path | None]:
    """(outputs folder, trail file or None) of a run directory or of a plain folder of checkpoints."""
    if (directory / MANIFEST_NAME).is_file() or (directory / "outputs").is_dir():
        trail = directory / TRAIL_NAME
        return directory / "outputs", trail if trail.is_file() else None
    return directory, None


def check_published(attestation: attest.Attestation, directory: Path) -> tuple[Path, Path | None]:
    """The author's checkpoint files, each checked against its attested file sha256."""
    if not directory.is_dir():
        raise UsageError(f"--published {directory} is not a folder; pass the author's run or outputs folder")
    outputs, trail = published_parts(directory)
    for entry in attestation.checkpoints:
        path = outputs / entry["path"]
        if not path.is_file():
            raise UsageError(
                f"published folder {directory} has no {entry['path']}; pass the folder holding the author's "
                "checkpoints (a run directory or its outputs/)"
            )
        if not _is_attested_checkpoint(path, entry):
            raise _refused(
                path, "", "matches neither the attested file sha256 nor its content hash: not the author's"
            )
    expected_trail = (attestation.predicate.get("trail") or {}).get("sha256")
    if trail is not None and (expected_trail is None or _file_sha256(trail) != expected_trail):
        trail = None  # a trail that is not the attested one explains nothing
    return outputs, trail


def _is_attested_checkpoint(path: Path, entry: dict[str, Any]) -> bool:
    """The same bytes as one of the author's runs, or (slower, needs torch) the same tensors."""
    if _file_sha256(path) in {entry["file_sha256"], *entry.get("file_sha256_runs", [])}:
        return True
    from reprobox.guest.hashing import content_digest

    try:
        content, _tensors = content_digest(path)
    except (ImportError, ReproboxError):
        return False
    return bool(content == entry["content_sha256"])


# -- pack -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Member:
    name: str
    source: Path | None = None  # a file on disk
    data: bytes | None = None  # or bytes in memory
    link: str | None = None  # or a symlink target
    executable: bool = False
    sha256: str = ""
    size: int = 0


def pack(
    attestation_path: Path,
    out: Path,
    *,
    code: Path | None = None,
    published: Path | None = None,
    data: bool = False,
    engine: Any = None,
    progress: Progress = _quiet,
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
    if not job_file.is_file() or _file_sha256(job_file) != attestation.job["sha256"]:
        raise UsageError(f"job file {job_file} is missing or differs from the attestation; pass --code DIR")
    data_sources = _data_sources(attestation, job_file) if data else []
    root = Path(os.path.commonpath([code_dir, job_file.parent, *data_sources]))
    out = out.absolute()
    if out.is_relative_to(code_dir):
        raise UsageError(
            f"write the bundle outside the code folder {code_dir}: inside, it would become part of the code"
        )
    members = _tree_members(attestation, code_dir, root)
    if not job_file.is_relative_to(code_dir):
        members.append(_file_member(_tree_path(job_file, root), job_file))
    for source in data_sources:
        members.extend(_data_members(source, root))
    if published is not None:
        members.extend(_published_members(attestation, published))
    members.append(_bytes_member(ATTESTATION_MEMBER, attestation_path.read_bytes()))
    out.parent.mkdir(parents=True, exist_ok=True)
    with _image_archive(attestation, engine, out.parent, progress) as image:
        if image is not None:
            members.append(image)
        index = _index(
            attestation,
            code_dir=code_dir,
            job_file=job_file,
            root=root,
            members=members,
            image=image,
            published=published,
            data_sources=data_sources,
        )
        progress(f"writing {out} ({len(members)} files)")
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


def _tree_path(path: Path, root: Path) -> str:
    """The member name of a host path under the bundle's tree/ (tree/ itself for the root)."""
    return TREE if path == root else f"{TREE}/{path.relative_to(root).as_posix()}"


def _tree_members(attestation: attest.Attestation, code_dir: Path, root: Path) -> list[_Member]:
    members = []
    prefix = _tree_path(code_dir, root)
    for relative, entry in sorted(attestation.code["files"].items()):
        name = f"{prefix}/{relative}"
        if entry.startswith("link:"):
            members.append(_Member(name=name, link=entry[len("link:") :]))
        else:
            member = _file_member(name, code_dir / relative)
            if member.sha256 + ("+x" if member.executable else "") != entry:
                raise UsageError(f"{code_dir / relative} changed while packing; pack again")
            members.append(member)
    return members


def _data_sources(attestation: attest.Attestation, job_file: Path) -> list[Path]:
    """The job's data sources as written in the job file; only relative ones can travel in a bundle."""
    raw = yaml.safe_load(attestation.job["text"]) or {}
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


def _data_members(source: Path, root: Path) -> list[_Member]:
    if source.is_file():
        return [_file_member(_tree_path(source, root), source)]
    members = []
    for current, dirnames, filenames in os.walk(source):
        dirnames.sort()
        for filename in sorted(filenames):
            path = Path(current) / filename
            if path.is_symlink() or not path.is_file():
                raise UsageError(
                    f"data file {path} is a link or special file; bundles hold regular files only"
                )
            members.append(_file_member(_tree_path(path, root), path))
    return members


def _published_members(attestation: attest.Attestation, directory: Path) -> list[_Member]:
    outputs, trail = check_published(attestation, directory)
    members = [
        _file_member(f"{PUBLISHED}/outputs/{entry['path']}", outputs / entry["path"])
        for entry in attestation.checkpoints
    ]
    if trail is not None:
        members.append(_file_member(f"{PUBLISHED}/{TRAIL_NAME}", trail))
    return members


def _file_member(name: str, source: Path) -> _Member:
    info = source.stat()
    return _Member(
        name=name,
        source=source,
        executable=bool(info.st_mode & stat.S_IXUSR),
        sha256=_file_sha256(source),
        size=info.st_size,
    )


def _bytes_member(name: str, data: bytes) -> _Member:
    return _Member(name=name, data=data, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


@contextlib.contextmanager
def _image_archive(
    attestation: attest.Attestation, engine: Any, workdir: Path, progress: Progress
) -> Iterator[_Member | None]:
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
    progress(f"saving image {ref} ({found.id[:19]}) ...")
    handle = tempfile.NamedTemporaryFile(prefix=".image-", suffix=".tar", dir=workdir, delete=False)  # noqa: SIM115
    path = Path(handle.name)
    try:
        hasher = _HashingWriter(handle)
        size = engine_module.save_image(connected, ref, hasher)  # type: ignore[arg-type]
        handle.close()
        yield _Member(name=IMAGE_MEMBER, source=path, sha256=hasher.hexdigest(), size=size)
    finally:
        handle.close()
        path.unlink(missing_ok=True)


def _index(
    attestation: attest.Attestation,
    *,
    code_dir: Path,
    job_file: Path,
    root: Path,
    members: list[_Member],
    image: _Member | None,
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
        "code": _tree_path(code_dir, root),
        "job_file": _tree_path(job_file, root),
        "published": PUBLISHED if published is not None else None,
        "image": image_entry,
        "data": [_tree_path(s, root) for s in data_sources],
        "members": entries,
    }


def _write_bundle(out: Path, index: dict[str, Any], members: list[_Member]) -> tuple[str, int]:
    """The tar, written to a temporary file and renamed into place; returns (sha256, size)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            writer = _HashingWriter(raw)
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
                index_bytes = json.dumps(index, indent=1, sort_keys=True).encode()
                _add(archive, _bytes_member(INDEX_NAME, index_bytes))
                for member in sorted(members, key=lambda m: m.name):
                    _add(archive, member)
            raw.flush()
            os.fsync(raw.fileno())
        Path(tmp_name).chmod(0o644)
        Path(tmp_name).replace(out)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return writer.hexdigest(), writer.size


def _add(archive: tarfile.TarFile, member: _Member) -> None:
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
        checked = _HashingReader(handle)
        archive.addfile(info, checked)
    if checked.hexdigest() != member.sha256:
        raise UsageError(f"{member.source} changed while packing; pack again")


# -- open -----------------------------------------------------------------------------------------


def open_bundle(
    path: Path, dest_parent: Path, *, expected_sha256: str | None = None, progress: Progress = _quiet
) -> Bundle:
    """Check and unpack a bundle under `dest_parent`; SpecError (and nothing left behind) when it is
    truncated, altered, or holds a member that could write outside its folder."""
    if not path.is_file():
        raise UsageError(f"bundle {path} does not exist; pass the .tar made by `reprobox pack`")
    expected, source = _expected_digest(path, expected_sha256)
    created = [d for d in (dest_parent, *dest_parent.parents) if not d.exists()]  # removed on failure
    dest_parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bundle-", dir=dest_parent))
    try:
        progress(f"checking bundle {path} ...")
        digest, index = _unpack_checked(path, staging)
        if expected is not None and digest != expected:
            raise _refused(
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
    words = recorded.read_text(encoding="utf-8", errors="replace").split()
    if not words or len(words[0]) != 64:
        raise _refused(recorded, "", "is not a sha256sum line; make it with `reprobox pack`")
    return words[0].lower(), "recorded"


def _source_text(path: Path, source: str) -> str:
    return "--bundle-sha256" if source == "given" else str(digest_file_for(path))


def _unpack_checked(path: Path, staging: Path) -> tuple[str, dict[str, Any]]:
    """One pass over the tar: members checked and written under `staging`; returns (sha256, index)."""
    links: list[tuple[str, str]] = []
    seen: set[str] = set()
    index: dict[str, Any] | None = None
    with path.open("rb") as raw:
        reader = _HashingReader(raw)
        try:
            with tarfile.open(fileobj=reader, mode="r|") as archive:
                for member in archive:
                    if index is None:
                        index = _read_index(path, archive, member)
                        continue
                    name = _safe_name(path, member.name)
                    entry = _entry_for(path, index, name, seen)
                    if member.issym():
                        _check_link(path, name, member.linkname, entry)
                        links.append((name, member.linkname))
                    elif member.isfile():
                        _extract_file(path, archive, member, name=name, entry=entry, staging=staging)
                    else:
                        raise _refused(
                            path,
                            name,
                            f"is a {_kind(member)}; bundles hold regular files and in-tree links only",
                        )
                    seen.add(name)
            while reader.read(CHUNK):
                pass
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            raise _refused(path, "", f"is truncated or not a bundle ({exc}); download it again") from None
    if index is None:
        raise _refused(path, "", "is empty; it is not a bundle made by `reprobox pack`")
    missing = sorted(set(index["members"]) - seen)
    if missing:
        raise _refused(
            path,
            "",
            f"is truncated: {len(missing)} member(s) listed in its index are missing "
            f"({', '.join(missing[:3])}); download it again",
        )
    _make_links(path, staging, links)
    return reader.hexdigest(), index


def _read_index(path: Path, archive: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any]:
    if member.name != INDEX_NAME or not member.isfile() or member.size > MAX_INDEX_BYTES:
        raise _refused(
            path, "", f"does not start with {INDEX_NAME}; it is not a bundle made by `reprobox pack`"
        )
    handle = archive.extractfile(member)
    assert handle is not None
    try:
        index = json.loads(handle.read())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _refused(path, INDEX_NAME, f"is not JSON ({exc})") from None
    if not isinstance(index, dict) or index.get("schema") != BUNDLE_SCHEMA:
        found = index.get("schema") if isinstance(index, dict) else None
        raise _refused(
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
        raise _refused(path, name, "is a path outside the bundle's folder; the bundle is unsafe: refused")
    return name


def _entry_for(path: Path, index: dict[str, Any], name: str, seen: set[str]) -> dict[str, Any]:
    entry = index["members"].get(name)
    if entry is None:
        raise _refused(path, name, "is not listed in the bundle's index: it was altered")
    if name in seen:
        raise _refused(path, name, "appears twice in the bundle: it was altered")
    return dict(entry)


def _check_link(path: Path, name: str, target: str, entry: dict[str, Any]) -> None:
    if entry.get("type") != "symlink" or entry.get("target") != target:
        raise _refused(path, name, "is a link the bundle's index does not list: it was altered")
    joined = PurePosixPath(os.path.normpath(PurePosixPath(name).parent / target))
    if PurePosixPath(target).is_absolute() or not target or joined.parts[:1] == ("..",):
        raise _refused(path, name, f"links to {target!r}, outside the bundle's folder: refused")


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
        raise _refused(path, name, "does not have the size the bundle's index lists: it was altered")
    target = _prepare_target(path, staging, name)
    source = archive.extractfile(member)
    assert source is not None
    digest = hashlib.sha256()
    mode = 0o755 if entry.get("executable") else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(target, flags, mode), "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    os.chmod(target, mode)  # noqa: PTH101 - the mode the index says, whatever the umask
    if digest.hexdigest() != entry.get("sha256"):
        raise _refused(path, name, "does not match its sha256 in the bundle's index: it was altered")


def _prepare_target(path: Path, staging: Path, name: str) -> Path:
    """Create the member's parent folders as real folders under `staging` (no link is ever followed)."""
    current = staging
    for part in name.split("/")[:-1]:
        current = current / part
        try:
            current.mkdir()
        except FileExistsError:
            if not stat.S_ISDIR(current.lstat().st_mode):
                raise _refused(path, name, "lies under a member that is not a folder: refused") from None
    return current / name.rsplit("/", maxsplit=1)[-1]


def _make_links(path: Path, staging: Path, links: list[tuple[str, str]]) -> None:
    """Links are made last (nothing is written through them) and must resolve inside the folder."""
    root = staging.resolve()
    for name, target in links:
        link = _prepare_target(path, staging, name)
        link.symlink_to(target)
    for name, _target in links:
        resolved = Path(os.path.realpath(staging / name))
        if resolved != root and root not in resolved.parents:
            raise _refused(path, name, "resolves outside the bundle's folder: refused")


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


def _refused(path: Path, field: str, message: str) -> SpecError:
    return SpecError([Problem(path, None, field, message)])


# -- hashing streams ------------------------------------------------------------------------------


class _HashingReader(io.RawIOBase):
    """Hashes what is read through it, so one pass both unpacks and digests the bundle."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self.raw.read(size)
        self.digest.update(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


class _HashingWriter(io.RawIOBase):
    """Hashes and counts what is written through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.raw.write(chunk)
        self.digest.update(chunk)
        self.size += len(chunk)
        return len(chunk)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
