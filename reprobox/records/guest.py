"""The guest's account of a run (`.reprobox/guest.json`), read as the untrusted file it is.

The job can write in its run directory, so the record may have been replaced by a FIFO, a link, a
directory, a huge file or JSON of the wrong shape. Reading it never hangs or follows a link, and every
field the manifest takes from it is checked for its type: a bad record makes the run fail with a
sentence saying what the job did, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.guest import settings

GUEST_RESULT_LIMIT = 64 * saferead.MIB
RECORD = f"{settings.GUEST_STATE}/{settings.GUEST_RESULT}"

# field -> the JSON types it may have (None: absent or null is fine for every field)
_FIELDS: dict[str, tuple[type, ...]] = {
    "exit_code": (int,),
    "signal": (int,),
    "command": (list,),
    "environment": (dict,),
    "fingerprint": (dict,),
    "checkpoints": (list,),
    "stopped_early": (dict,),
    "hash_error": (str,),
}


@dataclass(frozen=True)
class GuestResult:
    """The guest's record, or None with `problem` saying why it cannot be used (None: it is missing)."""

    data: dict[str, Any] | None
    problem: str | None = None


def read_guest_result(run_dir: Path) -> GuestResult:
    path = run_dir / settings.GUEST_STATE / settings.GUEST_RESULT
    try:
        data = saferead.read_json(path, GUEST_RESULT_LIMIT, root=run_dir, check=check_guest_result)
    except FileNotFoundError:
        return GuestResult(None)
    except saferead.UnsafeFile as exc:
        return GuestResult(None, describe(exc, RECORD))
    return GuestResult(data)


def describe(error: saferead.UnsafeFile, record: str) -> str:
    """The manifest's failure sentence for a record of reprobox's that the job tampered with."""
    if error.found is not None and "lies below" not in error.problem:
        return f"the job replaced reprobox's record {record} with {error.found}; the run cannot be trusted"
    return f"reprobox's record {record} {error.problem}; the run cannot be trusted"


def check_guest_result(data: Any) -> str | None:
    """What is wrong with the shape of a guest result, or None."""
    if not isinstance(data, dict):
        return f"holds {type(data).__name__}, not a JSON object"
    for name, types in _FIELDS.items():
        value = data.get(name)
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            return f"has {name} of type {type(value).__name__}, which reprobox never writes"
    if not all(isinstance(part, str) for part in data.get("command") or []):
        return "has a command that is not a list of strings"
    if not all(isinstance(entry, dict) for entry in data.get("checkpoints") or []):
        return "has checkpoints that are not JSON objects"
    return None
