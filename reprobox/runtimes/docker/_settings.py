"""A run plan -> the engine's hardened create arguments, and `docker inspect` -> the recorded evidence.

Pure functions of their inputs: unit-tested without an engine, and recorded as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from reprobox import controller
from reprobox.engine import ImageInfo
from reprobox.errors import UsageError
from reprobox.guest import settings
from reprobox.image import MANAGED_LABEL
from reprobox.jobfile import Resources
from reprobox.runtimes.base import (
    CONTAINER_CODE_DIR,
    CONTAINER_RUN_DIR,
    OUTPUTS_SUBDIR,
    RunOutcome,
    RunPlan,
    Variation,
)
from reprobox.runtimes.stable_paths import MODE_CONTAINER, paths_record

GUEST_USER = "10001:10001"  # the image's `reprobox` user; also used for images whose user is root
GUEST_USER_NAME = "reprobox"
CONTAINER_HOME = "/tmp"  # noqa: S108 - inside the container: its private tmpfs
CONTAINER_TMP = "/tmp"  # noqa: S108 - the same private tmpfs
CONTAINER_HOSTNAME = "reprobox"  # the same in every run: a job that reads its hostname sees no difference
CONTAINER_REFERENCE_DIR = "/reprobox/reference"
CONTAINER_LIBFAKETIME = "/reprobox/libfaketime/libfaketime.so.1"  # the host's, for verify --vary time
TMPFS_OPTIONS = "rw,exec,nosuid,nodev,mode=1777"  # exec: torch compiles and loads kernels from /tmp
RUN_ID_LABEL = "io.reprobox.run-id"
JOB_LABEL = "io.reprobox.jobfile"
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bkmg]?)$")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def container_user(image: ImageInfo | str, *, host_uid: int, host_gid: int) -> str:
    """Who the job runs as: the caller's uid:gid (so outputs belong to them), or the image's non-root user."""
    if host_uid != 0:
        return f"{host_uid}:{host_gid}"
    if isinstance(image, ImageInfo):
        for candidate in (image.labels.get("io.reprobox.user", ""), image.user):
            if _numeric_non_root(candidate):
                return candidate if ":" in candidate else f"{candidate}:{candidate}"
    return GUEST_USER


def container_name(plan: RunPlan) -> str:
    """A readable, unique name (job and run id), so `docker ps` says what runs."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"reprobox-{plan.job.name}-{plan.run_id}")


def hardened_settings(image: ImageInfo | str, *, host_uid: int, host_gid: int) -> dict[str, Any]:
    """The settings every reprobox container shares: non-root, no network, no capabilities, read-only root."""
    image_id = image.id if isinstance(image, ImageInfo) else image
    return {
        "image": image_id,
        "user": container_user(image, host_uid=host_uid, host_gid=host_gid),
        "hostname": CONTAINER_HOSTNAME,
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "privileged": False,
        "read_only": True,
        "tmpfs": {"/tmp": TMPFS_OPTIONS},  # noqa: S108 - a private tmpfs of the container
        "init": True,  # a tiny init as PID 1 forwards signals and reaps the job's orphans
        "detach": True,
        "stdin_open": False,
        "tty": False,
        "log_config": {"type": "json-file", "config": {}},  # readable by `logs` on any engine setup
        "labels": {MANAGED_LABEL: "true"},
        "environment": {
            "HOME": CONTAINER_HOME,
            "TMPDIR": CONTAINER_TMP,  # what tempfile would pick anyway, named as the local runtime names it
            "USER": GUEST_USER_NAME,  # getpass.getuser() works although the uid may have no passwd entry
            "REPROBOX_IMAGE_ID": image_id,
            "REPROBOX_IMAGE_DIGEST": (image.repo_digest or "") if isinstance(image, ImageInfo) else "",
        },
    }


def container_settings(
    plan: RunPlan,
    image: ImageInfo | str,
    *,
    host_uid: int,
    host_gid: int,
    entrypoint: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The `containers.create` keyword arguments for one run (plain data: unit-tested, and recorded)."""
    job = plan.job
    created = hardened_settings(image, host_uid=host_uid, host_gid=host_gid)
    code_dir, run_dir = container_dirs(plan.variation)
    mounts = [_bind(job.code, code_dir, read_only=True)]
    mounts += [_bind(data.source, data.target, read_only=True) for data in job.data]
    if plan.reference_run is not None:
        mounts.append(_bind(plan.reference_run, CONTAINER_REFERENCE_DIR, read_only=True))
    mounts.append(_bind(plan.run_dir, run_dir, read_only=False))

    environment = dict(plan.guest_env)
    environment.update(created["environment"])
    environment.update(
        {
            settings.OUTPUT_DIR: f"{run_dir}/{OUTPUTS_SUBDIR}",
            settings.RUN_DIR: run_dir,
            settings.CODE_DIR: code_dir,
            "NVIDIA_VISIBLE_DEVICES": _visible_devices(job.resources.gpus),
        }
    )
    for data in job.data:
        if data.env:
            environment[data.env] = data.target
    if plan.reference_run is not None:
        environment[settings.REFERENCE_TRAIL] = f"{CONTAINER_REFERENCE_DIR}/{settings.TRAIL_FILE}"

    created.update(
        {
            "name": container_name(plan),
            "command": list(plan.command),
            "working_dir": code_dir,
            "network_mode": "bridge" if job.network else "none",
            "mounts": mounts,
            "environment": environment,
            "labels": {
                **created["labels"],
                RUN_ID_LABEL: plan.run_id,
                JOB_LABEL: job.name,
                **controller.current().labels(),  # so `reprobox clean` knows when its controller is gone
            },
            **_resource_settings(job.resources),
        }
    )
    if entrypoint is not None:
        created["entrypoint"] = list(entrypoint)
    environment.update(plan.variation.file_order_roots(code_dir, (data.target for data in job.data)))
    apply_variation(created, plan.variation)
    return created


def container_dirs(variation: Variation) -> tuple[str, str]:
    """Where the job sees its code and run dir: /reprobox/{code,run}, or under a varied path root."""
    if variation.path_root is None:
        return CONTAINER_CODE_DIR, CONTAINER_RUN_DIR
    root = PurePosixPath(variation.path_root)
    if not root.is_absolute() or root == PurePosixPath("/"):
        raise UsageError(f"a varied path_root must be an absolute folder other than /, not {root}")
    return str(root / "code"), str(root / "run")


def apply_variation(created: dict[str, Any], variation: Variation) -> None:
    """What a `verify --vary` run changes in the container: hostname, user, HOME, umask (in the guest)."""
    environment = created["environment"]
    if variation.hostname is not None:
        created["hostname"] = variation.hostname
    if variation.uid is not None:
        if variation.uid == 0:
            raise UsageError("a varied user must not be root: the container's job never runs as root")
        created["user"] = f"{variation.uid}:{variation.uid}"
    if variation.user_name is not None:
        environment["USER"] = variation.user_name
    if variation.home is not None:
        if not PurePosixPath(variation.home).is_absolute():
            raise UsageError(f"a varied home must be an absolute path, not {variation.home!r}")
        environment["HOME"] = variation.home
        created["tmpfs"] = {**created["tmpfs"], variation.home: TMPFS_OPTIONS}  # fresh and writable
    environment.update(variation.guest_env())


def lend_libfaketime(created: dict[str, Any], library: Path) -> None:
    """Mount the host's libfaketime read-only for a clock-shifted run; the guest preloads it into the
    command (the image is the same Debian as the host, so the same C library)."""
    created["mounts"] = [*created["mounts"], _bind(library.resolve(), CONTAINER_LIBFAKETIME, read_only=True)]
    created["environment"][settings.LIBFAKETIME] = CONTAINER_LIBFAKETIME


def container_paths(plan: RunPlan) -> dict[str, Any]:
    """The manifest's `runtime.paths`: the absolute paths a job sees in the container, the same every run."""
    code_dir, run_dir = container_dirs(plan.variation)
    return paths_record(
        MODE_CONTAINER,
        code=code_dir,
        run=run_dir,
        home=plan.variation.home or CONTAINER_HOME,
        tmp=CONTAINER_TMP,
        data={data.target: data.target for data in plan.job.data},
    )


def effective_settings(facts: Mapping[str, Any]) -> dict[str, Any]:
    """What `docker inspect` says was in force for a container: the evidence the manifest keeps."""
    config = facts.get("Config") or {}
    host = facts.get("HostConfig") or {}
    state = facts.get("State") or {}
    mounts = [
        {
            "type": mount.get("Type"),
            "source": mount.get("Source"),
            "target": mount.get("Destination"),
            "mode": "rw" if mount.get("RW") else "ro",
        }
        for mount in facts.get("Mounts") or ()
    ]
    return {
        "id": facts.get("Id"),
        "name": str(facts.get("Name", "")).lstrip("/"),
        "image_id": facts.get("Image"),
        "user": config.get("User"),
        "hostname": config.get("Hostname"),
        "working_dir": config.get("WorkingDir"),
        "entrypoint": config.get("Entrypoint"),
        "command": config.get("Cmd"),
        "network_mode": host.get("NetworkMode"),
        "cap_drop": host.get("CapDrop"),
        "cap_add": host.get("CapAdd"),
        "privileged": host.get("Privileged"),
        "security_opt": host.get("SecurityOpt"),
        "read_only_rootfs": host.get("ReadonlyRootfs"),
        "init": host.get("Init"),
        "tmpfs": host.get("Tmpfs"),
        "mounts": sorted(mounts, key=lambda mount: str(mount["target"])),
        "resources": {
            "memory_bytes": host.get("Memory"),
            "memory_swap_bytes": host.get("MemorySwap"),
            "nano_cpus": host.get("NanoCpus"),
            "pids_limit": host.get("PidsLimit"),
            "shm_size_bytes": host.get("ShmSize"),
            "device_requests": host.get("DeviceRequests"),
        },
        "state": {
            "exit_code": state.get("ExitCode"),
            "oom_killed": state.get("OOMKilled"),
            "started_at": state.get("StartedAt"),
            "finished_at": state.get("FinishedAt"),
        },
    }


def size_bytes(size: str) -> int:
    """'512m' -> 536870912 (binary units, as Docker reads them)."""
    match = _SIZE.match(size.strip().lower())
    if match is None:
        raise ValueError(f"{size!r} is not a size such as '512m' or '8g'")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _resource_settings(resources: Resources) -> dict[str, Any]:
    limits: dict[str, Any] = {"pids_limit": resources.pids}
    if resources.memory is not None:
        limits["mem_limit"] = size_bytes(resources.memory)
        limits["memswap_limit"] = limits["mem_limit"]  # no swap: an over-limit job fails fast and clearly
    if resources.cpus is not None:
        limits["nano_cpus"] = round(resources.cpus * 1e9)
    if resources.shm_size is not None:
        limits["shm_size"] = size_bytes(resources.shm_size)
    if resources.gpus == "all":
        limits["device_requests"] = [{"count": -1, "capabilities": [["gpu"]]}]
    elif resources.gpus:
        limits["device_requests"] = [
            {"device_ids": [str(i) for i in resources.gpus], "capabilities": [["gpu"]]}
        ]
    return limits


def _visible_devices(gpus: str | tuple[int, ...] | None) -> str:
    """The value the engine gives for the device request; "void" keeps a CUDA base's default 'all' out."""
    if gpus == "all":
        return "all"
    if gpus:
        return ",".join(str(i) for i in gpus)
    return "void"


def _bind(source: Path, target: str, *, read_only: bool) -> dict[str, Any]:
    return {"Type": "bind", "Source": str(source), "Target": target, "ReadOnly": read_only}


def _numeric_non_root(user: str) -> bool:
    uid, _, gid = user.partition(":")
    return uid.isdigit() and int(uid) != 0 and (not gid or gid.isdigit())


def apply_exit_status(outcome: RunOutcome, status: int | None) -> None:
    """Exit status 128+N means the job died of signal N (the container's init reports it that way)."""
    if outcome.timed_out or outcome.interrupted or outcome.cancelled or status is None or status < 0:
        outcome.exit_code = None
    elif 128 < status < 128 + 65:
        outcome.exit_code, outcome.signal = None, status - 128
    else:
        outcome.exit_code = status
