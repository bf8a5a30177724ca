"""The run record (`manifest.json`, schema reprobox.run/1): what ran, where, and what it produced.

Records are plain JSON written atomically and read back through one validating reader; the read form
is `RunRecord` (`reprobox.records.run`). Readers accept a run directory or a manifest path. The run
directory is writable by the job: anything the job put at `manifest.json` is moved aside
(`move_aside_planted`) before the record is written, and the run is failed for it.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from reprobox.diskspace import DiskFullFact, is_full
from reprobox.errors import DiskFull, EnvironmentProblem, Problem, SpecError
from reprobox.fileio import write_json_atomic
from reprobox.records._shape import ARRAY, FLAG, OBJECT, TEXT, WHOLE, all_text, unknown_version, wrong_type
from reprobox.records.run import (
    STATUS_CANCELLED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_SUCCEEDED,
    STATUSES,
    RunRecord,
)
from reprobox.saferead import UnsafeFile, kind_of, read_json

__all__ = [  # the read form and statuses are RunRecord's
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "RUN_SCHEMA",
    "RUN_SCHEMA_PREFIX",
    "STATUSES",
    "STATUS_CANCELLED",
    "STATUS_FAILED",
    "STATUS_INTERRUPTED",
    "STATUS_SUCCEEDED",
    "STDOUT_LOG",
    "RunRecord",
    "check_manifest",
    "move_aside_planted",
    "read_record",
    "rewrite_record",
    "write_record",
]

RUN_SCHEMA_PREFIX = "reprobox.run/"
RUN_SCHEMA = RUN_SCHEMA_PREFIX + "1"
MANIFEST_NAME = "manifest.json"
STDOUT_LOG = "stdout.log"
MAX_MANIFEST_BYTES = 256 << 20  # far above any real manifest; a planted or corrupt one is refused

# field -> the JSON types it may hold (absent or null is fine for every field: older records lack some)
_FIELDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("run_id", "job_name", "status", "failure", "started_at", "ended_at", "trail"), TEXT),
    **dict.fromkeys(
        ("reprobox_version", "job_file", "job_file_sha256", "reference_run", "attestation"), TEXT
    ),
    **dict.fromkeys(("exit_code", "signal", "seed"), WHOLE)
    | dict.fromkeys(("timed_out", "oom_killed"), FLAG),
    **dict.fromkeys(
        ("job", "code", "environment", "runtime", "fingerprint", "prefix_check", "stopped_early"), OBJECT
    ),
    "disk_full": OBJECT,
    "run_facts": OBJECT,  # the guest's record of what makes the run itself (reprobox.runspecific)
    **dict.fromkeys(("data", "command", "checkpoints", "notes"), ARRAY),
}


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
    """Write manifest.json atomically; a full disk is DiskFull (an EnvironmentProblem), no half-written
    record and no temporary file left."""
    data = {"schema": RUN_SCHEMA, **data}
    path = run_dir / MANIFEST_NAME
    try:
        if path.is_dir() and not path.is_symlink():  # a rename cannot replace a folder
            move_aside_planted(run_dir)
        write_json_atomic(path, data, sync_folder=True)
    except OSError as exc:
        if is_full(exc):  # the run dir's disk: the sentence names it and its free bytes
            raise DiskFull(DiskFullFact.met(exc, run_dir)) from None
        raise _cannot_write(path, exc) from None
    return RunRecord(run_dir, data)


def rewrite_record(record: RunRecord, **changes: Any) -> RunRecord:
    """Write the record again with some fields changed (a run's status once the verify ended)."""
    data = {**record.data, **changes}
    data.pop("schema", None)
    return write_record(record.run_dir, data)


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
        sentence = "is " + unknown_version(
            found,
            RUN_SCHEMA,
            RUN_SCHEMA_PREFIX,
            "read it with the reprobox version that made the run (its reprobox_version)",
            "is this a reprobox run?",
        )
        raise SpecError([Problem(manifest, None, "schema", sentence)])
    problem = check_manifest(data)
    if problem is not None:
        raise SpecError(
            [Problem(manifest, None, "", f"{problem}; the record was damaged or edited: run the job again")]
        )
    return RunRecord(manifest.parent.resolve(), data)


def check_manifest(data: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a manifest's fields, or None."""
    problem = wrong_type(data, _FIELDS)
    if problem is not None:
        return problem
    status, seed = data.get("status"), data.get("seed")
    image = (data.get("runtime") or {}).get("image")
    checks = (
        (status is None or status in STATUSES, f"status {status!r}, which reprobox never writes"),
        (seed is None or seed >= 0, f"seed {seed}, below 0"),
        (data.get("command") is None or all_text(data["command"]), "a command that is not a list of strings"),
        (data.get("notes") is None or all_text(data["notes"]), "notes that are not a list of strings"),
        (
            all(
                isinstance(c, dict) and isinstance(c.get("path"), str) for c in data.get("checkpoints") or ()
            ),
            "checkpoints that are not objects with a path",
        ),
        (
            image is None or (isinstance(image, dict) and isinstance(image.get("id") or "", str)),
            "a runtime image that is not an object with an id",
        ),
    )
    return next((f"has {what}" for fine, what in checks if not fine), None)
