"""A signal at any moment of a run's life, from the making of its folder to the command's return,
leaves a whole record or none: every run folder left holds a readable manifest, none holds the room
set aside for its records or a temporary file, `latest` names a folder that exists, no container is
left, the run dir is not left lent to the job's user, and the signal is never taken and then lost.

A real signal's handler runs between two calls of the main thread. A tracer sends the process
SIGTERM on entry to, or return from, the Nth call of reprobox's own code, for every N the run makes,
under the command's own handlers: each moment a signal could arrive is tried once.
"""

from __future__ import annotations

import dis
import gc
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from reprobox import diskspace, errors, signals
from reprobox.diskspace import RESERVE_NAME
from reprobox.jobfile import load_job
from reprobox.records.guest import guest_reserve_path
from reprobox.runner import RunOptions, execute
from reprobox.runtimes import podman
from reprobox.runtimes.base import RunOutcome
from reprobox.runtimes.docker import DockerRuntime
from reprobox.runtimes.podman import PodmanRuntime
from reprobox.timestamps import utc_now
from reprobox.verify import VerifyOptions, verify
from tests.unit.test_docker_runtime import IMAGE

Tracer = Callable[[FrameType, str, Any], Any]


class _QuickRuntime:
    """Runs nothing and says the job exited 0: the run's life around the runtime is what is tried."""

    name = "quick"

    def run(self, plan: Any, sink: Any, stop: threading.Event | None = None) -> RunOutcome:
        sink.write(b"hi\n")
        return RunOutcome(exit_code=0, started_at=utc_now(), ended_at=utc_now())

    def describe(self) -> dict[str, str]:
        return {"name": self.name}

    def fingerprint(self) -> dict[str, Any]:
        return {}


class _PlayedEngine:
    """An engine whose containers exit 0 at once; it counts what it created and what was removed."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.removed: list[str] = []

    def engine_version(self) -> str:
        return "27.0"

    def create_container(self, settings: Mapping[str, Any]) -> str:
        self.created.append(f"c{len(self.created) + 1}")
        return self.created[-1]

    def start(self, container_id: str) -> None:
        pass

    def stream_logs(self, container_id: str) -> Iterator[bytes]:
        yield b"hi\n"

    def wait(self, container_id: str, timeout: float | None = None) -> int:
        return 0

    def stop(self, container_id: str, grace: float) -> None:
        pass

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        return {"State": {"OOMKilled": False}, "HostConfig": {}, "Config": {}}

    def remove_container(self, container_id: str) -> None:
        self.removed.append(container_id)


class _UnsharedOwners:
    """`podman unshare chown`, played: the owners the run dir was given, in turn."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def run(self, command: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert command[:3] == ["podman", "unshare", "chown"], command
        self.given.append(command[-2])
        return subprocess.CompletedProcess(command, 0, "", "")


# What the engine and `podman unshare` do, played here: a signal often comes while reprobox waits on them
_PLAYED = {
    method.__code__
    for played in (_PlayedEngine, _UnsharedOwners)
    for name, method in vars(played).items()
    if callable(method) and not name.startswith("__")
}
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_RESUME = dis.opmap["RESUME"]


def _entered(frame: FrameType, event: str) -> bool:
    """A generator's first start (`RESUME 0`), where Python takes signals as at any function's."""
    code = frame.f_code.co_code
    return event == "call" and code[frame.f_lasti] == _RESUME and code[frame.f_lasti + 1] == 0


class _SignalAtCall:
    """Sends SIGTERM at the `at`th call or return of reprobox's code in this thread; counts them all
    when `at` is None."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.seen = 0

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> Tracer | None:
        if event not in ("call", "return"):
            return None
        if not (frame.f_globals.get("__name__", "").startswith("reprobox") or frame.f_code in _PLAYED):
            return None
        if frame.f_code.co_flags & _SUSPENDABLE and not _entered(frame, event):
            return None  # a generator resumed after a yield, or closed: Python takes no signal there
        self.seen += 1
        if self.seen == self.at:
            signal.raise_signal(signal.SIGTERM)  # its handler runs as this call returns
        frame.f_trace_lines = False
        return self


def _run_traced(action: Callable[[], object], at: int | None) -> int:
    tracer = _SignalAtCall(at)
    with signals.interrupting() as caught:
        sys.settrace(tracer)
        try:
            action()
        except (errors.Interrupted, KeyboardInterrupt):
            assert caught.first == signal.SIGTERM
        else:  # a signal taken and then lost would let a verify run on, the user's SIGTERM unheard
            assert caught.first is None, f"the signal at call {at} was taken and lost"
        finally:
            sys.settrace(None)
    return tracer.seen


def _whole_records_or_none(job_runs: Path, unsignalled: set[str]) -> None:
    """Each run left is recorded: as interrupted, or as it ended without the signal (one that came
    after its record was written)."""
    for run_dir in job_runs.glob("2*"):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] in {"interrupted", *unsignalled}, manifest["status"]
        assert not (run_dir / RESERVE_NAME).exists(), f"{run_dir.name} kept its reserve"
        assert not guest_reserve_path(run_dir).exists(), f"{run_dir.name} kept the guest's reserve"
    temporaries = [p.name for p in job_runs.rglob(".*") if p.name.endswith(".tmp") or ".latest." in p.name]
    assert not temporaries, f"a write cut short left {temporaries}"
    latest = job_runs / "latest"
    if latest.is_symlink():
        assert latest.resolve().is_dir(), "latest names a folder that is gone"


def _job(tmp_path: Path) -> Any:
    """A job whose code folder holds only its job.yaml: every run makes the same calls."""
    code = tmp_path / "job"
    code.mkdir()
    (code / "job.yaml").write_text("version: 1\nname: quick\ncommand: [x]\n")
    return load_job(code / "job.yaml", host_env={})


@pytest.mark.parametrize("command", ["run", "verify", "run in a container", "run in rootless podman"])
def test_a_signal_at_every_call_of_a_run_leaves_a_whole_record_or_none(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(tmp_path)
    engine = _PlayedEngine()
    owners = _UnsharedOwners()
    monkeypatch.setattr(podman, "subprocess", owners)
    # Hundreds of runs: small reserves, and no flush to the disk (what is tried is what is left behind)
    monkeypatch.setattr(diskspace, "GUEST_RESERVE_BYTES", 4096)
    monkeypatch.setattr(diskspace, "RUN_RESERVE_BYTES", 4096)
    monkeypatch.setattr(os, "fsync", lambda _fd: None)

    def action_in(runs: Path) -> Callable[[], object]:
        options = RunOptions(runs_dir=runs)
        if command == "verify":
            return lambda: verify(job, _QuickRuntime(), options, VerifyOptions(runs=2, parallel=2))  # type: ignore[arg-type]
        runtime: Any = _QuickRuntime()
        if command == "run in a container":
            runtime = DockerRuntime(IMAGE, engine=engine)  # type: ignore[arg-type]
        elif command == "run in rootless podman":
            runtime = PodmanRuntime(IMAGE, engine=engine, facts={"name": "podman", "rootless": True})  # type: ignore[arg-type]
        return lambda: execute(job, runtime, options)

    calls = _run_traced(action_in(tmp_path / "unsignalled"), None)
    unsignalled = {_status(run_dir) for run_dir in (tmp_path / "unsignalled" / "quick").glob("2*")}
    assert calls > 200 and len(unsignalled) == 1, (calls, unsignalled)
    # A file opened the moment before the signal, its `with` not yet entered, is closed when the
    # exception that passed it by is collected, with a ResourceWarning: Python's, not reprobox's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for at in range(1, calls + 1):
            runs = tmp_path / f"at-{at}"
            _run_traced(action_in(runs), at)
            _whole_records_or_none(runs / "quick", unsignalled)
            assert set(engine.created) <= set(engine.removed), f"a signal at call {at} left a container"
            assert owners.given[-1:] in ([], ["0:0"]), f"a signal at call {at} left the run dir lent"
            lent = {(path.lstat().st_uid, path.lstat().st_gid) for path in runs.rglob("*")}
            assert lent <= {(os.getuid(), os.getgid())}, f"a signal at call {at} left the run dir lent"
        gc.collect()


def _status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "manifest.json").read_text())["status"])
