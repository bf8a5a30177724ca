"""The `local` runtime: the guest entrypoint as a subprocess of this machine, in its own process group.

For machines without Docker and for fast tests. It gives the same determinism inside the job, but none
of the container's isolation: the job sees the host's files, network and installed packages.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from reprobox.guest import settings
from reprobox.runtime import OutputSink, RunOutcome, RunPlan
from reprobox.timestamps import utc_now

GRACE_SECONDS = 5.0


class LocalRuntime:
    name = "local"

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "python": self.python, "host": platform.node()}

    def environment(self, plan: RunPlan) -> dict[str, str]:
        """The host environment plus the plan's settings and the host paths of the run."""
        env = dict(os.environ)
        env.update(plan.guest_env)
        env[settings.OUTPUT_DIR] = str(plan.output_dir)
        env[settings.RUN_DIR] = str(plan.run_dir)
        env[settings.CODE_DIR] = str(plan.job.code)
        for mount in plan.job.data:
            if mount.env:
                env[mount.env] = str(mount.source)
        if plan.reference_run is not None:
            env[settings.REFERENCE_TRAIL] = str(plan.reference_run / settings.TRAIL_FILE)
        return env

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        outcome = RunOutcome(started_at=utc_now(), runtime=self.describe())
        try:
            process = subprocess.Popen(
                [self.python, "-m", "reprobox.guest", "--", *plan.command],
                cwd=plan.job.code,
                env=self.environment(plan),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: we can stop the whole job at once
            )
        except OSError as exc:
            outcome.ended_at = utc_now()
            sink.write(f"reprobox: cannot start the guest: {exc}\n".encode())
            return outcome
        assert process.stdout is not None
        pump = threading.Thread(target=_pump, args=(process.stdout, sink), daemon=True)
        pump.start()
        try:
            outcome.exit_code = _wait(process, plan.timeout, stop)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
            _stop_group(process)
        except _Cancelled:
            outcome.cancelled = True
            _stop_group(process)
        except KeyboardInterrupt:
            outcome.interrupted = True
            _stop_group(process)
        finally:
            _kill_group(process.pid)  # nothing of the job outlives the run
            pump.join(timeout=5)
            if not pump.is_alive():
                process.stdout.close()
        if outcome.timed_out or outcome.interrupted or outcome.cancelled:
            outcome.exit_code = None
        elif process.returncode is not None and process.returncode < 0:
            outcome.exit_code, outcome.signal = None, -process.returncode
        outcome.ended_at = utc_now()
        return outcome


class _Cancelled(Exception):
    """The controller asked this run to stop."""


def _wait(process: subprocess.Popen[bytes], timeout: float | None, stop: threading.Event | None) -> int:
    """Wait for the guest, in short slices so a stop request or the deadline is noticed promptly."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise _Cancelled
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout or 0)
        slice_seconds = 0.1 if remaining is None else min(0.1, remaining)
        try:
            return process.wait(timeout=slice_seconds)
        except subprocess.TimeoutExpired:
            continue


def _pump(stream: IO[bytes], sink: OutputSink) -> None:
    fd = stream.fileno()
    while chunk := os.read(fd, 65536):
        sink.write(chunk)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the job's process group, then SIGKILL whatever is left after a grace period."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            process.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            break  # a second Ctrl-C: stop waiting politely
    _kill_group(process.pid)
    process.wait()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
