"""One timestamp format for every record: UTC ISO 8601 to the millisecond, so records sort as text."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def utc_stamp(seconds: float) -> str:
    """A Unix time in the records' format."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def parse_utc(stamp: object) -> float | None:
    """A record's timestamp as Unix seconds; None when absent or not ISO 8601 (a record edited by hand).

    Stamps without a zone are records' own, written in UTC."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
