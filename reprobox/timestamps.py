"""One timestamp format for every record: UTC ISO 8601 to the millisecond, so records sort as text."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
