"""The author's published checkpoints (a run directory or a folder of files), checked against the
attestation before a bundle carries them or a reproduction compares with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobox import attest
from reprobox.bundle._model import TRAIL_NAME, refused
from reprobox.errors import ReproboxError, UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.records.manifest import MANIFEST_NAME


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
            raise refused(
                path, "", "matches neither the attested file sha256 nor its content hash: not the author's"
            )
    expected_trail = attestation.trail_sha256
    if trail is not None and (expected_trail is None or file_sha256(trail) != expected_trail):
        trail = None  # a trail that is not the attested one explains nothing
    return outputs, trail


def _is_attested_checkpoint(path: Path, entry: dict[str, Any]) -> bool:
    """The same bytes as one of the author's runs, or (slower, needs torch) the same tensors."""
    if file_sha256(path) in {entry["file_sha256"], *entry.get("file_sha256_runs", [])}:
        return True
    from reprobox.guest.hashing import content_digest

    try:
        content, _tensors = content_digest(path)
    except (ImportError, ReproboxError):
        return False
    return bool(content == entry["content_sha256"])
