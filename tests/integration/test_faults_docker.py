"""SIGTERM to a controller running a docker job: the container is removed and the run recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobox.engine import Engine
from reprobox.runtimes.docker._settings import JOB_LABEL, RUN_ID_LABEL

ROOT = Path(__file__).resolve().parents[2]
SETSID_JOB = ROOT / "tests" / "jobs" / "setsid-escape"

pytestmark = pytest.mark.integration


def _start_run(runs: Path, offline_base: str, wheelhouse: Path) -> subprocess.Popen[bytes]:
    """`reprobox run` of the setsid job in a container, as a controller process to signal."""
    env = {**os.environ, "REPROBOX_BASE_IMAGE": offline_base, "REPROBOX_WHEELHOUSE": str(wheelhouse)}
    argv = [sys.executable, "-m", "reprobox", "run", str(SETSID_JOB), "--runtime", "docker", "-q"]
    return subprocess.Popen(
        [*argv, "--runs-dir", str(runs)],
        cwd=runs.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_sigterm_removes_the_container(
    tmp_path: Path, engine: Engine, offline_base: str, wheelhouse: Path
) -> None:
    runs = tmp_path / "runs"
    process = _start_run(runs, offline_base, wheelhouse)
    try:
        deadline = time.monotonic() + 900  # the first run may build the image
        while not list(runs.glob("setsid-escape/*/outputs/shell.pid")):
            assert process.poll() is None, process.communicate()[1].decode()
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        run_id = next(runs.glob("setsid-escape/*/outputs")).parent.name
        assert engine.list_containers({RUN_ID_LABEL: run_id})
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, err.decode()
    assert engine.list_containers({RUN_ID_LABEL: run_id}) == []
    manifest = json.loads((runs / "setsid-escape" / run_id / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"


@pytest.mark.parametrize("delay", [0.3, 1.5, 4.0])
def test_sigterm_at_any_moment_leaves_no_container_and_a_whole_record_or_none(
    tmp_path: Path, engine: Engine, offline_base: str, wheelhouse: Path, delay: float
) -> None:
    runs = tmp_path / "runs"
    before = set(engine.list_containers({JOB_LABEL: "setsid-escape"}))
    process = _start_run(runs, offline_base, wheelhouse)
    try:
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode in (143, -signal.SIGTERM), err.decode()
    assert b"Traceback" not in err
    after = set(engine.list_containers({JOB_LABEL: "setsid-escape"}))
    assert after <= before, "a container of the interrupted run was left behind"
    for run_dir in runs.glob("setsid-escape/2*"):
        assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
