"""A run's spot-checks (`spot-check.json` in its run directory, schema reprobox.spot-check/1): which of
its segments were replayed from its own checkpoints and how each came out, kept beside the run they
vouch for (each check replaces the last; reports show it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobox import saferead
from reprobox.fileio import write_json_atomic

SPOT_CHECK_FILE = "spot-check.json"
SPOT_CHECK_SCHEMA = "reprobox.spot-check/1"
SPOT_CHECK_LIMIT = 16 << 20


def write_spot_check(run_dir: Path, result: dict[str, Any], *, runtime: str, checked_at: str) -> Path:
    path = run_dir / SPOT_CHECK_FILE
    write_json_atomic(
        path, {"schema": SPOT_CHECK_SCHEMA, "runtime": runtime, "checked_at": checked_at, **result}
    )
    return path


def read_spot_check(run_dir: Path) -> dict[str, Any] | None:
    """The run's last spot-check, or None when it has none (or the file is not one)."""
    try:
        data = saferead.read_json(run_dir / SPOT_CHECK_FILE, SPOT_CHECK_LIMIT, root=run_dir, check=_problem)
    except (FileNotFoundError, saferead.UnsafeFile):
        return None
    return dict(data)


def _problem(data: Any) -> str | None:
    if not isinstance(data, dict) or data.get("schema") != SPOT_CHECK_SCHEMA:
        return f"is not a {SPOT_CHECK_SCHEMA} record"
    segments = data.get("segments")
    if not isinstance(segments, list) or not all(
        isinstance(s, dict) and isinstance(s.get("start"), int) and isinstance(s.get("match"), bool)
        for s in segments
    ):
        return "has no list of segments with start and match"
    if not isinstance(data.get("verdict"), str):
        return "has no verdict"
    return None
