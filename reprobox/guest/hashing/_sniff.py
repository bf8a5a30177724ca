"""A file's first bytes, read once while the table of readers decides which reader takes the file.

Each row's ``detect`` looks at the first bytes (a zip's ``PK``, a pickle's protocol, a tar's ``ustar``);
tried in order, they would open a file they do not recognise once each. Within ``session`` the first
``HEAD_BYTES`` and what the detectors derive from them are read once per file and kept until the
decision is made; outside one, each call reads the file itself.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

HEAD_BYTES = 512
"""Enough for every detector: a tar's magic sits at byte 257."""

T = TypeVar("T")

_SEEN: contextvars.ContextVar[dict[tuple[Path, str], object] | None] = contextvars.ContextVar(
    "reprobox_sniffed", default=None
)


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Keep what the detectors read while one file's reader is chosen."""
    token = _SEEN.set({})
    try:
        yield
    finally:
        _SEEN.reset(token)


def memo(path: Path, what: str, compute: Callable[[Path], T]) -> T:
    """``compute(path)``, once per file within a session."""
    seen = _SEEN.get()
    if seen is None:
        return compute(path)
    key = (path, what)
    if key not in seen:
        seen[key] = compute(path)
    return seen[key]  # type: ignore[return-value]


def suffix(path: Path) -> str:
    """The file's suffix in lower case (``.json``)."""
    return memo(path, "suffix", lambda p: p.suffix.lower())


def head(path: Path) -> bytes:
    """The file's first ``HEAD_BYTES`` (fewer when it is shorter)."""
    return memo(path, "head", _read_head)


def _read_head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(HEAD_BYTES)


def pickled_kind(path: Path) -> str | None:
    """``_pickle.pickled_kind``, once per file within a session (it may read a zip's directory)."""
    from reprobox.guest.hashing._pickle import pickled_kind as read_kind

    return memo(path, "pickled_kind", read_kind)
