"""A reference run's trail, read as it grows: the trail's step hook compares each of its records with it
and stops the run at the first step whose digests differ, waiting for the reference when it is behind."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from reprobox.guest import settings
from reprobox.records.trail import StepRecord, TrailVersionError, decode_line

REFERENCE_WAIT_SECONDS = 600.0
REFERENCE_CHUNK_CHARS = 1 << 20  # read a growing reference trail a bounded piece at a time
REFERENCE_LINE_LIMIT = 64 << 20


class ReferenceTrail:
    """A reference run's trail, read as it grows, to compare each of our records with."""

    def __init__(self, run_dir: Path, location: str | None) -> None:
        self.path = None if not location else Path(location)
        self.records: dict[int, StepRecord] = {}
        self.offset = 0
        self.buffer = ""
        self.finished = False

    def differs(self, record: StepRecord) -> list[str]:
        """Names of parameters whose digest differs from the reference at the same step ([] if equal)."""
        if self.path is None:
            return []
        reference = self.wait_for(record.step)
        if reference is None:
            return []
        ours, theirs = record.digests(), reference.digests()
        return sorted(n for n in set(ours) | set(theirs) if ours.get(n) != theirs.get(n))

    def wait_for(self, step: int) -> StepRecord | None:
        deadline = time.monotonic() + REFERENCE_WAIT_SECONDS
        while step not in self.records and not self.finished and time.monotonic() < deadline:
            if not self.read_more():
                time.sleep(0.01)
        return self.records.get(step)

    def read_more(self) -> bool:
        from reprobox import saferead  # only runs checked against a reference pay for it

        assert self.path is not None
        try:
            fd = saferead.open_regular(self.path)
        except FileNotFoundError:
            return False
        except saferead.UnsafeFile:
            self.finished = True  # a link or FIFO planted in the reference run is no reference
            return False
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            chunk = handle.read(REFERENCE_CHUNK_CHARS)
            self.offset = handle.tell()
        if not chunk:
            self.finished = (self.path.parent / settings.GUEST_STATE / settings.GUEST_RESULT).exists() or (
                self.path.with_name(settings.GUEST_RESULT).exists()
            )
            return False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        if len(self.buffer) > REFERENCE_LINE_LIMIT:  # no trail line is this long: not a trail
            self.finished = True
        for line in lines:
            with contextlib.suppress(TrailVersionError):  # only the steps are compared
                item = decode_line(line) if line.strip() else None
                if isinstance(item, StepRecord):
                    self.records[item.step] = item
        return True
