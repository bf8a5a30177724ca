"""The `local` runtime: the guest entrypoint as a subprocess of this machine, in its own process group.

For machines without Docker and for fast tests. It gives the same determinism inside the job, and the
same absolute paths in every run (code, run dir, outputs, HOME, TMPDIR, data; see stable_paths): in a
private mount namespace where the kernel allows one, else in fixed folders that runs of a job take in
turn. Otherwise none of the container's isolation: the job sees the host's network and packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

from reprobox import controller
from reprobox.errors import EnvironmentProblem, UsageError
from reprobox.guest import settings
from reprobox.runtimes.base import OutputSink, RunOutcome, RunPlan
from reprobox.runtimes.local import jobprocs, namespace_launcher
from reprobox.runtimes.local.fixed_paths import StagingStopped, ensure_root, staged_run
from reprobox.runtimes.stable_paths import (
    MODE_FIXED,
    MODE_NAMESPACE,
    StableLayout,
    job_environment,
    layout_for,
)
from reprobox.timestamps import utc_now

GRACE_SECONDS = 5.0
PROBE_TIMEOUT = 30.0


ISOLATION_VARIABLE = "REPROBOX_LOCAL_ISOLATION"
ISOLATION_AUTO = "auto"  # a private mount namespace where the kernel allows one, else fixed folders
ISOLATIONS = (ISOLATION_AUTO, MODE_NAMESPACE, MODE_FIXED)
SHARED_STABLE_DIR = ".stable"  # under runs/<job>/: the stable root of jobs that span Slurm nodes


class LocalRuntime:
    name = "local"
    _probed: ClassVar[dict[str, bool]] = {}  # python -> whether a private mount namespace works
    _probe_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, python: str | None = None, isolation: str | None = None) -> None:
        self.python = python or sys.executable
        self.isolation = isolation or os.environ.get(ISOLATION_VARIABLE) or ISOLATION_AUTO
        if self.isolation not in ISOLATIONS:
            raise UsageError(
                f"{ISOLATION_VARIABLE}={self.isolation!r} is not one of {', '.join(ISOLATIONS)}; "
                "unset it or choose one of those"
            )

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "python": self.python, "host": platform.node()}

    def layout(self, plan: RunPlan) -> StableLayout:
        """The job's stable paths: under /tmp, or for a job spread over nodes (srun starts its tasks
        outside any namespace of ours) on the shared file system that holds its runs."""
        if _spans_nodes(plan):
            return layout_for(plan.job, os.getuid(), base=plan.run_dir.parent / SHARED_STABLE_DIR)
        return layout_for(plan.job, os.getuid())

    def environment(self, plan: RunPlan, layout: StableLayout | None = None) -> dict[str, str]:
        """The host environment plus the plan's settings, with every location at its stable path."""
        env = dict(os.environ)
        env.update(plan.guest_env)
        env = job_environment(env, layout or self.layout(plan), plan.job)
        if plan.reference_run is not None:  # a host path: the host's files stay visible in the namespace
            env[settings.REFERENCE_TRAIL] = str(plan.reference_run / settings.TRAIL_FILE)
        return env

    def mode(self, layout: StableLayout, plan: RunPlan | None = None) -> str:
        """namespace or fixed: what this machine allows, probed once per interpreter, or what was asked.

        A job spread over nodes is always fixed: its other nodes' tasks cannot enter our namespace.
        """
        if self.isolation == MODE_FIXED or (plan is not None and _spans_nodes(plan)):
            return MODE_FIXED
        with self._probe_lock:
            if self.python not in self._probed:
                self._probed[self.python] = _namespace_works(self.python, layout.root)
            works = self._probed[self.python]
        if works:
            return MODE_NAMESPACE
        if self.isolation == MODE_NAMESPACE:
            raise EnvironmentProblem(
                f"{ISOLATION_VARIABLE}=namespace, but this machine refuses a private mount namespace "
                f"to {self.python}; unset {ISOLATION_VARIABLE} to fall back to fixed folders"
            )
        return MODE_FIXED

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        outcome = RunOutcome(started_at=utc_now(), runtime=self.describe())
        layout = self.layout(plan)
        ensure_root(layout, os.getuid())
        mode = self.mode(layout, plan)
        outcome.runtime["paths"] = layout.to_json(mode)
        env = self.environment(plan, layout)
        guest = [self.python, "-m", "reprobox.guest", "--", *plan.command]
        try:
            if mode == MODE_FIXED:
                with staged_run(layout, plan, lambda: stop is not None and stop.is_set()):
                    self._supervise(guest, layout.code, env, plan=plan, sink=sink, stop=stop, outcome=outcome)
            else:
                with _scratch(plan.job.name) as scratch:
                    spec = scratch / "namespace.json"
                    spec.write_text(json.dumps(_namespace_spec(layout, plan, scratch)), encoding="utf-8")
                    launcher = [*_launcher(self.python), str(spec), "--", *guest]
                    self._supervise(
                        launcher, plan.run_dir, env, plan=plan, sink=sink, stop=stop, outcome=outcome
                    )
                if (
                    outcome.exit_code == namespace_launcher.EXIT_SETUP_FAILED
                ):  # refused after all: probe again
                    forget_namespace_probe(layout.root)
                    self._probed.pop(self.python, None)
        except StagingStopped:
            outcome.cancelled = True
        except KeyboardInterrupt:  # while waiting for the job's folder or moving the results home
            outcome.interrupted = True
        except OSError as exc:
            sink.write(f"reprobox: cannot prepare the stable paths under {layout.root}: {exc}\n".encode())
        if outcome.timed_out or outcome.interrupted or outcome.cancelled:
            outcome.exit_code = None
        outcome.ended_at = utc_now()
        return outcome

    def _supervise(
        self,
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
        try:
            process = subprocess.Popen(
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
            return
        assert process.stdout is not None
        pump = threading.Thread(target=_pump, args=(process.stdout, sink), daemon=True)
        pump.start()
        try:
            outcome.exit_code = _wait(process, plan.timeout, stop)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
            _stop_group(process, run_id)
        except _Cancelled:
            outcome.cancelled = True
            _stop_group(process, run_id)
        except KeyboardInterrupt:
            outcome.interrupted = True
            _stop_group(process, run_id)
        finally:
            _kill_group(process.pid, run_id)  # nothing of the job outlives the run
            pump.join(timeout=5)
            if not pump.is_alive():
                process.stdout.close()
        if outcome.timed_out or outcome.interrupted or outcome.cancelled:
            outcome.exit_code = None
        elif process.returncode is not None and process.returncode < 0:
            outcome.exit_code, outcome.signal = None, -process.returncode


def _launcher(python: str) -> list[str]:
    """The namespace launcher as a plain script in isolated mode without `site` (it needs only the
    standard library): a full interpreter start with site-packages would add tens of ms to every run."""
    return [python, "-I", "-S", str(Path(namespace_launcher.__file__))]


def _spans_nodes(plan: RunPlan) -> bool:
    return plan.job.launcher.nnodes > 1


def _namespace_spec(layout: StableLayout, plan: RunPlan, scratch: Path) -> dict[str, Any]:
    """What the launcher binds where: code and data read-only, the real run dir, a fresh HOME and TMPDIR."""
    (scratch / "home").mkdir()
    (scratch / "tmp").mkdir()
    mounts = [
        {"source": str(plan.job.code), "target": str(layout.code), "read_only": True},
        {"source": str(plan.run_dir), "target": str(layout.run), "read_only": False},
        {"source": str(scratch / "home"), "target": str(layout.home), "read_only": False},
        {"source": str(scratch / "tmp"), "target": str(layout.tmp), "read_only": False},
    ]
    mounts += [
        {"source": str(mount.source), "target": str(layout.data[mount.target]), "read_only": True}
        for mount in plan.job.data
    ]
    return {"root": str(layout.root), "cwd": str(layout.code), "mounts": mounts}


@contextlib.contextmanager
def _scratch(job_name: str) -> Iterator[Path]:
    """A host folder for one run's HOME and TMPDIR, removed after the run whatever happened."""
    folder = Path(tempfile.mkdtemp(prefix=f"reprobox-{job_name}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


PROBE_CACHE = ".namespace-works"  # in the user's stable root: "<boot id> <python>" lines that passed


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _namespace_works(python: str, root: Path) -> bool:
    """Whether `python` can enter a private mount namespace and bind folders there.

    A short trial run, remembered until the machine reboots (a probe is a process start every command
    would otherwise pay); `forget_namespace_probe` drops the memory when a launch is refused after all.
    """
    cache = root.parent / PROBE_CACHE
    key = f"{_boot_id()} {python}"
    try:
        if _boot_id() and key in cache.read_text(encoding="utf-8").splitlines():
            return True
    except OSError:
        pass
    if not _probe(python, root):
        return False
    with contextlib.suppress(OSError), cache.open("a", encoding="utf-8") as remembered:
        remembered.write(key + "\n")
    return True


def forget_namespace_probe(root: Path) -> None:
    (root.parent / PROBE_CACHE).unlink(missing_ok=True)


def _probe(python: str, root: Path) -> bool:
    try:
        probe = subprocess.run(
            [*_launcher(python), "--probe", str(root)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


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
        with contextlib.suppress(Exception):  # the sink records its own failure (runner._TeeSink.lost)
            sink.write(chunk)


def _stop_group(process: subprocess.Popen[bytes], run_id: str | None) -> None:
    """SIGTERM every process of the job, then SIGKILL whatever is left after a grace period.

    The job's processes are looked up before the first signal: one that called setsid is found as a
    descendant of the guest while its parent still lives, later by the run id in its environment.
    """
    members = jobprocs.job_processes(process.pid, run_id)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    jobprocs.signal_all(members, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            process.wait(timeout=0.05)
            if not jobprocs.job_processes(process.pid, run_id):
                break
            time.sleep(0.05)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            break  # a second Ctrl-C: stop waiting politely
    _kill_group(process.pid, run_id)
    process.wait()


def _kill_group(pgid: int, run_id: str | None = None) -> None:
    """SIGKILL the job's process group and every other process of the job (see jobprocs)."""
    jobprocs.kill_job(pgid, run_id)
