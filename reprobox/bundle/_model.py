"""A bundle's names and the two answers about one: what `pack` wrote and what `open_bundle` checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox.errors import Problem, SpecError
from reprobox.guest.settings import TRAIL_FILE

BUNDLE_SCHEMA = "reprobox.bundle/1"
INDEX_NAME = "index.json"
ATTESTATION_MEMBER = "attestation.json"
TREE = "tree"
PUBLISHED = "published"
IMAGE_MEMBER = "image.tar"
TRAIL_NAME = TRAIL_FILE  # the author's trail, under published/, named as in their run directory
MEMBER_MTIME = 946684800  # 2000-01-01T00:00:00Z, as in image build contexts
MAX_INDEX_BYTES = 64 << 20
CHUNK = 1 << 20


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


def refused(path: Path, field: str, message: str) -> SpecError:
    """The error for a bundle (or a file given with it) that is not what it claims to be."""
    return SpecError([Problem(path, None, field, message)])
