"""The podman runtime's pure parts, without Podman: socket choice, rlimits, image names, settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from docker.models.containers import _create_container_args

from reprobox import cli
from reprobox.engine import Engine, ImageInfo
from reprobox.errors import EnvironmentProblem
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import RunPlan
from reprobox.runtimes.podman import (
    ULIMIT_CEILINGS,
    PodmanRuntime,
    container_ulimits,
    open_engine,
    reference_candidates,
    socket_path,
)

IMAGE = ImageInfo(id="sha256:" + "ab" * 32, labels={"io.reprobox.user": "10001:10001"}, user="10001:10001")


def make_plan(tmp_path: Path) -> RunPlan:
    code, run_dir = tmp_path / "code", tmp_path / "runs" / "tiny" / "r1"
    (run_dir / "outputs").mkdir(parents=True)
    code.mkdir()
    job = JobSpec(job_file=code / "job.yaml", name="tiny", command=("python", "train.py"), code=code)
    return RunPlan(job=job, run_id="r1", run_dir=run_dir, guest_env={}, command=job.command, timeout=60.0)


def runtime(*, rootless: bool, uid: int) -> PodmanRuntime:
    """A runtime whose engine facts are given, so nothing is asked of an engine."""
    made = PodmanRuntime(IMAGE, engine=Engine(client=None), facts={"name": "podman", "rootless": rootless})
    made.host_uid = made.host_gid = uid
    return made


def test_root_uses_the_system_socket_and_users_their_own() -> None:
    assert socket_path(0, {"XDG_RUNTIME_DIR": "/run/user/0"}) == Path("/run/podman/podman.sock")
    user = Path("/run/user/1001/podman/podman.sock")
    assert socket_path(1001, {"XDG_RUNTIME_DIR": "/run/user/1001"}) == user
    assert socket_path(1001, {}) == user
    assert socket_path(1001, {"XDG_RUNTIME_DIR": "/tmp/xdg"}) == Path("/tmp/xdg/podman/podman.sock")


def test_ulimits_stay_within_the_hard_limits_and_the_ceilings() -> None:
    # this machine's kind of limits: nofile 20000, nproc 96365 (Podman keeps at most 32768)
    assert container_ulimits({"nofile": 20000, "nproc": 96365}) == [
        {"name": "nofile", "soft": 20000, "hard": 20000},
        {"name": "nproc", "soft": ULIMIT_CEILINGS["nproc"], "hard": ULIMIT_CEILINGS["nproc"]},
    ]
    unlimited = {limit["name"]: limit["hard"] for limit in container_ulimits({"nofile": -1, "nproc": -1})}
    assert unlimited == ULIMIT_CEILINGS
    for limit in container_ulimits({"nofile": 1024, "nproc": 512}):
        assert limit["soft"] == limit["hard"] <= {"nofile": 1024, "nproc": 512}[limit["name"]]


@pytest.mark.parametrize(
    ("ref", "candidates"),
    [
        (
            "reprobox/env:0123456789abcdef",
            ("localhost/reprobox/env:0123456789abcdef", "docker.io/reprobox/env:0123456789abcdef"),
        ),
        (
            "reprobox/offline-base:bookworm",
            ("localhost/reprobox/offline-base:bookworm", "docker.io/reprobox/offline-base:bookworm"),
        ),
        ("python:3.11", ("localhost/python:3.11", "docker.io/library/python:3.11")),
    ],
)
def test_short_names_are_tried_under_each_prefix_podman_gives(ref: str, candidates: tuple[str, ...]) -> None:
    assert reference_candidates(ref) == (*candidates, ref)


@pytest.mark.parametrize(
    "ref",
    [
        "sha256:" + "ab" * 32,
        "localhost/reprobox/env:0123",
        "docker.io/reprobox/env:0123",
        "ghcr.io/org/image:1",
        "registry:5000/image@sha256:" + "cd" * 32,
    ],
)
def test_ids_and_qualified_names_are_used_as_given(ref: str) -> None:
    assert reference_candidates(ref) == (ref,)


def test_rootful_settings_are_the_docker_runtimes_plus_rlimits(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    created = runtime(rootless=False, uid=0).settings(plan)
    assert created["user"] == "10001:10001"
    assert created["network_mode"] == "none" and created["cap_drop"] == ["ALL"]
    assert created["security_opt"] == ["no-new-privileges"] and created["read_only"] is True
    assert all(mount["ReadOnly"] for mount in created["mounts"] if mount["Target"] == "/reprobox/code")
    assert created["image"] == IMAGE.id
    assert {limit["name"] for limit in created["ulimits"]} == {"nofile", "nproc"}
    assert runtime(rootless=False, uid=1234).settings(plan)["user"] == "1234:1234"


def test_rootless_runs_the_images_non_root_user_not_the_caller(tmp_path: Path) -> None:
    """Rootless, uid 1234 would be a subordinate id on the host; the image's user is lent the run dir."""
    assert runtime(rootless=True, uid=1234).settings(make_plan(tmp_path))["user"] == "10001:10001"


def test_the_docker_sdk_turns_the_rlimits_into_host_config_ulimits(tmp_path: Path) -> None:
    created: dict[str, Any] = runtime(rootless=False, uid=0).settings(make_plan(tmp_path))
    host_config = _create_container_args({**created, "version": "1.41"})["host_config"]
    assert {(u["Name"], u["Soft"], u["Hard"]) for u in host_config["Ulimits"]} == {
        (limit["name"], limit["soft"], limit["hard"]) for limit in created["ulimits"]
    }


def test_describe_says_podman_and_the_engine_facts() -> None:
    made = runtime(rootless=True, uid=1234)
    made._engine_version = "4.3.1"  # what the engine would answer
    described = made.describe()
    assert described["name"] == "podman"
    assert described["engine"] == {"version": "4.3.1", "name": "podman", "rootless": True}


def test_no_podman_installed_is_one_sentence_with_the_fix(tmp_path: Path) -> None:
    environ = {"XDG_RUNTIME_DIR": str(tmp_path), "PATH": str(tmp_path)}
    with pytest.raises(EnvironmentProblem) as raised:
        open_engine(uid=os.getuid() or 4321, environ=environ)
    assert "Podman is not installed" in raised.value.message
    assert "apt-get install podman" in raised.value.message


def test_the_cli_offers_the_podman_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    assert "podman" in capsys.readouterr().out
