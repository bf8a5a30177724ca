"""A run's folder from its making to its manifest: the one owner of a run's life on disk.

It makes runs/<job>/<run id>/ (with outputs/ and the controller's claim), sets room aside for the
records on a disk the job may fill, takes the job's output into stdout.log, reads the guest's record
(secrets taken out, a full disk it met noted), writes the manifest, points `latest` at the run, and
gives its room back however the run ends. The runner asks it; no other module passes these facts on.

Room: before the job starts, bytes are set aside in the run dir, one reserve for guest.json (in the
guest's own folder, which the guest may write in any runtime) and one for manifest.json. A record that
meets a full disk gives its reserve back and is written again, so a job that fills the disk to the last
byte still leaves a run recorded as failed with `DiskFullFact.sentence`, and the command ends with
`DiskFull`: exit 4, an environment problem, since the same job reruns once there is space.
"""

from __future__ import annotations

import contextlib
import errno
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from reprobox import controller, signals
from reprobox import diskspace as space
from reprobox.diskspace import DiskFullFact, is_full
from reprobox.errors import DiskFull
from reprobox.fileio import PRIVATE, replace_symlink
from reprobox.guest import settings
from reprobox.jobfile import redact_values
from reprobox.records.guest import (
    GuestResult,
    guest_reserve_path,
    read_guest_result,
    write_guest_record,
)
from reprobox.records.manifest import (
    STATUS_FAILED,
    STATUS_SUCCEEDED,
    STDOUT_LOG,
    RunRecord,
    move_aside_planted,
    write_record,
)
from reprobox.runtimes.base import OUTPUTS_SUBDIR

# The folders made in the innermost `unbegun_removed` block whose run has not begun (shared with the
# threads that block's code starts with a copy of its context, as a parallel verify does).
_UNBEGUN: ContextVar[set[Path] | None] = ContextVar("reprobox_unbegun_runs", default=None)

DISK_FULL_FIELD = "disk_full"  # the manifest's {free, quota} of a run failed for a full disk
LATEST = "latest"  # runs/<job>/latest: the job's last run, for scripts and `compare .../latest`


class JobLog:
    """Writes the job's output to stdout.log and, live, to the terminal.

    It never raises: a log that cannot be written (a full disk) is given up and `lost` says why, and
    the output keeps flowing, so that the runtime keeps draining the job's pipe and the job never blocks.
    """

    def __init__(self, log: IO[bytes], echo: Callable[[bytes], None] | None) -> None:
        self.log = log
        self.echo = echo
        self.lost: str | None = None
        self.full: DiskFullFact | None = None  # the log met a full disk

    def write(self, chunk: bytes) -> None:
        if self.lost is None:
            try:
                self.log.write(chunk)
                self.log.flush()
            except OSError as exc:
                self.lost = exc.strerror or str(exc)
                if is_full(exc):
                    self.full = DiskFullFact.met(exc, Path(str(getattr(self.log, "name", "."))).parent)
                with contextlib.suppress(OSError):  # closed now: what it buffers could not be written at exit
                    self.log.close()
        if self.echo is not None:
            try:
                self.echo(chunk)
            except OSError:  # the terminal went away (a closed pipe): the log still has the output
                self.echo = None


def new_run_id() -> str:
    """Sortable by start time, unique across concurrent runs."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}Z-{secrets.token_hex(3)}"


class RunFolder:
    """One run's folder, the room kept in it for its records, and the full disk it met (the first one
    met, with the bytes then free)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run_id = path.name
        self.full: DiskFullFact | None = None
        self.log_lost: str | None = None  # why stdout.log is incomplete

    @classmethod
    def make(cls, runs_dir: Path, job_name: str) -> RunFolder:
        """runs/<job>/<new run id>/ with its outputs/ folder, claimed for this user, and its room set
        aside. DiskFull (and no folder left) when the disk lacks even that room: no job starts that
        could not be recorded."""
        parent = runs_dir / job_name
        parent.mkdir(parents=True, exist_ok=True)
        parent = parent.resolve()
        while True:
            path = parent / new_run_id()
            with signals.held():  # a signal waits until `unbegun_removed` knows the folder
                try:
                    path.mkdir()
                except FileExistsError:
                    continue
                folder = cls(path)
                unbegun = _UNBEGUN.get()
                if unbegun is not None:
                    unbegun.add(path)
            try:
                (path / OUTPUTS_SUBDIR).mkdir()
                controller.claim(path)  # whose run it is, for `reprobox clean`
                folder._reserve()
            except BaseException:  # a signal or a full disk here: no folder without a record is left
                folder.discard()
                raise
            return folder

    def discard(self) -> None:
        """Remove a run that never started, and the claim on it."""
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            controller.claim_path(self.path).unlink(missing_ok=True)

    def begin(self) -> None:
        """From here on the run is recorded however it ends: a signal no longer removes its folder."""
        unbegun = _UNBEGUN.get()
        if unbegun is not None:
            unbegun.discard(self.path)

    def _reserve(self) -> None:
        try:
            (self.path / settings.GUEST_STATE).mkdir(exist_ok=True)
            space.make_reserve(guest_reserve_path(self.path), space.GUEST_RESERVE_BYTES)
            space.make_reserve(self.path / space.RESERVE_NAME, space.RUN_RESERVE_BYTES)
        except OSError as exc:
            self._release()
            if space.is_full(exc):  # named by the job's runs folder: the run dir is removed
                needed = space.GUEST_RESERVE_BYTES + space.RUN_RESERVE_BYTES
                free = space.free_bytes(self.path)
                quota = exc.errno == errno.EDQUOT
                raise DiskFull(DiskFullFact(self.path.parent, free, quota=quota, needed=needed)) from None
            # other failures (a file system that refuses the file) leave the run without its reserves

    @contextlib.contextmanager
    def running(self) -> Iterator[RunFolder]:
        """The run while it runs and is recorded; its room is given back when it ends, however it ends."""
        try:
            yield self
        finally:
            try:
                self._give_room_back()
            except KeyboardInterrupt:  # a signal cut it short: give the rest back, then stop
                self._give_room_back()
                raise

    def _give_room_back(self) -> None:
        self._release()
        with contextlib.suppress(OSError):  # left as it was when the guest never wrote into it
            (self.path / settings.GUEST_STATE).rmdir()

    @contextlib.contextmanager
    def job_log(self, echo: Callable[[bytes], None] | None) -> Iterator[JobLog]:
        """stdout.log, written as the job's output comes; what it met is the folder's to record."""
        with (self.path / STDOUT_LOG).open("wb") as stream:
            log = JobLog(stream, echo)
            try:
                yield log
            finally:
                self.log_lost = log.lost
                self._met(log.full)

    def guest_record(self, hidden: tuple[str, ...]) -> GuestResult:
        """The guest's record, rewritten without the job's secret values (a published run dir holds
        none); a full disk it met is the run's."""
        result = read_guest_result(self.path)
        record = result.record
        if record is not None and record.disk_full is not None:
            self._met(DiskFullFact.from_json(record.disk_full, self.path))
        if record is not None and hidden:
            data = record.to_json()
            redacted = redact_values(data, hidden)
            if redacted != data:
                with contextlib.suppress(OSError):
                    write_guest_record(self.path, redacted, mode=PRIVATE)
        return result

    def problems(self, guest: GuestResult) -> list[str]:
        """Faults found around the run, each of which fails it: a guest record that could not be read, a
        record the job planted in reprobox's place, a log the disk cut short."""
        found = [p for p in (guest.problem, move_aside_planted(self.path)) if p]
        if self.log_lost is not None:
            found.append(f"{STDOUT_LOG} could not be written ({self.log_lost}) and is incomplete")
        return found

    def write_manifest(self, data: dict[str, Any]) -> RunRecord:
        """Write the manifest; once a full disk was met (before, or by this write, which then gives the
        room back and writes again) the run is failed for it. DiskFull when even that cannot be."""
        try:
            return write_record(self.path, failed_for(data, self.full))
        except DiskFull as exc:
            self._met(exc.fact)
            self._release()
            return write_record(self.path, failed_for(data, self.full))

    def point_latest(self) -> None:
        """Make runs/<job>/latest point at this run (atomically)."""
        replace_symlink(self.path.parent / LATEST, self.path.name)

    def check(self) -> None:
        """Raise DiskFull for the recorded run that met a full disk."""
        if self.full is not None:
            raise DiskFull(self.full, run_dir=self.path)

    def _met(self, fact: DiskFullFact | None) -> None:
        if self.full is None and fact is not None:
            self.full = fact.at(self.path)

    def _release(self) -> None:
        space.release_reserve(guest_reserve_path(self.path))
        space.release_reserve(self.path / space.RESERVE_NAME)


@contextlib.contextmanager
def unbegun_removed() -> Iterator[None]:
    """Remove the folders made in the block whose run never began, should a signal end the block.

    A signal's handler runs between any two calls: also after a folder is made and before the code
    that records its run could catch it (in `finish`, or while a parallel verify starts its pool). The
    block sees every folder made in it from the moment it exists, since `make` holds signals until then.
    """
    unbegun: set[Path] = set()
    token = _UNBEGUN.set(unbegun)
    try:
        yield
    except KeyboardInterrupt:
        for path in list(unbegun):
            RunFolder(path).discard()
        raise
    finally:
        _UNBEGUN.reset(token)


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
