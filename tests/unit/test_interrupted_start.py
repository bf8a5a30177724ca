"""A termination signal while a job starts: the container or process it made is removed, not left.

The engine here stands in for one that finishes creating after the signal arrived (the race a real
engine runs: `tests/integration/test_faults_docker.py` signals real runs at many moments). It counts
what it created and what was removed, so a container nobody removes is seen at once. The local job is a
real process, signalled the moment it exists, before its pid reached the runtime.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reprobox import signals
from reprobox.runtimes.base import RunOutcome
from reprobox.runtimes.docker import DockerRuntime
from reprobox.runtimes.docker._image import image_fingerprint
from reprobox.runtimes.local import _process
from tests.unit.test_docker_runtime import IMAGE, make_plan


class SignalledDuringCreate:
    """Creates a container, receiving SIGTERM before it answers with the container's id."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.removed: list[str] = []

    def create_container(self, settings: Mapping[str, Any]) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        container_id = f"c{len(self.created) + 1}"
        self.created.append(container_id)
        return container_id

    def remove_container(self, container_id: str) -> None:
        self.removed.append(container_id)

    def engine_version(self) -> str:
        return "27.0"

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        return {"State": {}, "HostConfig": {}, "Config": {}}

    def start(self, container_id: str) -> None:
        raise AssertionError("a container whose create was interrupted is not started")

    def stop(self, container_id: str, grace: float) -> None:
        pass

    def stream_logs(self, container_id: str) -> Iterator[bytes]:
        raise AssertionError("not started, so never read")


class NullSink:
    def write(self, data: bytes) -> None:
        pass


def test_a_run_signalled_while_its_container_is_created_removes_that_container(tmp_path: Path) -> None:
    engine = SignalledDuringCreate()
    runtime = DockerRuntime(IMAGE, engine=engine, host_uid=1000, host_gid=1000)  # type: ignore[arg-type]
    with signals.interrupting() as caught:
        outcome = runtime.run(make_plan(tmp_path), NullSink())  # type: ignore[arg-type]
    assert outcome.interrupted and caught.first == signal.SIGTERM
    assert engine.removed == engine.created == ["c1"]


def test_a_fingerprint_signalled_while_its_probe_is_created_removes_the_probe() -> None:
    engine = SignalledDuringCreate()
    with signals.interrupting(), pytest.raises(signals.SignalInterrupt):
        image_fingerprint(engine, IMAGE)  # type: ignore[arg-type]
    assert engine.removed == engine.created == ["c1"]


def test_a_local_job_signalled_as_it_starts_is_stopped_before_the_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen_then_signal(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGTERM)  # before the pid is handed back
        return started[-1]

    monkeypatch.setattr(_process.subprocess, "Popen", popen_then_signal)
    outcome = RunOutcome()
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    began = time.monotonic()
    with signals.interrupting() as caught:
        _process.supervise(
            argv,
            tmp_path,
            dict(os.environ),
            plan=make_plan(tmp_path),
            sink=NullSink(),
            stop=None,
            outcome=outcome,
        )
    assert outcome.interrupted and outcome.exit_code is None and caught.first == signal.SIGTERM
    assert started[0].poll() is not None, "the job outlived its interrupted run"
    assert time.monotonic() - began < 30
