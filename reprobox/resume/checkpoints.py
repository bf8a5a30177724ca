"""A run's resumable checkpoints as its manifest records them: step, files, and the hashes that identify
them (each file's sha256, to check a checkpoint before it is replayed; a content digest over its files,
what an attestation publishes)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from reprobox.jobfile.checkpoint_patterns import Resumable, find_resumable
from reprobox.records.manifest import RunRecord


@dataclass(frozen=True)
class RecordedCheckpoint:
    """One resumable checkpoint of a run, with the hashes its manifest holds for its files."""

    step: int
    path: str
    file_sha256: dict[str, str]  # each file (relative to the outputs folder) -> its sha256
    content_sha256: str  # one digest over the files' content hashes: equal weights, equal digest

    def to_json(self) -> dict[str, object]:
        return {
            "step": self.step,
            "path": self.path,
            "content_sha256": self.content_sha256,
            "files": dict(sorted(self.file_sha256.items())),
        }


def recorded_checkpoints(record: RunRecord) -> list[RecordedCheckpoint]:
    """The run's resumable checkpoints by step; empty when its job declares none."""
    pattern = record.resume_pattern
    if pattern is None:
        return []
    entries = {str(c.get("path")): c for c in record.checkpoints if c.get("path")}
    return [_recorded(found, entries) for found in find_resumable(entries, pattern)]


def _recorded(found: Resumable, entries: dict[str, dict[str, object]]) -> RecordedCheckpoint:
    rows = [
        [file[len(found.path) + 1 :] if found.is_folder else "", str(entries[file].get("content_sha256"))]
        for file in found.files
    ]
    content = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
    shas = {file: str(entries[file].get("file_sha256")) for file in found.files}
    return RecordedCheckpoint(found.step, found.path, shas, content)
