"""The seam between "what to run" and "where it runs".

A runtime starts the guest entrypoint (`python -m reprobox.guest -- COMMAND...`) with the plan's
environment, streams its output, enforces the timeout, and reports how the process ended. Everything
else (hashing, fingerprint, trail) is done by the guest and read back from the run directory, so every
runtime yields the same RunRecord.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from reprobox.jobfile import JobSpec

# Where the guest sees things inside a container; the local runtime uses host paths instead.
CONTAINER_CODE_DIR = "/reprobox/code"
CONTAINER_RUN_DIR = "/reprobox/run"
OUTPUTS_SUBDIR = "outputs"


@dataclass(frozen=True)
class ImageChoice:
    """How a command may build the job's image (--base-image, --wheelhouse, --lock); None: the default.

    Made once from the command line by the CLI; the library reads this, never the parsed arguments.
    """

    base_image: str | None = None
    wheelhouse: Path | None = None
    lock: str | None = None


@dataclass(frozen=True)
class RuntimeOptions:
    """Everything a runtime may need to open (image flags, the job, a connected engine); None: the default.

    Made once from the command line by the CLI; each runtime module's `create(options)` reads this.
    """

    base_image: str | None = None
    wheelhouse: Path | None = None
    lock: str | None = None
    image: str | None = None  # an existing image to run as is, instead of the job's reprobox image
    job: JobSpec | None = None
    engine: Any = None  # an engine the caller already connected, else the runtime connects its own
    python: str | None = None


class OutputSink(Protocol):
    """Receives the job's combined stdout/stderr as it arrives (the runner tees it to stdout.log)."""

    def write(self, chunk: bytes) -> None: ...


@dataclass(frozen=True)
class RunPlan:
    """Everything a runtime needs to start one run; built by the runner, identical for every runtime."""

    job: JobSpec
    run_id: str
    run_dir: Path  # host path, exists, with an outputs/ subdirectory
    guest_env: dict[str, str]  # REPROBOX_* settings for the guest plus the job's own env (not output paths)
    command: tuple[str, ...]  # unexpanded; the guest expands ${VAR} against its final environment
    timeout: float | None
    reference_run: Path | None = None  # a run dir whose trail this run is checked against while it runs

    @property
    def output_dir(self) -> Path:
        return self.run_dir / OUTPUTS_SUBDIR


@dataclass
class RunOutcome:
    """How the guest process ended, as seen from outside it."""

    exit_code: int | None = None  # the guest's exit status; None when it never started or was killed
    signal: int | None = None  # the signal that killed the job, if any
    timed_out: bool = False
    interrupted: bool = False
    cancelled: bool = False  # stopped by reprobox itself (the verdict was already known)
    oom_killed: bool = False
    started_at: str = ""
    ended_at: str = ""
    runtime: dict[str, Any] = field(
        default_factory=dict
    )  # runtime-specific facts (image, container settings)

    @property
    def succeeded(self) -> bool:
        return (
            self.exit_code == 0
            and not self.timed_out
            and not self.interrupted
            and not self.cancelled
            and not self.oom_killed
            and self.signal is None
        )

    def failure_reason(self) -> str | None:  # noqa: PLR0911 - one return per way a run can end
        """One phrase saying why the run failed, or None when it succeeded."""
        if self.interrupted:
            return "interrupted (Ctrl-C, or a termination signal sent to reprobox)"
        if self.cancelled:
            return "stopped by reprobox once the verdict was known"
        if self.timed_out:
            return "timed out"
        if self.oom_killed:
            return "killed by the kernel for running out of memory (OOM)"
        if self.signal is not None:
            return f"killed by signal {signal_name(self.signal)}"
        if self.exit_code is None:
            return "did not start"
        if self.exit_code != 0:
            return f"exited with status {self.exit_code}"
        return None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class Runtime(Protocol):
    """One place to run the guest: `local` (a subprocess) or `docker` (a hardened container)."""

    name: str

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        """Run the plan to completion, timeout, Ctrl-C or `stop`; never leave a process or container behind.

        On KeyboardInterrupt the runtime stops the job, returns an outcome with `interrupted=True`
        (it does not re-raise); the runner records the run and then raises `Interrupted`. When `stop`
        is set (from another thread) the job is stopped the same way and `cancelled=True`.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Facts about this runtime for the manifest (image id and digest, engine version, ...)."""
        ...
