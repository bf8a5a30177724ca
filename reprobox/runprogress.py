"""A run's progress while it runs, told to the current progress reporter: it started, its trail reached
optimizer step N, it ended (and how).

The step comes from the run's own trail (trail.jsonl in its run directory, appended to by the job as it
trains), polled from a thread by reading only its end (`records.trail.last_step`): no runtime has to
report steps, and a run without a trail simply shows none. Nothing is polled when nobody listens.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from reprobox import progress
from reprobox.guest.settings import TRAIL_FILE
from reprobox.records.trail import last_step
from reprobox.saferead import UnsafeFile

POLL_SECONDS = 0.5
STATUS_UNRECORDED = "stopped"  # the run ended before reprobox could record it (an error on the way)


class Watched:
    """What `watching` hands its block: the status to report when the run ends."""

    def __init__(self) -> None:
        self.status = STATUS_UNRECORDED


@contextlib.contextmanager
def watching(run: progress.RunSeen) -> Iterator[Watched]:
    """Report the run as started, its trail's steps while the block runs, and its end with the status
    the block set; the poller stops before the end is reported."""
    reporter = progress.current()
    reporter.run_started(run)
    watched = Watched()
    poller = _TrailPoller(reporter, run) if progress.listening() else None
    try:
        if poller is not None:
            poller.start()
        yield watched
    finally:
        if poller is not None:
            poller.stop()
        reporter.run_ended(run, watched.status)


class _TrailPoller:
    """Reads the end of a run's trail every POLL_SECONDS and reports each new last step."""

    def __init__(self, reporter: progress.Reporter, run: progress.RunSeen) -> None:
        self.reporter = reporter
        self.run = run
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, name=f"trail {run.run_dir.name}", daemon=True)
        self.step: int | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _poll(self) -> None:
        while not self.done.wait(POLL_SECONDS) and self.check():
            pass

    def check(self) -> bool:
        """Report the trail's last step if it moved; False once the trail cannot be watched (not a
        regular file: the job planted something there, and it is the records' reader that says so)."""
        try:
            step = last_step(self.run.run_dir / TRAIL_FILE, root=self.run.run_dir)
        except FileNotFoundError:
            return True
        except (UnsafeFile, OSError):
            return False
        if step is not None and step != self.step:
            self.step = step
            self.reporter.run_step(self.run, step)
        return True
