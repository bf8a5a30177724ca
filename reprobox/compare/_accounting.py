"""Whether two files whose bytes differ differ only in their formats' framing ("container bytes").

Hashing records, per file, the bytes no reader accounted for: neither parsed as content (tensors,
values) nor known to be the format's own framing (``unaccounted``: ranges and one digest over their
bytes; see ``reprobox.guest.hashing._layout``). Two files whose tensors and values are equal differ
only in container bytes when both records account for their bytes and their unaccounted bytes are the
same bytes (none at all, for files wholly accounted for). Byte positions are not compared: two zips of
equal members may place them differently, so "every differing byte lies in framing" is judged as
"every byte is framing, equal content, or the same unaccounted bytes".

Otherwise the difference is never excused: unaccounted bytes that differ (a second payload, an archive
before the one read, trailing data) are a real difference, named with their ranges; a file whose reader
did not say which bytes it read (or whose record predates the accounting) leaves the comparison without
a verdict, as a file of unknown format does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UNREAD_BYTES = "bytes no reader read"
"""The name the difference is listed under (``value_differences``)."""

_SHOWN_RANGES = 3


@dataclass(frozen=True)
class ByteFinding:
    """What the differing bytes of two files are, when not only framing: ``unread`` (real, listed as a
    value difference) or ``unknown`` (no verdict), with the words that say so."""

    kind: str  # "unread" or "unknown"
    a: str
    b: str
    why: str


def byte_finding(ca: Mapping[str, Any], cb: Mapping[str, Any]) -> ByteFinding | None:
    """None when the two records' differing bytes are accounted for as framing; else what they are."""
    ua, ub = ca.get("unaccounted"), cb.get("unaccounted")
    if not isinstance(ua, Mapping) or not isinstance(ub, Mapping):
        record = ca if not isinstance(ua, Mapping) else cb
        reader = record.get("reader") or record.get("format")
        why = (
            "its record was written before reprobox accounted for every byte: hash the runs again"
            if "unaccounted" not in record
            else f"its reader ({reader}) does not say which bytes it read"
        )
        return ByteFinding("unknown", "", "", why)
    if (ua.get("bytes"), ua.get("sha256")) == (ub.get("bytes"), ub.get("sha256")):
        return None
    return ByteFinding(
        "unread",
        _shown(ua),
        _shown(ub),
        "no reader read these bytes and they are not the format's framing (another payload written into "
        "the file, an archive before the one read, data between members or after the end): they differ",
    )


def unread_and_read(
    differences: Sequence[Mapping[str, Any]], value_differences: Sequence[Mapping[str, Any]]
) -> tuple[bool, bool]:
    """Whether what differs includes bytes nobody read and every tensor-level difference is such (an
    unreadable file), and whether any value that was read differs: the cause of bytes nobody read is
    not known (a stamp, or a result), and the explanation must not call it a nondeterminism."""
    read = [v for v in value_differences if v.get("name") != UNREAD_BYTES]
    unread = bool(differences) or len(read) < len(value_differences)
    return unread and all(d.get("unreadable") for d in differences), bool(read)


def _shown(unaccounted: Mapping[str, Any]) -> str:
    """``1,577 bytes at 0-1577 (sha256 60abe74440a2)``, or ``none``."""
    size, count = int(unaccounted.get("bytes") or 0), int(unaccounted.get("count") or 0)
    if not count:
        return "none"
    ranges = [f"{start}-{end}" for start, end in list(unaccounted.get("ranges") or [])[:_SHOWN_RANGES]]
    more = f" and {count - len(ranges)} more" if count > len(ranges) else ""
    digest = str(unaccounted.get("sha256", ""))[:12]
    return f"{size:,} bytes at {', '.join(ranges)}{more} (sha256 {digest})"
