"""The seam between "what to run" and "where it runs".

A runtime starts the guest entrypoint (`python -m reprobox.guest -- COMMAND...`) with the plan's
environment, streams its output, enforces the timeout, and reports how the process ended. Everything
else (hashing, fingerprint, trail) is done by the guest and read back from the run directory, so every
runtime yields the same RunRecord.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from reprobox.errors import UsageError
from reprobox.guest import settings
from reprobox.jobfile import JobSpec

# Where the guest sees things inside a container; the local runtime uses host paths instead.
CONTAINER_CODE_DIR = "/reprobox/code"
CONTAINER_RUN_DIR = "/reprobox/run"
OUTPUTS_SUBDIR = "outputs"


@dataclass(frozen=True)
class RuntimeOptions:
    """Everything a runtime may need to be created; each runtime reads the fields it uses.

    Made once from the command line by the CLI (or by the library for reproduce and the Slurm node);
    the library reads this, never the parsed arguments. None means the default.
    """

    base_image: str | None = None  # --base-image: the base of the reprobox image when it is built
    wheelhouse: Path | None = None  # --wheelhouse: local wheels for offline builds
    lock: str | None = None  # --lock: cpu, cuda or a path under env/
    image: str | None = None  # an image id or tag to run as is instead of building the job's image
    job: JobSpec | None = None  # the job: its image section is built, its launcher/resources read
    engine: Any = None  # an already connected reprobox.engine.Engine to reuse
    python: str | None = None  # the local runtime's interpreter (default: this one)
    hostname: str | None = None  # a container's hostname (the Slurm node's name); default: fixed
    stop_grace: float | None = None  # seconds a stopped container gets before SIGKILL
    slurm_container: str | None = None  # none or docker (default: $REPROBOX_SLURM_CONTAINER, else none)
    sbatch_args: str | None = None  # extra sbatch options, shell-quoted (default: $REPROBOX_SBATCH_ARGS)


class OutputSink(Protocol):
    """Receives the job's combined stdout/stderr as it arrives (the runner tees it to stdout.log)."""

    def write(self, chunk: bytes) -> None: ...


@dataclass(frozen=True)
class Variation:
    """What one run of `verify --vary` changes about where the job runs; the default changes nothing.

    Factors that are only environment variables (threads, cpu-isa, tz, locale, env-order, workers) reach
    the job through the plan's `guest_env`; the fields here need the runtime's help, and each runtime
    applies the ones it names in `Runtime.variations` (a factor a runtime cannot apply is refused, never
    silently skipped).
    """

    hostname: str | None = None  # the job's host name (its own UTS namespace, or the container's)
    uid: int | None = None  # another user id for the job, with `user_name` as its name
    user_name: str | None = None
    path_root: str | None = None  # the job's stable paths (code, outputs, data) under another absolute root
    home: str | None = None  # another absolute HOME
    umask: int | None = None
    file_order: str | None = None  # "reversed": directory listings of the code and data folders reversed
    clock_offset: float | None = None  # seconds added to the job's wall clock

    def fields(self) -> dict[str, object]:
        """The fields this variation sets (those not None), for records and for checking support."""
        return {name: value for name, value in vars(self).items() if value is not None}

    def check_supported(self, runtime: str, supported: frozenset[str]) -> None:
        """Refuse a variation the runtime cannot apply: a run that silently ignored it would prove nothing."""
        missing = sorted(set(self.fields()) - supported)
        if missing:
            raise UsageError(
                f"the {runtime} runtime cannot vary {', '.join(missing)}; "
                f"it varies only {', '.join(sorted(supported)) or 'nothing'}: choose another runtime"
            )

    def guest_env(self) -> dict[str, str]:
        """The variables through which the guest applies the umask, the clock offset and the file order."""
        env = {}
        if self.umask is not None:
            env[settings.UMASK] = f"{self.umask:03o}"
        if self.clock_offset is not None:
            env[settings.CLOCK_OFFSET] = repr(float(self.clock_offset))
        if self.file_order is not None:
            env[settings.FILE_ORDER] = self.file_order
        return env

    def file_order_roots(self, code: str, data: Iterable[str]) -> dict[str, str]:
        """The folders whose listings a file-order variation reorders: the job's code and data."""
        if self.file_order is None:
            return {}
        return {settings.FILE_ORDER_ROOTS: os.pathsep.join([code, *data])}

    def record(self, runtime: dict[str, Any]) -> None:
        """Say in the runtime facts what this run changed (nothing is added for the default variation)."""
        applied = self.fields()
        if applied:
            runtime["variation"] = applied


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
    variation: Variation = field(default_factory=Variation)  # verify --vary: what this run changes

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
    """One place to run the guest: `local` (a subprocess), `docker` (a hardened container), `slurm`, ...

    Made by `reprobox.runtimes.open_runtime(name, RuntimeOptions(...))`, the only chooser.
    """

    name: str
    variations: frozenset[str]  # the `Variation` fields this runtime applies; run() refuses any other

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        """Run the plan to completion, timeout, Ctrl-C or `stop`; never leave a process or container behind.

        On KeyboardInterrupt the runtime stops the job, returns an outcome with `interrupted=True`
        (it does not re-raise); the runner records the run and then raises `Interrupted`. When `stop`
        is set (from another thread) the job is stopped the same way and `cancelled=True`.

        A plan it refuses (a variation it cannot apply) raises UsageError before anything starts: the
        runner then removes the run's folder. Any other ReproboxError (an engine gone) is recorded as
        the run's failure and raised again.
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Facts about this runtime for the manifest (image id and digest, engine version, ...)."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """The stack a job here would run on (hardware, torch, ...), probed with torch imported."""
        ...
