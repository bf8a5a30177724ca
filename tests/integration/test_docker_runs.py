"""Jobs through DockerRuntime in the real image: hardening as `docker inspect` recorded it, every ending."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reprobox.engine import Engine
from reprobox.guest import settings
from reprobox.jobfile import DataMount, JobSpec, Resources
from reprobox.runtimes.base import CONTAINER_CODE_DIR, CONTAINER_RUN_DIR, RunOutcome, RunPlan
from reprobox.runtimes.docker import DockerRuntime, container_user

pytestmark = pytest.mark.integration

# Runs the command without the guest: these tests are about the container around it.
PLAIN_PYTHON = ("/usr/bin/env", "--")

PROBE = """
import json, os, pathlib, socket
facts = {"uid": os.getuid(), "gid": os.getgid(), "home": os.environ["HOME"]}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    facts["network"] = "reachable"
except OSError as exc:
    facts["network"] = type(exc).__name__
def writable(path):
    try:
        pathlib.Path(path).write_text("x")
        return True
    except OSError:
        return False
facts["code_writable"] = writable(os.path.join(os.environ["REPROBOX_CODE_DIR"], "x"))
facts["rootfs_writable"] = writable("/etc/reprobox-x")
facts["data_writable"] = writable(os.path.join(os.environ["DATA_DIR"], "x"))
facts["data"] = pathlib.Path(os.environ["DATA_DIR"], "input.txt").read_text()
facts["tmp_writable"] = writable("/tmp/x")
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
facts["cap_eff"] = status["CapEff"].strip()
facts["no_new_privs"] = status["NoNewPrivs"].strip()
pathlib.Path(os.environ["REPROBOX_OUTPUT_DIR"], "facts.json").write_text(json.dumps(facts))
print("probe done")
"""


class Collect:
    """An OutputSink that keeps the chunks and when each arrived."""

    def __init__(self) -> None:
        self.chunks: list[tuple[float, bytes]] = []

    def write(self, chunk: bytes) -> None:
        self.chunks.append((time.monotonic(), chunk))

    @property
    def text(self) -> str:
        return b"".join(chunk for _, chunk in self.chunks).decode()


class InterruptOnFirstChunk(Collect):
    """Raises KeyboardInterrupt the way Ctrl-C does while the runtime streams output."""

    def write(self, chunk: bytes) -> None:
        super().write(chunk)
        raise KeyboardInterrupt


def make_plan(
    tmp_path: Path, created: Any, command: tuple[str, ...], *, timeout: float | None = 120, **job_fields: Any
) -> RunPlan:
    code, run_dir = tmp_path / "code", tmp_path / "run"
    code.mkdir(exist_ok=True)
    (run_dir / "outputs").mkdir(parents=True)
    job = JobSpec(job_file=code / "job.yaml", name="integration", command=command, code=code, **job_fields)
    run_id = f"it-{time.time_ns()}"
    created.run_ids.append(run_id)
    env = {settings.SEED: "0", settings.RUN_ID: run_id}
    return RunPlan(job=job, run_id=run_id, run_dir=run_dir, guest_env=env, command=command, timeout=timeout)


def run(
    engine: Engine, built_image: Any, plan: RunPlan, sink: Collect | None = None, **options: Any
) -> tuple[RunOutcome, Collect]:
    sink = sink or Collect()
    options.setdefault("entrypoint", PLAIN_PYTHON)
    runtime = DockerRuntime(built_image.info, engine=engine, **options)
    return runtime.run(plan, sink), sink


def assert_no_container_left(engine: Engine, plan: RunPlan) -> None:
    assert engine.list_containers({"io.reprobox.run-id": plan.run_id}) == []


def test_job_runs_hardened_and_the_record_proves_it(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("input bytes")
    mount = DataMount(source=data, target="/data", env="DATA_DIR")
    plan = make_plan(tmp_path, created, ("python3", "probe.py"), data=(mount,))
    (plan.job.code / "probe.py").write_text(PROBE)
    outcome, sink = run(engine, built_image, plan)
    assert outcome.succeeded, sink.text
    assert "probe done" in sink.text

    recorded = outcome.runtime["container"]
    expected_user = container_user(built_image.info, host_uid=os.getuid(), host_gid=os.getgid())
    assert recorded["user"] == expected_user
    assert not recorded["user"].startswith("0")
    assert recorded["network_mode"] == "none"
    assert recorded["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in recorded["security_opt"]
    assert recorded["read_only_rootfs"] is True
    assert recorded["privileged"] is False
    mounts = {mount["target"]: mount for mount in recorded["mounts"]}
    assert mounts[CONTAINER_CODE_DIR]["mode"] == "ro"
    assert mounts["/data"]["mode"] == "ro"
    assert mounts[CONTAINER_RUN_DIR]["mode"] == "rw"
    assert recorded["resources"]["pids_limit"] == Resources().pids
    assert outcome.runtime["image"]["id"] == built_image.info.id
    assert outcome.runtime["engine"]["version"]

    facts = json.loads((plan.output_dir / "facts.json").read_text())
    assert facts["uid"] == int(expected_user.split(":")[0]) != 0
    assert facts["network"] != "reachable"
    assert facts["code_writable"] is False
    assert facts["rootfs_writable"] is False
    assert facts["data_writable"] is False
    assert facts["data"] == "input bytes"
    assert facts["tmp_writable"] is True
    assert facts["home"] == "/tmp"
    assert int(facts["cap_eff"], 16) == 0
    assert facts["no_new_privs"] == "1"
    # Outputs belong to whoever runs reprobox, even when the job ran as the image's user.
    assert (plan.output_dir / "facts.json").stat().st_uid == os.getuid()
    assert plan.run_dir.stat().st_uid == os.getuid()
    assert_no_container_left(engine, plan)


def test_non_root_caller_runs_as_itself(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    script = "import os; open(os.environ['REPROBOX_OUTPUT_DIR'] + '/f', 'w')"
    plan = make_plan(tmp_path, created, ("python3", "-c", script))
    plan.output_dir.chmod(0o777)
    outcome, sink = run(engine, built_image, plan, host_uid=4321, host_gid=4321)
    assert outcome.succeeded, sink.text
    assert outcome.runtime["container"]["user"] == "4321:4321"
    assert (plan.output_dir / "f").stat().st_uid == 4321


def test_the_guest_entrypoint_runs_the_job(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    plan = make_plan(tmp_path, created, ("python3", "-c", "print('hello from the job')"))
    outcome, sink = run(engine, built_image, plan, entrypoint=None)
    assert outcome.exit_code == 0, sink.text
    assert "hello from the job" in sink.text
    assert (plan.run_dir / settings.GUEST_STATE / settings.GUEST_RESULT).is_file()
    assert outcome.runtime["container"]["entrypoint"][-3:] == ["-m", "reprobox.guest", "--"]


def test_output_streams_while_the_job_runs(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    script = "import time; print('first', flush=True); time.sleep(2); print('second', flush=True)"
    plan = make_plan(tmp_path, created, ("python3", "-c", script))
    outcome, sink = run(engine, built_image, plan)
    assert outcome.succeeded
    first = next(at for at, chunk in sink.chunks if b"first" in chunk)
    second = next(at for at, chunk in sink.chunks if b"second" in chunk)
    assert second - first > 1.0


def test_timeout_stops_the_job_and_leaves_no_container(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    plan = make_plan(tmp_path, created, ("sleep", "300"), timeout=1.0)
    started = time.monotonic()
    outcome, _ = run(engine, built_image, plan)
    assert outcome.timed_out
    assert outcome.exit_code is None
    assert outcome.failure_reason() == "timed out"
    assert time.monotonic() - started < 30
    assert_no_container_left(engine, plan)


def test_oom_killed_job_is_reported(engine: Engine, built_image: Any, created: Any, tmp_path: Path) -> None:
    allocate = "data = b'x' * (512 << 20); print(len(data))"
    plan = make_plan(tmp_path, created, ("python3", "-c", allocate), resources=Resources(memory="64m"))
    outcome, _ = run(engine, built_image, plan)
    assert outcome.oom_killed
    assert not outcome.succeeded
    assert outcome.runtime["container"]["resources"]["memory_bytes"] == 64 * 1024**2
    assert_no_container_left(engine, plan)


@pytest.mark.parametrize(
    ("script", "exit_code", "signal_number"),
    [
        ("raise SystemExit(3)", 3, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", None, 9),
    ],
)
def test_exit_status_and_signals(
    engine: Engine,
    built_image: Any,
    created: Any,
    tmp_path: Path,
    script: str,
    exit_code: int | None,
    signal_number: int | None,
) -> None:
    plan = make_plan(tmp_path, created, ("python3", "-c", script))
    outcome, _ = run(engine, built_image, plan)
    assert (outcome.exit_code, outcome.signal) == (exit_code, signal_number)
    assert not outcome.oom_killed


def test_stop_event_cancels_the_run(engine: Engine, built_image: Any, created: Any, tmp_path: Path) -> None:
    plan = make_plan(tmp_path, created, ("sleep", "300"))
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    runtime = DockerRuntime(built_image.info, engine=engine, entrypoint=PLAIN_PYTHON)
    outcome = runtime.run(plan, Collect(), stop)
    assert outcome.cancelled
    assert outcome.exit_code is None
    assert_no_container_left(engine, plan)


def test_ctrl_c_stops_and_removes_the_container(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    script = "import time; print('running', flush=True); time.sleep(300)"
    plan = make_plan(tmp_path, created, ("python3", "-c", script))
    outcome, _ = run(engine, built_image, plan, sink=InterruptOnFirstChunk())
    assert outcome.interrupted
    assert outcome.exit_code is None
    assert_no_container_left(engine, plan)
