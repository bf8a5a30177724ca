"""The docker runtime applies a `verify --vary` variation inside the container and records it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from reprobox.engine import Engine
from reprobox.errors import EnvironmentProblem
from reprobox.guest import settings
from reprobox.guest.variation import find_libfaketime
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import RunOutcome, RunPlan, Variation
from reprobox.runtimes.docker import DockerRuntime
from reprobox.runtimes.docker._settings import CONTAINER_LIBFAKETIME

pytestmark = pytest.mark.integration

OBSERVE = Path(__file__).parents[1] / "jobs" / "observes-host" / "observe.py"
COMMAND = ("python3", "observe.py")


class Collect:
    def __init__(self) -> None:
        self.text = ""

    def write(self, chunk: bytes) -> None:
        self.text += chunk.decode(errors="replace")


def run(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path, variation: Variation
) -> tuple[RunOutcome, dict[str, Any]]:
    code, run_dir = tmp_path / "code", tmp_path / "run"
    code.mkdir()
    shutil.copy2(OBSERVE, code / "observe.py")
    (run_dir / "outputs").mkdir(parents=True)
    job = JobSpec(job_file=code / "job.yaml", name="observes-host", command=COMMAND, code=code)
    run_id = f"it-{time.time_ns()}"
    created.run_ids.append(run_id)
    plan = RunPlan(
        job=job,
        run_id=run_id,
        run_dir=run_dir,
        guest_env={settings.SEED: "0", settings.RUN_ID: run_id},
        command=COMMAND,
        timeout=120,
        variation=variation,
    )
    sink = Collect()
    outcome = DockerRuntime(built_image.info, engine=engine).run(plan, sink)
    assert outcome.succeeded, sink.text
    assert engine.list_containers({"io.reprobox.run-id": run_id}) == []
    return outcome, json.loads((run_dir / "outputs" / "observed.json").read_text())


def test_the_default_variation_changes_nothing(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    outcome, seen = run(engine, built_image, created, tmp_path, Variation())
    assert "variation" not in outcome.runtime
    assert seen["hostname"] == "reprobox"
    assert seen["home"] == "/tmp" and seen["cwd"] == "/reprobox/code"
    assert seen["output_dir"] == "/reprobox/run/outputs"
    assert seen["umask"] == "022"
    assert abs(seen["time"] - time.time()) < 120


def test_hostname_umask_and_user_are_varied_and_recorded(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    if DockerRuntime(built_image.info, engine=engine).host_uid != 0:
        pytest.skip("varying the user needs reprobox run as root")
    variation = Variation(hostname="elsewhere-7", umask=0o077, uid=23456, user_name="someone")
    outcome, seen = run(engine, built_image, created, tmp_path, variation)
    assert seen["hostname"] == "elsewhere-7"
    assert (seen["umask"], seen["file_mode"]) == ("077", "600")
    assert (seen["uid"], seen["user"]) == (23456, "someone")
    assert outcome.runtime["container"]["hostname"] == "elsewhere-7"
    assert outcome.runtime["container"]["user"] == "23456:23456"
    assert outcome.runtime["variation"] == {
        "hostname": "elsewhere-7",
        "uid": 23456,
        "user_name": "someone",
        "umask": 0o077,
    }


def test_home_and_path_root_move_where_the_job_runs(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    variation = Variation(path_root="/srv/elsewhere", home="/home/someone")
    outcome, seen = run(engine, built_image, created, tmp_path, variation)
    assert seen["cwd"] == "/srv/elsewhere/code"
    assert seen["output_dir"] == "/srv/elsewhere/run/outputs"
    assert seen["home"] == seen["home_expanded"] == "/home/someone"
    paths = outcome.runtime["paths"]
    assert (paths["code"], paths["outputs"], paths["home"]) == (
        "/srv/elsewhere/code",
        "/srv/elsewhere/run/outputs",
        "/home/someone",
    )


def test_the_clock_is_shifted_with_the_hosts_libfaketime(
    engine: Engine, built_image: Any, created: Any, tmp_path: Path
) -> None:
    if find_libfaketime() is None:
        with pytest.raises(EnvironmentProblem, match="libfaketime"):
            run(engine, built_image, created, tmp_path, Variation(clock_offset=90061.0))
        return
    outcome, seen = run(engine, built_image, created, tmp_path, Variation(clock_offset=90061.0))
    assert abs(seen["time"] - (time.time() + 90061.0)) < 120
    assert outcome.runtime["variation"] == {"clock_offset": 90061.0}
    mounts = {mount["target"]: mount for mount in outcome.runtime["container"]["mounts"]}
    assert mounts[CONTAINER_LIBFAKETIME]["mode"] == "ro"
