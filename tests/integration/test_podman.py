"""The podman runtime against a real Podman (its API service, started by the runtime when none answers).

Skipped with the reason where Podman cannot run: not installed, or refused by this kernel (e.g. no user
namespaces for a rootless user). Images come over from the Docker engine the other integration tests use.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from vary_each_factor import APPLIED_BY_THE_RUNTIME, JOB, assert_each_factor_changes_only_its_own_file

from reprobox import cli
from reprobox.engine import Engine
from reprobox.errors import EnvironmentProblem
from reprobox.guest.variation import find_libfaketime
from reprobox.image import MANAGED_LABEL
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import read_record
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.docker import RUN_ID_LABEL
from reprobox.runtimes.podman import PodmanRuntime, find_image, from_docker, open_engine

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def podman_runs() -> None:
    """Skip, saying why, where Podman is missing or cannot run a container here."""
    if shutil.which("podman") is None:
        pytest.skip("Podman is not installed; install it with: scripts/setup.sh --podman")
    done = subprocess.run(["podman", "info"], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        pytest.skip(f"Podman cannot run here: {(done.stderr.strip().splitlines() or ['?'])[-1]}")


@pytest.fixture(scope="session")
def podman(podman_runs: None) -> Iterator[Engine]:
    """This user's Podman engine; when no socket answers, a service started for the session."""
    try:
        engine, service = open_engine()
    except EnvironmentProblem as exc:
        pytest.skip(f"Podman's API service cannot start here: {exc.message}")
    yield engine
    if service is not None:
        service.stop()


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, offline_base: str, wheelhouse: Path) -> None:
    monkeypatch.setenv("REPROBOX_BASE_IMAGE", offline_base)
    monkeypatch.setenv("REPROBOX_WHEELHOUSE", str(wheelhouse))


@pytest.mark.slow
def test_verify_example_under_podman_and_reproduce_it(
    offline_env: None,
    podman: Engine,
    verify_example,
    capsys: pytest.CaptureFixture[str],
    containers_added,
) -> None:
    before = set(podman.list_containers([MANAGED_LABEL]))
    services = podman_services()  # the session's own, when it started one
    code, data = verify_example("tiny-mlp", "podman")
    assert code == 0, data
    assert data["verdict"] == "identical"
    for run in data["runs"]:
        runtime = read_record(run).data["runtime"]
        assert runtime["name"] == "podman"
        assert runtime["engine"]["name"] == "podman" and runtime["engine"]["version"]
        assert isinstance(runtime["engine"]["rootless"], bool)
        assert runtime["image"]["id"].startswith("sha256:")
        container = runtime["container"]
        assert container["network_mode"] == "none" and not container["cap_add"]
        assert {"CHOWN", "SETUID", "SETGID", "NET_RAW"} <= set(container["cap_drop"])
        assert container["security_opt"] == ["no-new-privileges"] and container["read_only_rootfs"]
        assert container["user"] == "10001:10001" or container["user"] == f"{os.getuid()}:{os.getgid()}"
        code_mount = next(m for m in container["mounts"] if m["target"] == "/reprobox/code")
        assert code_mount["mode"] == "ro"
    assert not (left := containers_added(podman, before)), left

    # A reviewer reproduces the attestation: by default under the runtime the author used, in its image.
    attestation = Path(data["runs"][0]).parents[2] / "reprobox.attestation.json"
    example = Path(__file__).parents[2] / "examples" / "tiny-mlp"
    runs_dir = attestation.parent / "reviewer-runs"
    args = [str(attestation), "--code", str(example), "--runs-dir", str(runs_dir), "--json", "-q"]
    assert cli.main(["reproduce", *args]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "bit-identical", result["sentence"]
    assert [read_record(run).runtime_name for run in result["runs"]] == ["podman"]
    gc.collect()  # each command's service stops with the last use of its engine, not when we exit
    assert podman_services() == services


def podman_services() -> set[int]:
    """The `podman system service` processes this test process started."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and command[1:3] == [b"system", b"service"]:
            found.add(int(stat.parent.name))
    return found


def test_a_container_that_fails_to_start_is_removed(
    podman: Engine, offline_base: str, tmp_path: Path
) -> None:
    """Podman keeps a container whose start failed ("Created"); the runtime removes it all the same."""
    image = find_image(podman, offline_base) or from_docker(podman, offline_base)
    assert image is not None
    runtime = PodmanRuntime(image, engine=podman)
    runtime.ulimits = [{"name": "nofile", "soft": 1 << 30, "hard": 1 << 30}]  # beyond any hard limit
    code, run_dir = tmp_path / "code", tmp_path / "run"
    code.mkdir()
    (run_dir / "outputs").mkdir(parents=True)
    job = JobSpec(job_file=code / "job.yaml", name="fails-to-start", command=("true",), code=code)
    plan = RunPlan(
        job=job,
        run_id=f"start-fails-{os.getpid()}",
        run_dir=run_dir,
        guest_env={},
        command=("true",),
        timeout=60.0,
    )
    with pytest.raises(EnvironmentProblem, match="starting container"):
        runtime.run(plan, sink=_Discard())
    assert podman.list_containers({RUN_ID_LABEL: plan.run_id}) == []


def test_a_service_started_for_the_command_stops_with_it(podman_runs: None, tmp_path: Path) -> None:
    engine, service = open_engine(uid=os.getuid() or 4321, environ={"XDG_RUNTIME_DIR": str(tmp_path)})
    assert service is not None  # no socket answers under this runtime dir: one was started
    assert engine.engine_version()
    service.stop()
    assert service.process.poll() is not None
    assert not service.folder.exists()


class _Discard:
    def write(self, chunk: bytes) -> None:
        pass


@pytest.mark.slow
def test_each_factor_reaches_the_job_under_podman_alone(offline_env: None, podman: Engine, vary_job) -> None:
    """Podman's own ways (an environment in another order each start, create settings of its own)
    must neither fake a difference nor drop a variation. The factors that reach a job as environment
    variables alone take the same path as under Docker (test_docker_vary_each_factor varies them all)."""
    if find_libfaketime() is None:
        pytest.skip("varying the clock lends the container the host's libfaketime: apt-get install faketime")
    factors = ",".join(sorted(APPLIED_BY_THE_RUNTIME))
    code, data = vary_job(JOB, factors, "--no-attestation", runtime="podman")
    assert code == 1, data["sentence"]
    assert_each_factor_changes_only_its_own_file(data, "podman", set(), APPLIED_BY_THE_RUNTIME)


def test_a_segment_of_a_long_run_replays_under_podman(
    offline_env: None, podman: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """spot-check replays a local run's segment in a Podman container, from the run's checkpoint."""
    job = tmp_path / "job"
    shutil.copytree(Path(__file__).parents[1] / "jobs" / "resume", job)
    runs = tmp_path / "runs"
    assert cli.main(["run", str(job), "--runtime", "local", "--runs-dir", str(runs), "-q"]) == 0
    run = (runs / "resume" / "latest").resolve()
    args = [
        "spot-check",
        str(run),
        "--segments",
        "1",
        "--seed",
        "0",
        "--runtime",
        "podman",
        "--runs-dir",
        str(runs),
    ]
    capsys.readouterr()
    assert cli.main([*args, "--json", "-q"]) == 0
    (segment,) = json.loads(capsys.readouterr().out)["segments"]
    assert segment["match"] and read_record(segment["run_dir"]).runtime_name == "podman"
