"""Plan -> container arguments, without an engine: hardened defaults, opt-ins, resources, exit statuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.models.containers import _create_container_args
from docker.types import HostConfig

from reprobox import controller
from reprobox.engine import ImageInfo
from reprobox.jobfile import DataMount, JobSpec, Resources
from reprobox.runtimes.base import CONTAINER_CODE_DIR, CONTAINER_RUN_DIR, RunOutcome, RunPlan
from reprobox.runtimes.docker import (
    GUEST_USER,
    apply_exit_status,
    container_name,
    container_settings,
    effective_settings,
    size_bytes,
)

IMAGE = ImageInfo(
    id="sha256:" + "ab" * 32,
    repo_digests=("example/reprobox@sha256:" + "cd" * 32,),
    labels={"io.reprobox.user": "10001:10001"},
    user="10001:10001",
)


def make_plan(tmp_path: Path, **job_fields: Any) -> RunPlan:
    code = tmp_path / "code"
    run_dir = tmp_path / "runs" / "tiny" / "r1"
    (run_dir / "outputs").mkdir(parents=True)
    code.mkdir(exist_ok=True)
    job = JobSpec(
        job_file=code / "job.yaml", name="tiny", command=("python", "train.py"), code=code, **job_fields
    )
    return RunPlan(
        job=job,
        run_id="20260101-000000-abcd",
        run_dir=run_dir,
        guest_env={"REPROBOX_SEED": "7", "REPROBOX_RUN_ID": "20260101-000000-abcd", "MY_VAR": "x"},
        command=job.command,
        timeout=60.0,
    )


def settings_for(
    plan: RunPlan, *, uid: int = 0, gid: int = 0, image: ImageInfo | str = IMAGE
) -> dict[str, Any]:
    return container_settings(plan, image, host_uid=uid, host_gid=gid)


def mounts_by_target(created: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {mount["Target"]: mount for mount in created["mounts"]}


def test_defaults_are_hardened(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    created = settings_for(plan)
    assert created["user"] == "10001:10001"
    assert created["network_mode"] == "none"
    assert created["cap_drop"] == ["ALL"]
    assert created["security_opt"] == ["no-new-privileges"]
    assert created["privileged"] is False
    assert created["read_only"] is True
    assert set(created["tmpfs"]) == {"/tmp"}
    assert created["pids_limit"] == Resources().pids
    assert created["working_dir"] == CONTAINER_CODE_DIR
    assert created["command"] == ["python", "train.py"]
    assert "entrypoint" not in created  # the image's entrypoint is the guest
    assert created["image"] == IMAGE.id
    for absent in ("mem_limit", "nano_cpus", "shm_size", "device_requests"):
        assert absent not in created


def test_code_is_read_only_and_only_the_run_dir_is_writable(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    mounts = mounts_by_target(settings_for(plan))
    assert mounts[CONTAINER_CODE_DIR] == {
        "Type": "bind",
        "Source": str(plan.job.code),
        "Target": CONTAINER_CODE_DIR,
        "ReadOnly": True,
    }
    assert mounts[CONTAINER_RUN_DIR]["Source"] == str(plan.run_dir)
    assert mounts[CONTAINER_RUN_DIR]["ReadOnly"] is False
    assert [target for target, mount in mounts.items() if not mount["ReadOnly"]] == [CONTAINER_RUN_DIR]


def test_environment_points_the_guest_at_container_paths(tmp_path: Path) -> None:
    env = settings_for(make_plan(tmp_path))["environment"]
    assert env["REPROBOX_OUTPUT_DIR"] == "/reprobox/run/outputs"
    assert env["REPROBOX_RUN_DIR"] == CONTAINER_RUN_DIR
    assert env["REPROBOX_CODE_DIR"] == CONTAINER_CODE_DIR
    assert env["REPROBOX_SEED"] == "7"
    assert env["MY_VAR"] == "x"
    assert env["HOME"] == "/tmp"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["REPROBOX_IMAGE_ID"] == IMAGE.id
    assert env["REPROBOX_IMAGE_DIGEST"] == IMAGE.repo_digests[0]


def test_data_sources_are_read_only_at_their_targets(tmp_path: Path) -> None:
    source = tmp_path / "mnist"
    source.mkdir()
    plan = make_plan(tmp_path, data=(DataMount(source=source, target="/data/mnist", env="MNIST_DIR"),))
    created = settings_for(plan)
    mount = mounts_by_target(created)["/data/mnist"]
    assert mount["Source"] == str(source)
    assert mount["ReadOnly"] is True
    assert created["environment"]["MNIST_DIR"] == "/data/mnist"


def test_reference_run_is_mounted_read_only_for_the_guest(tmp_path: Path) -> None:
    reference = tmp_path / "runs" / "tiny" / "r0"
    reference.mkdir(parents=True)
    base = make_plan(tmp_path)
    plan = RunPlan(**{**base.__dict__, "reference_run": reference})
    created = settings_for(plan)
    assert mounts_by_target(created)["/reprobox/reference"]["ReadOnly"] is True
    assert created["environment"]["REPROBOX_REFERENCE_TRAIL"] == "/reprobox/reference/trail.jsonl"


def test_network_is_opt_in(tmp_path: Path) -> None:
    assert settings_for(make_plan(tmp_path, network=True))["network_mode"] == "bridge"


@pytest.mark.parametrize(
    ("uid", "gid", "image", "user"),
    [
        (1000, 1000, IMAGE, "1000:1000"),  # a non-root caller owns its outputs
        (0, 0, IMAGE, "10001:10001"),  # root: the image's non-root user
        (0, 0, ImageInfo(id="sha256:1", user="2000:3000"), "2000:3000"),
        (0, 0, ImageInfo(id="sha256:1", user=""), GUEST_USER),  # an image that would run as root
        (0, 0, ImageInfo(id="sha256:1", user="0:0"), GUEST_USER),
        (0, 0, "example/image:1", GUEST_USER),
    ],
)
def test_user_is_never_root(tmp_path: Path, uid: int, gid: int, image: ImageInfo | str, user: str) -> None:
    assert settings_for(make_plan(tmp_path), uid=uid, gid=gid, image=image)["user"] == user


def test_all_gpus_become_one_device_request(tmp_path: Path) -> None:
    created = settings_for(make_plan(tmp_path, resources=Resources(gpus="all")))
    assert created["device_requests"] == [{"count": -1, "capabilities": [["gpu"]]}]
    assert created["environment"]["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_gpu_indices_become_device_ids(tmp_path: Path) -> None:
    created = settings_for(make_plan(tmp_path, resources=Resources(gpus=(0, 1))))
    assert created["device_requests"] == [{"device_ids": ["0", "1"], "capabilities": [["gpu"]]}]
    assert created["environment"]["NVIDIA_VISIBLE_DEVICES"] == "0,1"


def test_no_gpus_means_no_request(tmp_path: Path) -> None:
    created = settings_for(make_plan(tmp_path, resources=Resources(gpus=())))
    assert "device_requests" not in created
    assert created["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_memory_cpus_shm_and_pids(tmp_path: Path) -> None:
    resources = Resources(memory="512m", cpus=1.5, shm_size="1g", pids=256)
    created = settings_for(make_plan(tmp_path, resources=resources))
    assert created["mem_limit"] == 512 * 1024**2
    assert created["memswap_limit"] == created["mem_limit"]  # no swap beyond the limit
    assert created["nano_cpus"] == 1_500_000_000
    assert created["shm_size"] == 1024**3
    assert created["pids_limit"] == 256


def test_entrypoint_can_be_replaced(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    created = container_settings(plan, IMAGE, host_uid=0, host_gid=0, entrypoint=("/usr/bin/env", "--"))
    assert created["entrypoint"] == ["/usr/bin/env", "--"]


def test_labels_and_name_identify_the_run(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    created = settings_for(plan)
    assert created["labels"] == {
        "io.reprobox.managed": "true",
        "io.reprobox.run-id": plan.run_id,
        "io.reprobox.jobfile": "tiny",
        **controller.current().labels(),
    }
    assert created["name"] == "reprobox-tiny-20260101-000000-abcd"
    odd = RunPlan(**{**plan.__dict__, "run_id": "a b/c"})
    assert container_name(odd) == "reprobox-tiny-a-b-c"


def test_settings_are_valid_docker_sdk_arguments(tmp_path: Path) -> None:
    """The SDK's own translation accepts every key (no engine needed), GPUs and limits included."""
    resources = Resources(gpus=(0,), memory="1g", cpus=2, shm_size="256m")
    created = settings_for(make_plan(tmp_path, resources=resources))
    arguments = _create_container_args({**created, "version": "1.41"})
    host_config = arguments.pop("host_config")
    assert isinstance(host_config, HostConfig)
    assert host_config["ReadonlyRootfs"] is True
    assert host_config["CapDrop"] == ["ALL"]
    assert host_config["NetworkMode"] == "none"
    assert host_config["Init"] is True
    assert host_config["DeviceRequests"][0]["DeviceIDs"] == ["0"]
    assert arguments["user"] == "10001:10001"


def test_effective_settings_come_from_docker_inspect() -> None:
    facts = {
        "Id": "c" * 64,
        "Name": "/reprobox-tiny-r1",
        "Image": IMAGE.id,
        "Config": {"User": "10001:10001", "Hostname": "reprobox", "WorkingDir": "/reprobox/code"},
        "HostConfig": {
            "NetworkMode": "none",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "ReadonlyRootfs": True,
            "PidsLimit": 4096,
            "Memory": 0,
        },
        "Mounts": [
            {"Type": "bind", "Source": "/r", "Destination": "/reprobox/run", "RW": True},
            {"Type": "bind", "Source": "/c", "Destination": "/reprobox/code", "RW": False},
        ],
        "State": {"ExitCode": 0, "OOMKilled": False},
    }
    recorded = effective_settings(facts)
    assert recorded["user"] == "10001:10001"
    assert recorded["name"] == "reprobox-tiny-r1"
    assert recorded["cap_drop"] == ["ALL"]
    assert recorded["read_only_rootfs"] is True
    assert recorded["resources"]["pids_limit"] == 4096
    assert recorded["mounts"] == [
        {"type": "bind", "source": "/c", "target": "/reprobox/code", "mode": "ro"},
        {"type": "bind", "source": "/r", "target": "/reprobox/run", "mode": "rw"},
    ]


@pytest.mark.parametrize(
    ("status", "flags", "exit_code", "signal"),
    [
        (0, {}, 0, None),
        (3, {}, 3, None),
        (137, {}, None, 9),  # killed by SIGKILL (the init reports 128+N)
        (143, {}, None, 15),
        (137, {"timed_out": True}, None, None),
        (137, {"cancelled": True}, None, None),
        (None, {"interrupted": True}, None, None),
        (-1, {}, None, None),
    ],
)
def test_exit_status_mapping(
    status: int | None, flags: dict[str, bool], exit_code: int | None, signal: int | None
) -> None:
    outcome = RunOutcome(**flags)
    apply_exit_status(outcome, status)
    assert (outcome.exit_code, outcome.signal) == (exit_code, signal)


def test_sizes_use_binary_units() -> None:
    assert size_bytes("64m") == 64 * 1024**2
    assert size_bytes("1.5g") == int(1.5 * 1024**3)
    assert size_bytes("100") == 100
    with pytest.raises(ValueError, match="not a size"):
        size_bytes("lots")
