"""`DockerRuntime`: start the container, stream its output, stop it on time, record it, remove it."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reprobox import signals
from reprobox.engine import Engine, ImageInfo, connect
from reprobox.errors import EnvironmentProblem
from reprobox.guest import settings
from reprobox.guest.variation import find_libfaketime
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.base import OutputSink, RunOutcome, RunPlan, Runtime, RuntimeOptions
from reprobox.runtimes.docker._image import ensure_image, image_facts, image_fingerprint
from reprobox.runtimes.docker._settings import (
    apply_exit_status,
    container_paths,
    container_settings,
    effective_settings,
    lend_libfaketime,
)
from reprobox.timestamps import utc_now

STOP_GRACE_SECONDS = 5.0


def create(options: RuntimeOptions) -> Runtime:
    """Connect (or reuse `options.engine`), then the image: `options.image` as is (pulled when absent),
    else the job's image (the reprobox image without a job), built now or reused when unchanged."""
    engine = options.engine or connect()
    if options.image is not None:
        image = ensure_image(ImageSpec(reference=options.image), engine=engine)
    else:
        image = ensure_image(
            options.job.image if options.job is not None else ImageSpec(),
            engine=engine,
            base_image=options.base_image,
            wheelhouse=options.wheelhouse,
            lock=options.lock,
        )
    grace = STOP_GRACE_SECONDS if options.stop_grace is None else options.stop_grace
    return DockerRuntime(image, engine=engine, stop_grace=grace, hostname=options.hostname)


class DockerRuntime:
    """Runs each plan in a new hardened container of one image and removes the container afterwards."""

    name = "docker"
    # file_order is applied by the guest's startup hook (Python-level listings); clock_offset by the
    # host's libfaketime, mounted into the container (refused where the host has none).
    variations = frozenset(
        {"hostname", "umask", "home", "path_root", "uid", "user_name", "file_order", "clock_offset"}
    )

    def __init__(
        self,
        image: ImageInfo,
        *,
        engine: Engine | None = None,
        entrypoint: Sequence[str] | None = None,
        host_uid: int | None = None,
        host_gid: int | None = None,
        stop_grace: float = STOP_GRACE_SECONDS,
        hostname: str | None = None,
    ) -> None:
        self.image = image
        self.engine = engine or connect()
        self.entrypoint = tuple(entrypoint) if entrypoint is not None else None
        self.host_uid = os.getuid() if host_uid is None else host_uid
        self.host_gid = os.getgid() if host_gid is None else host_gid
        self.stop_grace = stop_grace
        self.hostname = hostname  # None: the fixed hostname of container_settings
        self._engine_version: str | None = None

    def describe(self) -> dict[str, Any]:
        if self._engine_version is None:
            self._engine_version = self.engine.engine_version()
        return {
            "name": self.name,
            "image": image_facts(self.image),
            "engine": {"version": self._engine_version},
        }

    def fingerprint(self) -> dict[str, Any]:
        return image_fingerprint(self.engine, self.image)

    def job_ids(self) -> tuple[int, int]:
        """The uid and gid the container settings start from (the caller's)."""
        return self.host_uid, self.host_gid

    def settings(self, plan: RunPlan) -> dict[str, Any]:
        """The container's create arguments: hardened, with the plan's variation applied."""
        uid, gid = self.job_ids()
        created = container_settings(plan, self.image, host_uid=uid, host_gid=gid, entrypoint=self.entrypoint)
        if self.hostname is not None and plan.variation.hostname is None:
            created["hostname"] = self.hostname
        if plan.variation.clock_offset is not None:
            lend_libfaketime(created, _host_libfaketime())
        return created

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        self._check_variation(plan)
        created = self.settings(plan)
        outcome = RunOutcome(started_at=utc_now(), runtime=self.describe())
        outcome.runtime["paths"] = container_paths(plan)
        plan.variation.record(outcome.runtime)
        ownership = self.loan(plan)
        leftover = _Leftover()  # what to remove at the end, whatever happens
        try:
            if ownership is not None:
                ownership.lend(created["user"])
            self._run_container(plan, created, sink, stop, outcome=outcome, leftover=leftover)
        finally:
            try:
                signalled = self._give_back(leftover.container, ownership)
            except KeyboardInterrupt:  # a signal taken as the clean-up began: it is done all the same
                signalled = True
                self._give_back(leftover.container, ownership)
            outcome.interrupted = outcome.interrupted or signalled
        return outcome

    def loan(self, plan: RunPlan) -> RunDirLoan | None:
        """What lends the run dir to the container's user for the run: under a root controller, a chown
        (the job never runs as root); otherwise nothing, the container runs as the caller."""
        return _RunDirOwnership.of(plan.run_dir) if self.host_uid == 0 else None

    def _run_container(
        self,
        plan: RunPlan,
        created: dict[str, Any],
        sink: OutputSink,
        stop: threading.Event | None,
        *,
        outcome: RunOutcome,
        leftover: _Leftover,
    ) -> None:
        """Create, start and follow the container to its end, filling in `outcome`; `leftover` names
        the container from before the engine answers, for the caller to remove."""
        container_id: str | None = None
        status: int | None = None
        watchdog: _Watchdog | None = None
        try:
            try:
                with signals.held():  # a signal waits for the id, so the container is removed
                    container_id = leftover.container = self.engine.create_container(created)
            except KeyboardInterrupt:  # a second Ctrl-C cut the create short: remove it by name
                leftover.container = leftover.container or str(created["name"])
                raise
            watchdog = _Watchdog(self.engine, container_id, plan.timeout, stop, self.stop_grace)
            self.engine.start(container_id)
            output = self.engine.stream_logs(container_id)
            try:
                for chunk in output:
                    sink.write(chunk)
            finally:
                output.close()
            status = self.engine.wait(container_id)
        except KeyboardInterrupt:
            outcome.interrupted = True
            if container_id is not None:
                _quietly(lambda: self.engine.stop(container_id, self.stop_grace))
        finally:
            if watchdog is not None:
                watchdog.finish()
        outcome.ended_at = utc_now()
        if container_id is not None:
            facts = self.engine.inspect_container(container_id)
            outcome.runtime["container"] = effective_settings(facts)
            outcome.oom_killed = bool((facts.get("State") or {}).get("OOMKilled"))
        if watchdog is not None:
            outcome.timed_out, outcome.cancelled = watchdog.timed_out, watchdog.cancelled
        apply_exit_status(outcome, status)

    def _check_variation(self, plan: RunPlan) -> None:
        """Refuse, before the run, a variation this runtime cannot apply (never run it unvaried)."""
        plan.variation.check_supported(self.name, self.variations)
        if plan.variation.clock_offset is not None:
            _host_libfaketime()
        if plan.variation.uid is not None and self.host_uid != 0:
            raise EnvironmentProblem(
                "varying the user needs reprobox run as root, to lend the run folder to that user"
            )

    def _give_back(self, container: str | None, ownership: RunDirLoan | None) -> bool:
        """Remove the container and give the run dir back whatever happened, also through signals (an
        impatient Ctrl-C); whether one came meanwhile, which ends the run as interrupted."""
        signalled = False
        for _attempt in range(3):
            try:
                if container is not None:
                    self.engine.remove_container(container)
                if ownership is not None:
                    ownership.restore()
                break
            except KeyboardInterrupt:
                signalled = True
        return signalled


class RunDirLoan(Protocol):
    """The run dir lent to the container's user for the run, then given back to the caller."""

    def lend(self, user: str) -> None: ...

    def restore(self) -> None:
        """Give it back; nothing when it was never lent."""
        ...


@dataclass
class _Leftover:
    container: str | None = None  # the container's id, or its name while the engine creates it


class _Watchdog:
    """Stops the container at the deadline or when `stop` is set, from a thread of its own."""

    def __init__(
        self,
        engine: Engine,
        container_id: str,
        timeout: float | None,
        stop: threading.Event | None,
        grace: float,
    ) -> None:
        self.engine, self.container_id, self.grace = engine, container_id, grace
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.stop_requested = stop
        self.timed_out = self.cancelled = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="reprobox-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            if self.stop_requested is not None and self.stop_requested.is_set():
                self.cancelled = True
            elif self.deadline is not None and time.monotonic() >= self.deadline:
                self.timed_out = True
            else:
                continue
            _quietly(lambda: self.engine.stop(self.container_id, self.grace))
            return

    def finish(self) -> None:
        self.done.set()
        self.thread.join(timeout=self.grace + 30)


class _RunDirOwnership:
    """Lends the run dir to the container's user while a root controller runs the job, then gives it back.

    Symlinks are never followed: a job cannot make us chown files outside its run directory.
    """

    def __init__(self, run_dir: Path, uid: int, gid: int) -> None:
        self.run_dir, self.uid, self.gid = run_dir, uid, gid
        self.lent = False

    @classmethod
    def of(cls, run_dir: Path) -> _RunDirOwnership:
        """The run dir's owner now, to give it back to (made before anything is lent, so that a
        signal between any two calls finds what to restore)."""
        stat = run_dir.lstat()
        return cls(run_dir, stat.st_uid, stat.st_gid)

    def lend(self, user: str) -> None:
        uid, _, gid = user.partition(":")
        if uid.isdigit() and gid.isdigit():
            self.lent = True
            _chown_tree(self.run_dir, int(uid), int(gid))

    def restore(self) -> None:
        if self.lent:
            _chown_tree(self.run_dir, self.uid, self.gid)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for current, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.chown(Path(current) / name, uid, gid, follow_symlinks=False)


def _host_libfaketime() -> Path:
    """The host's libfaketime, lent to the container; refused (never run unvaried) where it has none."""
    library = find_libfaketime()
    if library is None:
        raise EnvironmentProblem(
            "varying the clock on the docker runtime needs libfaketime on this machine: `apt-get install "
            f"faketime`, or set {settings.LIBFAKETIME} to its libfaketime.so.1"
        )
    return library


def _quietly(action: Callable[[], None]) -> None:
    """Best effort during cleanup: the container is force-removed afterwards in any case."""
    with contextlib.suppress(EnvironmentProblem, KeyboardInterrupt):
        action()
