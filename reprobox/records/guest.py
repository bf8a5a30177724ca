"""The guest's account of a run (`.reprobox/guest.json`, schema reprobox.guest/1): written by the guest
when the job's command ended, read by the controller as the untrusted file it is.

The job can write in its run directory, so the record may have been replaced by a FIFO, a link, a
directory, a huge file or JSON of the wrong shape. Reading it never hangs or follows a link, and every
field is checked for its type: a bad record makes the run fail with a sentence saying what the job
did, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobox import diskspace as space
from reprobox import saferead
from reprobox.fileio import write_json_atomic
from reprobox.records._shape import (
    ARRAY,
    OBJECT,
    TEXT,
    WHOLE,
    all_text,
    unknown_version,
    wrong_type,
)
from reprobox.records.layout import GUEST_RESULT, GUEST_STATE
from reprobox.records.trail import StoppedEarly

GUEST_SCHEMA_PREFIX = "reprobox.guest/"
GUEST_SCHEMA = GUEST_SCHEMA_PREFIX + "1"
GUEST_RESULT_LIMIT = 64 * saferead.MIB
RECORD = f"{GUEST_STATE}/{GUEST_RESULT}"

# field -> the JSON types it may have (absent or null is fine for every field)
_FIELDS: dict[str, tuple[type, ...]] = {
    "schema": TEXT,
    "exit_code": WHOLE,
    "signal": WHOLE,
    "command": ARRAY,
    "environment": OBJECT,
    "fingerprint": OBJECT,
    "checkpoints": ARRAY,
    "stopped_early": OBJECT,
    "hash_error": TEXT,
    "error": TEXT,
    "started_at": TEXT,
    "ended_at": TEXT,
    "stray_processes_stopped": WHOLE,
    "disk_full": OBJECT,
    "run_facts": OBJECT,
}


@dataclass(frozen=True)
class GuestRecord:
    """What the guest saw: the command as run, how it ended, the checkpoints' hashes, the stack.

    None for a field means the guest did not record it (`command`: the controller's own stands).
    """

    command: list[str] | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    error: str | None = None  # the command could not be started
    stray_processes_stopped: int | None = None
    stopped_early: StoppedEarly | None = None
    environment: dict[str, str] = field(default_factory=dict)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: dict[str, Any] | None = None
    hash_error: str | None = None
    disk_full: dict[str, Any] | None = None  # the guest's record met a full disk: {free, quota}
    # what makes the run itself: {clock: {start, end, utc_offsets, shift_s}, hostnames, pids, run_id,
    # folders}; the evidence that excuses a run-specific value (reprobox.runspecific)
    run_facts: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The file's fields; those never recorded are left out, as the guest always wrote them."""
        data: dict[str, Any] = {"schema": GUEST_SCHEMA}
        for name in ("command", "started_at", "ended_at", "exit_code", "signal", "error"):
            if name in ("exit_code", "signal") or getattr(self, name) is not None:
                data[name] = getattr(self, name)
        optional = {
            "stray_processes_stopped": self.stray_processes_stopped,
            "stopped_early": self.stopped_early.to_json() if self.stopped_early else None,
            "fingerprint": self.fingerprint,
            "hash_error": self.hash_error,
            "disk_full": self.disk_full,
            "run_facts": self.run_facts,
        }
        data.update({name: value for name, value in optional.items() if value is not None})
        data["environment"] = self.environment
        data["checkpoints"] = self.checkpoints
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GuestRecord:
        """The record from a checked file (see `check_guest_record`)."""
        return cls(
            command=list(data["command"]) if data.get("command") is not None else None,
            exit_code=data.get("exit_code"),
            signal=data.get("signal"),
            started_at=data.get("started_at"),
            ended_at=data.get("ended_at"),
            error=data.get("error"),
            stray_processes_stopped=data.get("stray_processes_stopped"),
            stopped_early=StoppedEarly.from_json(data.get("stopped_early")),
            environment=dict(data.get("environment") or {}),
            checkpoints=list(data.get("checkpoints") or []),
            fingerprint=data.get("fingerprint"),
            hash_error=data.get("hash_error"),
            disk_full=data.get("disk_full"),
            run_facts=data.get("run_facts"),
        )


@dataclass(frozen=True)
class GuestResult:
    """The guest's record, or None with `problem` saying why it cannot be used (None: it is missing)."""

    record: GuestRecord | None
    problem: str | None = None


def guest_record_path(run_dir: Path) -> Path:
    return run_dir / GUEST_STATE / GUEST_RESULT


def guest_reserve_path(run_dir: Path) -> Path:
    """The bytes the controller sets aside for guest.json, in case the job fills the disk."""
    return run_dir / GUEST_STATE / space.RESERVE_NAME


def write_guest_record(
    run_dir: Path, record: GuestRecord | dict[str, Any], *, mode: int | None = None
) -> None:
    """Write guest.json atomically (a dict: a record already in its JSON form, e.g. redacted).

    The guest creates it as any new file (0o666 less the umask): the controller may be another user.
    On a full disk the reserve is given back and the record written again, saying the disk was full
    (the free bytes as met); the error is raised when there is no reserve or it did not suffice.
    """
    data = record.to_json() if isinstance(record, GuestRecord) else record
    path = guest_record_path(run_dir)
    try:
        write_json_atomic(path, data, indent=1, mode=mode)
    except OSError as exc:
        if not space.is_full(exc):
            raise
        fact = space.DiskFullFact.met(exc, run_dir)
        if not space.release_reserve(guest_reserve_path(run_dir)):
            raise
        write_json_atomic(path, {**data, "disk_full": fact.to_json()}, indent=1, mode=mode)


def read_guest_result(run_dir: Path) -> GuestResult:
    try:
        data = saferead.read_json(
            guest_record_path(run_dir), GUEST_RESULT_LIMIT, root=run_dir, check=check_guest_record
        )
    except FileNotFoundError:
        return GuestResult(None)
    except saferead.UnsafeFile as exc:
        return GuestResult(None, describe(exc, RECORD))
    return GuestResult(GuestRecord.from_json(data))


def describe(error: saferead.UnsafeFile, record: str) -> str:
    """The manifest's failure sentence for a record of reprobox's that the job tampered with."""
    if error.found is not None and "lies below" not in error.problem:
        return f"the job replaced reprobox's record {record} with {error.found}; the run cannot be trusted"
    return f"reprobox's record {record} {error.problem}; the run cannot be trusted"


def check_guest_record(data: Any) -> str | None:
    """What is wrong with the shape of a guest record, or None."""
    if not isinstance(data, dict):
        return f"holds {type(data).__name__}, not a JSON object"
    problem = wrong_type(data, _FIELDS)
    if problem is not None:
        return problem
    schema, stopped = data.get("schema"), data.get("stopped_early")
    if schema is not None and schema != GUEST_SCHEMA:
        return "has schema " + unknown_version(
            schema,
            GUEST_SCHEMA,
            GUEST_SCHEMA_PREFIX,
            "install the same reprobox version where the job runs as where you run reprobox",
            "it was not written by reprobox's guest",
        )
    checks = (
        (data.get("command") is None or all_text(data["command"]), "a command that is not a list of strings"),
        (
            all(isinstance(value, str) for value in (data.get("environment") or {}).values()),
            "an environment whose values are not all strings",
        ),
        (
            all(isinstance(entry, dict) for entry in data.get("checkpoints") or []),
            "checkpoints that are not JSON objects",
        ),
        (
            stopped is None or StoppedEarly.from_json(stopped) is not None,
            "a stopped_early that is not a reason and an optimizer step",
        ),
        (_run_facts_fine(data.get("run_facts")), "run_facts whose pids are not whole numbers"),
    )
    return next((f"has {what}" for fine, what in checks if not fine), None)


def _run_facts_fine(facts: Any) -> bool:
    if facts is None:
        return True
    pids = facts.get("pids")
    return pids is None or (isinstance(pids, list) and all(type(p) is int for p in pids))
