"""The run record (`manifest.json`, schema reprobox.run/1): what ran, where, and what it produced.

Records are plain JSON written atomically; readers accept a run directory or a manifest path.
The run directory is writable by the job: anything the job put at `manifest.json` is moved aside
(`move_aside_planted`) before the record is written, and the run is failed for it.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox.errors import EnvironmentProblem, Problem, SpecError
from reprobox.saferead import UnsafeFile, kind_of, read_json

RUN_SCHEMA = "reprobox.run/1"
MANIFEST_NAME = "manifest.json"
STDOUT_LOG = "stdout.log"
MAX_MANIFEST_BYTES = 256 << 20  # far above any real manifest; a planted or corrupt one is refused

STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
STATUS_CANCELLED = "cancelled"  # stopped by reprobox once the verdict was known (verify --stop-on-divergence)


@dataclass(frozen=True)
class RunRecord:
    """A manifest as loaded from disk; `data` is the JSON object, `run_dir` where it lives."""

    run_dir: Path
    data: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id", self.run_dir.name))

    @property
    def status(self) -> str:
        return str(self.data.get("status"))

    @property
    def succeeded(self) -> bool:
        return self.status == STATUS_SUCCEEDED

    @property
    def failure(self) -> str | None:
        value = self.data.get("failure")
        return str(value) if value else None

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        return list(self.data.get("checkpoints") or [])

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self.data.get("fingerprint") or {})

    @property
    def output_dir(self) -> Path:
        return self.run_dir / "outputs"

    def checkpoint(self, path: str) -> dict[str, Any] | None:
        return next((c for c in self.checkpoints if c.get("path") == path), None)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file so that readers see the old one or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp_name).replace(path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def move_aside_planted(run_dir: Path) -> str | None:
    """Move whatever the job left at manifest.json (a folder, a FIFO, a file) to a `.planted-` name.

    Called after the job ended and before reprobox writes the record, so anything found there is the
    job's doing; returns the sentence the manifest's failure carries, or None when nothing was there.
    """
    path = run_dir / MANIFEST_NAME
    try:
        found = kind_of(path.lstat().st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    aside = path.with_name(f"{MANIFEST_NAME}.planted-{secrets.token_hex(3)}")
    try:
        path.rename(aside)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return (
        f"the job created {found} at {MANIFEST_NAME}, where reprobox writes its record; "
        f"it was moved aside to {aside.name}"
    )


def write_record(run_dir: Path, data: dict[str, Any]) -> RunRecord:
    """Write manifest.json atomically; a full disk is an EnvironmentProblem, no half-written record."""
    data = {"schema": RUN_SCHEMA, **data}
    path = run_dir / MANIFEST_NAME
    try:
        if path.is_dir() and not path.is_symlink():  # a rename cannot replace a folder
            move_aside_planted(run_dir)
        write_json_atomic(path, data)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return RunRecord(run_dir, data)


def _cannot_write(path: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot write the run record {path} ({exc.strerror or exc}); free space on the runs folder "
        "(--runs-dir) or fix its permissions, then run again"
    )


def read_record(location: Path | str) -> RunRecord:
    """Load a run from its directory or its manifest.json; bad input is a SpecError naming the file."""
    path = Path(location)
    manifest = path / MANIFEST_NAME if path.is_dir() else path
    if not manifest.exists():
        what = "run directory has no manifest.json" if path.is_dir() else "does not exist"
        raise SpecError(
            [Problem(path, None, "", f"{what}; pass a run directory such as runs/<job>/<run-id>")]
        )
    try:  # a run dir may come from anyone: no link, no FIFO, bounded, as every record reprobox reads
        data = read_json(manifest, MAX_MANIFEST_BYTES)
    except UnsafeFile as exc:
        raise SpecError(
            [Problem(manifest, None, "", f"is not a readable JSON manifest ({exc.problem})")]
        ) from None
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        raise SpecError(
            [
                Problem(
                    manifest,
                    None,
                    "schema",
                    f"is {found!r}, expected {RUN_SCHEMA!r}; is this a reprobox run?",
                )
            ]
        )
    return RunRecord(manifest.parent.resolve(), data)
