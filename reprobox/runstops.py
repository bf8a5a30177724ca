"""Stop requests for runs side by side: one event per run, so that once a rerun is seen to diverge the
other runs stop at once, while the rerun that diverged ends on its own and records where.

A rerun checked against the reference stops itself at the first step that differs, writing why
(stop.json in its guest state folder) before its process exits. Exiting and recording take it seconds
(a process that imported torch is slow to tear down); meanwhile the other runs need not train on, and
the sooner they are stopped the sooner the verdict is known.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from reprobox.guest.settings import GUEST_STATE
from reprobox.records.trail import STOP_DIVERGED, STOP_FILE, STOP_FILE_LIMIT, StoppedEarly

POLL_SECONDS = 0.1


class RunStops:
    """The stop event of each run (by index), and whether the verdict is known (no further run starts)."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.events: dict[int, threading.Event] = {}
        self.watched: dict[int, Path] = {}
        self.decided_by: int | None = None  # the rerun that diverged: it ends on its own

    def event(self, index: int) -> threading.Event:
        """Run `index`'s stop event, already set when the verdict is known."""
        with self.lock:
            event = self.events.setdefault(index, threading.Event())
            if self.closed.is_set() and index != self.decided_by:
                event.set()
            return event

    def stop(self) -> None:
        """The verdict is known: every run stops but the rerun whose divergence decided it."""
        with self.lock:
            self.closed.set()
            for index, event in self.events.items():
                if index != self.decided_by:
                    event.set()

    def interrupt(self) -> None:
        """The user interrupted: every run stops."""
        with self.lock:
            self.closed.set()
            self.decided_by = None
            for event in self.events.values():
                event.set()

    def watch(self, index: int, run_dir: Path) -> None:
        """Look out for this rerun's stop file (`watching_divergence`)."""
        with self.lock:
            self.watched[index] = run_dir

    @contextlib.contextmanager
    def watching_divergence(self) -> Iterator[None]:
        """While the block runs, poll the watched reruns' stop files: the first that says the rerun
        diverged decides the verdict, and every other run is stopped then."""
        done = threading.Event()
        thread = threading.Thread(target=self._poll, args=(done,), name="divergence watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _poll(self, done: threading.Event) -> None:
        while not done.wait(POLL_SECONDS) and not self.closed.is_set():
            with self.lock:
                watched = list(self.watched.items())
            for index, run_dir in watched:
                if diverged(run_dir):
                    with self.lock:
                        self.decided_by = index
                    self.stop()
                    return


def diverged(run_dir: Path) -> bool:
    """Whether the run's step hook stopped it for diverging (its stop file, which the job's processes
    write and so is read as untrusted: anything but a well-formed stop file is no divergence)."""
    from reprobox import saferead

    path = run_dir / GUEST_STATE / STOP_FILE
    try:
        data = saferead.read_json(path, STOP_FILE_LIMIT, root=run_dir)
    except (OSError, saferead.UnsafeFile):
        return False
    stopped = StoppedEarly.from_json(data)
    return stopped is not None and stopped.reason == STOP_DIVERGED
