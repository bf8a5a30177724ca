"""Room for a run's records on a disk the job may fill, and a run failed in one sentence when it is full.

Before the job starts, bytes are set aside in the run dir: one reserve for guest.json (in the guest's own
folder, which the guest may write in any runtime) and one for manifest.json. A record that meets a full
disk gives its reserve back and is written again, so a job that fills the disk to the last byte still
leaves a run recorded as failed with `DiskFullFact.sentence`, and the command ends with `DiskFull`: exit
4, an environment problem, since the same job reruns once there is space. Both reserves are given back
when the run ends, so a finished run dir holds neither.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprobox import diskspace as space
from reprobox.diskspace import DiskFullFact
from reprobox.errors import DiskFull
from reprobox.guest import settings
from reprobox.records.guest import GuestRecord, guest_reserve_path
from reprobox.records.manifest import STATUS_FAILED, STATUS_SUCCEEDED, RunRecord, write_record

DISK_FULL_FIELD = "disk_full"  # the manifest's {free, quota} of a run failed for a full disk


class RunSpace:
    """One run's reserves, and the full disk it met (the first one met, with the bytes then free)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.fact: DiskFullFact | None = None

    def met(self, fact: DiskFullFact | None) -> None:
        if self.fact is None and fact is not None:
            self.fact = fact.at(self.run_dir)

    def met_by_guest(self, guest: GuestRecord | None) -> None:
        """What the guest's record says: its write met a full disk (where the guest saw the run dir)."""
        if guest is not None and guest.disk_full is not None:
            self.met(DiskFullFact.from_json(guest.disk_full, self.run_dir))

    def write(self, data: dict[str, Any]) -> RunRecord:
        """Write the manifest; once a full disk was met (before, or by this write, which then gives the
        reserve back and writes again) the run is failed for it. DiskFull when even that cannot be."""
        try:
            return write_record(self.run_dir, failed_for(data, self.fact))
        except DiskFull as exc:
            self.met(exc.fact)
            self.release()
            return write_record(self.run_dir, failed_for(data, self.fact))

    def release(self) -> None:
        space.release_reserve(guest_reserve_path(self.run_dir))
        space.release_reserve(self.run_dir / space.RESERVE_NAME)

    def check(self) -> None:
        """Raise DiskFull for the recorded run that met a full disk."""
        if self.fact is not None:
            raise DiskFull(self.fact, run_dir=self.run_dir)


def reserve(run_dir: Path) -> None:
    """Set both reserves aside before the job starts. DiskFull (and nothing set aside) when the disk lacks
    even that room: no job starts that could not be recorded. Other failures (a file system that refuses
    the file) leave the run without them."""
    try:
        (run_dir / settings.GUEST_STATE).mkdir(exist_ok=True)
        space.make_reserve(guest_reserve_path(run_dir), space.GUEST_RESERVE_BYTES)
        space.make_reserve(run_dir / space.RESERVE_NAME, space.RUN_RESERVE_BYTES)
    except OSError as exc:
        RunSpace(run_dir).release()
        if space.is_full(exc):  # named by the job's runs folder: the caller removes the run dir
            needed = space.GUEST_RESERVE_BYTES + space.RUN_RESERVE_BYTES
            free = space.free_bytes(run_dir)
            quota = exc.errno == errno.EDQUOT
            raise DiskFull(DiskFullFact(run_dir.parent, free, quota=quota, needed=needed)) from None


@contextlib.contextmanager
def releasing(run_dir: Path) -> Iterator[RunSpace]:
    """The run's space while it runs and is recorded; what is left of its reserves is given back when it
    ends, however it ends."""
    room = RunSpace(run_dir)
    try:
        yield room
    finally:
        room.release()
        with contextlib.suppress(OSError):  # left as it was when the guest never wrote into it
            (run_dir / settings.GUEST_STATE).rmdir()


def failed_for(data: dict[str, Any], fact: DiskFullFact | None) -> dict[str, Any]:
    """The manifest of a run that met a full disk: failed for it in one sentence (what else went wrong,
    a log cut short, a missing guest record, a job that could not write, follows from it)."""
    if fact is None:
        return data
    status = data.get("status")
    return {
        **data,
        "status": STATUS_FAILED if status in (None, STATUS_SUCCEEDED) else status,
        "failure": fact.sentence(),
        DISK_FULL_FIELD: fact.to_json(),
    }
