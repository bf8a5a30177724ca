"""The guest as a child process: start it in its own process group, stream its output, stop it whole.

Whatever ends the run (the job itself, the deadline, a stop request, Ctrl-C), no process of the job
outlives it: the group is signalled, then every process of the job found by ancestry or run id.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from reprobox import controller, signals
from reprobox.guest import settings
from reprobox.runtimes.base import OutputSink, RunOutcome, RunPlan
from reprobox.runtimes.local import jobprocs

GRACE_SECONDS = 5.0


STOP_LOOK_S = 0.1  # how often a stop request or the deadline is looked for while the job runs


def supervise(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    *,
    plan: RunPlan,
    sink: OutputSink,
    stop: threading.Event | None,
    outcome: RunOutcome,
) -> None:
    """Start the guest in its own process group, stream its output, and record how it ended."""
    run_id = env.get(settings.RUN_ID)
    env = {**env, controller.CONTROLLER_VARIABLE: controller.current().encode()}  # for `reprobox clean`
    process: subprocess.Popen[bytes] | None = None
    pump: threading.Thread | None = None
    since = 0
    try:
        with signals.held():  # a signal waits for the pid: a job started then is stopped below, not left
            process = _start(argv, cwd, env, sink)
        if process is None:
            return
        since = jobprocs.start_ticks(process.pid)  # no process of the job is older than its guest
        assert process.stdout is not None
        pump = threading.Thread(target=_pump, args=(process.stdout, sink), daemon=True)
        pump.start()
        outcome.exit_code = _wait(process, plan.timeout, stop)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
    except _Cancelled:
        outcome.cancelled = True
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        stopped = outcome.timed_out or outcome.interrupted or outcome.cancelled
        if process is not None:
            if stopped:
                _stop_group(process, run_id, since)
            jobprocs.kill_job(process.pid, run_id, since)  # nothing of the job outlives the run
            process.wait()
            _close_output(process, pump)
    if stopped:
        outcome.exit_code = None
    elif process is not None and process.returncode is not None and process.returncode < 0:
        outcome.exit_code, outcome.signal = None, -process.returncode


def _start(
    argv: list[str], cwd: Path, env: dict[str, str], sink: OutputSink
) -> subprocess.Popen[bytes] | None:
    """The guest started in its own process group, or None (said in the log) when it cannot start."""
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: we can stop the whole job at once
        )
    except OSError as exc:
        sink.write(f"reprobox: cannot start the guest: {exc}\n".encode())
        return None


def _close_output(process: subprocess.Popen[bytes], pump: threading.Thread | None) -> None:
    """Close the job's output pipe once the pump has drained it (left to the pump if it is stuck)."""
    if pump is not None:
        pump.join(timeout=5)
        if pump.is_alive():
            return
    if process.stdout is not None:
        process.stdout.close()


class _Cancelled(Exception):
    """The controller asked this run to stop."""


def _wait(process: subprocess.Popen[bytes], timeout: float | None, stop: threading.Event | None) -> int:
    """Wait for the guest: a thread blocks in waitpid and says when it ended, so the end is seen at once
    (not at a poll's next look); a stop request is noticed within STOP_LOOK_S, the deadline when it
    comes. With neither to look for, nothing wakes until the guest ends (Ctrl-C still raises here)."""
    ended = threading.Event()

    def reap() -> None:
        with contextlib.suppress(Exception):  # the caller's own wait reports what went wrong
            process.wait()
        ended.set()

    threading.Thread(target=reap, name="reprobox-reap", daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise _Cancelled
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout or 0)
        looks = [look for look in (remaining, STOP_LOOK_S if stop is not None else None) if look is not None]
        if ended.wait(min(looks, default=None)):
            return process.wait()


def _pump(stream: IO[bytes], sink: OutputSink) -> None:
    """Drain the job's output into the sink until the pipe closes, whatever the sink does: a sink that
    fails (a full disk under the log) must not stop the draining, or the job blocks on a full pipe."""
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the pipe was closed under us: nothing more will come
            return
        if not chunk:
            return
        with contextlib.suppress(Exception):  # the sink records its own failure (runfolder.JobLog.lost)
            sink.write(chunk)


def _stop_group(process: subprocess.Popen[bytes], run_id: str | None, since: int) -> None:
    """SIGTERM every process of the job and wait a grace period for them to end (the caller then
    SIGKILLs whatever is left).

    The job's processes are looked up before the first signal: one that called setsid is found as a
    descendant of the guest while its parent still lives, later by the run id in its environment.
    """
    members = jobprocs.job_processes(process.pid, run_id, started_since=since)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    jobprocs.signal_all(members, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            process.wait(timeout=0.05)
            if not jobprocs.job_processes(process.pid, run_id, started_since=since):
                break
            time.sleep(0.05)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            break  # a second Ctrl-C: stop waiting politely
