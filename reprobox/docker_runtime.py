"""The `docker` runtime: the guest in a hardened, throwaway container of the job's image.

Hardened by default: a non-root user, no network, every capability dropped, no privilege gain, a
read-only root filesystem with a private /tmp, the code and data mounted read-only, and only the run
directory writable. `container_settings` turns a plan into the engine's create arguments as a pure
function; `DockerRuntime.run` starts the container, streams its output, enforces the timeout, and
records what `docker inspect` says was in force before it removes the container.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reprobox import image as image_module
from reprobox.engine import GPU_UNAVAILABLE, Engine, ImageInfo, connect
from reprobox.errors import EnvironmentProblem
from reprobox.guest import settings
from reprobox.image import MANAGED_LABEL
from reprobox.job import ImageSpec, JobSpec, Resources
from reprobox.runtime import (
    CONTAINER_CODE_DIR,
    CONTAINER_RUN_DIR,
    OUTPUTS_SUBDIR,
    OutputSink,
    RunOutcome,
    RunPlan,
)

GUEST_USER = "10001:10001"  # the image's `reprobox` user; also used for images whose user is root
GUEST_USER_NAME = "reprobox"
CONTAINER_HOME = "/tmp"  # noqa: S108 - inside the container: its private tmpfs
CONTAINER_HOSTNAME = "reprobox"  # the same in every run: a job that reads its hostname sees no difference
CONTAINER_REFERENCE_DIR = "/reprobox/reference"
TMPFS_OPTIONS = "rw,exec,nosuid,nodev,mode=1777"  # exec: torch compiles and loads kernels from /tmp
RUN_ID_LABEL = "io.reprobox.run-id"
JOB_LABEL = "io.reprobox.job"
STOP_GRACE_SECONDS = 5.0
FINGERPRINT_TIMEOUT = 300.0
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([bkmg]?)$")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

Progress = Callable[[str], None]


def _quiet(_line: str) -> None:
    """A progress callback that shows nothing."""


# -- pure translation -------------------------------------------------------------------------------


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
    mounts = [_bind(job.code, CONTAINER_CODE_DIR, read_only=True)]
    mounts += [_bind(data.source, data.target, read_only=True) for data in job.data]
    if plan.reference_run is not None:
        mounts.append(_bind(plan.reference_run, CONTAINER_REFERENCE_DIR, read_only=True))
    mounts.append(_bind(plan.run_dir, CONTAINER_RUN_DIR, read_only=False))

    environment = dict(plan.guest_env)
    environment.update(created["environment"])
    environment.update(
        {
            settings.OUTPUT_DIR: f"{CONTAINER_RUN_DIR}/{OUTPUTS_SUBDIR}",
            settings.RUN_DIR: CONTAINER_RUN_DIR,
            settings.CODE_DIR: CONTAINER_CODE_DIR,
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
            "working_dir": CONTAINER_CODE_DIR,
            "network_mode": "bridge" if job.network else "none",
            "mounts": mounts,
            "environment": environment,
            "labels": {**created["labels"], RUN_ID_LABEL: plan.run_id, JOB_LABEL: job.name},
            **_resource_settings(job.resources),
        }
    )
    if entrypoint is not None:
        created["entrypoint"] = list(entrypoint)
    return created


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


# -- images -----------------------------------------------------------------------------------------


def ensure_image(
    spec: ImageSpec,
    *,
    engine: Engine,
    progress: Progress = _quiet,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    lock: str | None = None,
    rebuild: bool = False,
    network: bool = True,
    project: image_module.ProjectFiles | None = None,
) -> ImageInfo:
    """The job's image: a prebuilt reference as is, or the reprobox image, reused by tag or built now.

    `network=False` builds with no network at all (every wheel must come from the wheelhouse);
    `project` builds from another source checkout than this package's.
    """
    if spec.reference:
        if engine.image_exists(spec.reference):
            return engine.inspect_image(spec.reference)
        progress(f"pulling {spec.reference} ...")
        return engine.pull(spec.reference, progress)
    plan = image_module.plan_build(
        spec, base_image=base_image, lock=lock, wheelhouse=wheelhouse, project=project
    )
    if not rebuild and engine.image_exists(plan.tag):
        progress(f"image {plan.tag} is up to date; no build needed")
        return engine.inspect_image(plan.tag)
    offline = ", offline from the wheelhouse" if plan.offline else ""
    progress(f"building image {plan.tag} from {plan.base_image} ({plan.lock}{offline}) ...")
    with tempfile.TemporaryFile() as context:
        image_module.write_build_context(plan, context)
        context.seek(0)
        return engine.build(
            context,
            plan.tag,
            plan.buildargs,
            plan.labels,
            progress,
            base_image=plan.base_image,
            network=network,
        )


def image_facts(image: ImageInfo) -> dict[str, Any]:
    return {
        "id": image.id,
        "repo_digest": image.repo_digest,
        "repo_digests": list(image.repo_digests),
        "tags": list(image.tags),
        "labels": dict(image.labels),
    }


# -- the runtime ------------------------------------------------------------------------------------


class DockerRuntime:
    """Runs each plan in a new hardened container of one image and removes the container afterwards."""

    name = "docker"

    def __init__(
        self,
        image: ImageInfo,
        *,
        engine: Engine | None = None,
        entrypoint: Sequence[str] | None = None,
        host_uid: int | None = None,
        host_gid: int | None = None,
        stop_grace: float = STOP_GRACE_SECONDS,
    ) -> None:
        self.image = image
        self.engine = engine or connect()
        self.entrypoint = tuple(entrypoint) if entrypoint is not None else None
        self.host_uid = os.getuid() if host_uid is None else host_uid
        self.host_gid = os.getgid() if host_gid is None else host_gid
        self.stop_grace = stop_grace
        self._engine_version: str | None = None

    @classmethod
    def for_job(
        cls,
        job: JobSpec,
        *,
        base_image: str | None = None,
        wheelhouse: Path | None = None,
        lock: str | None = None,
        rebuild: bool = False,
        progress: Progress = _quiet,
        engine: Engine | None = None,
    ) -> DockerRuntime:
        """Connect, then build the job's image or reuse it (an unchanged job builds nothing)."""
        engine = engine or connect()
        image = ensure_image(
            job.image,
            engine=engine,
            progress=progress,
            base_image=base_image,
            wheelhouse=wheelhouse,
            lock=lock,
            rebuild=rebuild,
        )
        return cls(image, engine=engine)

    def describe(self) -> dict[str, Any]:
        if self._engine_version is None:
            self._engine_version = self.engine.engine_version()
        return {
            "name": self.name,
            "image": image_facts(self.image),
            "engine": {"version": self._engine_version},
        }

    def settings(self, plan: RunPlan) -> dict[str, Any]:
        return container_settings(
            plan, self.image, host_uid=self.host_uid, host_gid=self.host_gid, entrypoint=self.entrypoint
        )

    def run(self, plan: RunPlan, sink: OutputSink, stop: threading.Event | None = None) -> RunOutcome:
        created = self.settings(plan)
        outcome = RunOutcome(started_at=_now(), runtime=self.describe())
        ownership = _RunDirOwnership.lend(plan.run_dir, created["user"]) if self.host_uid == 0 else None
        container_id: str | None = None
        leftover: str | None = None  # what to remove at the end, whatever happens
        status: int | None = None
        watchdog: _Watchdog | None = None
        try:
            try:
                try:
                    container_id = leftover = self.engine.create_container(created)
                except KeyboardInterrupt:
                    leftover = str(created["name"])  # it may exist although create did not return
                    raise
                watchdog = _Watchdog(self.engine, container_id, plan.timeout, stop, self.stop_grace)
                self.engine.start(container_id)
                output = self.engine.stream_logs(container_id)
                try:
                    for chunk in output:
                        sink.write(chunk)
                finally:
                    output.close()
                status = self.engine.wait(container_id)
            except KeyboardInterrupt:
                outcome.interrupted = True
                if container_id is not None:
                    _quietly(lambda: self.engine.stop(container_id, self.stop_grace))
            finally:
                if watchdog is not None:
                    watchdog.finish()
            outcome.ended_at = _now()
            if container_id is not None:
                facts = self.engine.inspect_container(container_id)
                outcome.runtime["container"] = effective_settings(facts)
                outcome.oom_killed = bool((facts.get("State") or {}).get("OOMKilled"))
            if watchdog is not None:
                outcome.timed_out, outcome.cancelled = watchdog.timed_out, watchdog.cancelled
            apply_exit_status(outcome, status)
        finally:
            if leftover is not None:
                self._remove(leftover)
            if ownership is not None:
                ownership.restore()
        return outcome

    def _remove(self, container: str) -> None:
        """Remove the container whatever happened; a second Ctrl-C does not stop the removal."""
        for _attempt in range(3):
            try:
                self.engine.remove_container(container)
                return
            except KeyboardInterrupt:
                continue


class _Watchdog:
    """Stops the container at the deadline or when `stop` is set, from a thread of its own."""

    def __init__(
        self,
        engine: Engine,
        container_id: str,
        timeout: float | None,
        stop: threading.Event | None,
        grace: float,
    ) -> None:
        self.engine, self.container_id, self.grace = engine, container_id, grace
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.stop_requested = stop
        self.timed_out = self.cancelled = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="reprobox-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            if self.stop_requested is not None and self.stop_requested.is_set():
                self.cancelled = True
            elif self.deadline is not None and time.monotonic() >= self.deadline:
                self.timed_out = True
            else:
                continue
            _quietly(lambda: self.engine.stop(self.container_id, self.grace))
            return

    def finish(self) -> None:
        self.done.set()
        self.thread.join(timeout=self.grace + 30)


class _RunDirOwnership:
    """Lends the run dir to the container's user while a root controller runs the job, then gives it back.

    Symlinks are never followed: a job cannot make us chown files outside its run directory.
    """

    def __init__(self, run_dir: Path, uid: int, gid: int) -> None:
        self.run_dir, self.uid, self.gid = run_dir, uid, gid

    @classmethod
    def lend(cls, run_dir: Path, user: str) -> _RunDirOwnership | None:
        uid, _, gid = user.partition(":")
        if not (uid.isdigit() and gid.isdigit()):
            return None
        stat = run_dir.lstat()
        lent = cls(run_dir, stat.st_uid, stat.st_gid)
        _chown_tree(run_dir, int(uid), int(gid))
        return lent

    def restore(self) -> None:
        _chown_tree(self.run_dir, self.uid, self.gid)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid, follow_symlinks=False)
    for current, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.chown(Path(current) / name, uid, gid, follow_symlinks=False)


def apply_exit_status(outcome: RunOutcome, status: int | None) -> None:
    """Exit status 128+N means the job died of signal N (the container's init reports it that way)."""
    if outcome.timed_out or outcome.interrupted or outcome.cancelled or status is None or status < 0:
        outcome.exit_code = None
    elif 128 < status < 128 + 65:
        outcome.exit_code, outcome.signal = None, status - 128
    else:
        outcome.exit_code = status


def _quietly(action: Callable[[], None]) -> None:
    """Best effort during cleanup: the container is force-removed afterwards in any case."""
    with contextlib.suppress(EnvironmentProblem, KeyboardInterrupt):
        action()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# -- fingerprint of an image -------------------------------------------------------------------------


def image_fingerprint(
    *,
    image: str | None,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    lock: str | None = None,
    progress: Progress = _quiet,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """The fingerprint as seen inside an image (the reprobox image when `image` is None), torch imported."""
    engine = engine or connect()
    info = ensure_image(
        ImageSpec(reference=image),
        engine=engine,
        progress=progress,
        base_image=base_image,
        wheelhouse=wheelhouse,
        lock=lock,
    )
    created = hardened_settings(info, host_uid=os.getuid(), host_gid=os.getgid())
    created.update(
        entrypoint=["python3"],
        command=["-m", "reprobox.guest.fingerprint", "--import-torch"],
        working_dir=CONTAINER_HOME,
    )
    try:
        return _fingerprint_container(
            engine, {**created, "device_requests": [{"count": -1, "capabilities": [["gpu"]]}]}
        )
    except _NoGpuRuntime:
        return _fingerprint_container(
            engine, {**created, "environment": {**created["environment"], "NVIDIA_VISIBLE_DEVICES": "void"}}
        )


class _NoGpuRuntime(Exception):
    """The engine cannot hand GPUs to containers here."""


def _fingerprint_container(engine: Engine, created: dict[str, Any]) -> dict[str, Any]:
    container_id: str | None = None
    try:
        try:
            container_id = engine.create_container(created)
            engine.start(container_id)
        except EnvironmentProblem as exc:
            if GPU_UNAVAILABLE in exc.message and created.get("device_requests"):
                raise _NoGpuRuntime from exc
            raise
        status = engine.wait(container_id, timeout=FINGERPRINT_TIMEOUT)
        if status != 0:
            raise EnvironmentProblem(
                f"the fingerprint probe in image {created['image'][:19]} exited with status {status}; "
                "check that the image has python3 with reprobox installed",
                log_tail=engine.output(container_id, stdout=False, stderr=True).decode(errors="replace")[
                    -4000:
                ],
            )
        result: dict[str, Any] = json.loads(engine.output(container_id))
        return result
    finally:
        if container_id is not None:
            engine.remove_container(container_id)
