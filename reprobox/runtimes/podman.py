"""The `podman` runtime: the docker runtime's hardened container, run by Podman through its Docker API.

For machines that cannot run a Docker daemon: the same image, sandbox settings and RunRecord as `docker`,
through the docker SDK against `podman system service`, rootless where the kernel allows. Podman's
differences are handled here: its default `nofile`/`nproc` rlimits exceed what the container's init may
set ("error setting rlimit type 7"), so both are set within this machine's hard limits; it names loaded
images `localhost/NAME` and built ones `docker.io/NAME`, so references are resolved per engine, then used
by id; rootless, the run dir is lent to the image's user inside Podman's user namespace.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobox import progress
from reprobox.engine import Engine, ImageInfo, connect, load_image, save_image
from reprobox.errors import EnvironmentProblem
from reprobox.image import plan_build
from reprobox.jobfile import ImageSpec
from reprobox.runtimes.base import RunPlan, RuntimeOptions
from reprobox.runtimes.docker import DockerRuntime, RunDirLoan, ensure_image, image_fingerprint

SYSTEM_SOCKET = Path("/run/podman/podman.sock")
SETUP_HINT = "install it with: sudo apt-get install podman"
# Ample for any job, and within what Podman 4.3 keeps for itself (its processes had nproc 32768 on a machine
# whose hard limit was 96365, so a container asking for more fails to start).
ULIMIT_CEILINGS = {"nofile": 65536, "nproc": 32768}
SERVICE_START_SECONDS = 30.0
SERVICE_STOP_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1


def socket_path(uid: int, environ: Mapping[str, str]) -> Path:
    """Where Podman's API socket lives: the system one for root, else the user's under XDG_RUNTIME_DIR."""
    if uid == 0:
        return SYSTEM_SOCKET
    return Path(environ.get("XDG_RUNTIME_DIR") or f"/run/user/{uid}") / "podman" / "podman.sock"


def container_ulimits(hard_limits: Mapping[str, int]) -> list[dict[str, Any]]:
    """`nofile` and `nproc` (soft = hard) within the ceilings and the given hard limits (-1: unlimited)."""
    chosen = []
    for name, ceiling in ULIMIT_CEILINGS.items():
        hard = hard_limits.get(name, ceiling)
        value = ceiling if hard < 0 else min(hard, ceiling)
        chosen.append({"name": name, "soft": value, "hard": value})
    return chosen


def reference_candidates(ref: str) -> tuple[str, ...]:
    """The names Podman may hold `ref` under: as given when qualified (or an id), else `localhost/` for
    loaded images, `docker.io/` for built or pulled ones, and the short name last."""
    first = ref.split("/", 1)[0]
    if ref.startswith("sha256:") or ("/" in ref and ("." in first or ":" in first or first == "localhost")):
        return (ref,)
    hub = f"docker.io/{ref}" if "/" in ref else f"docker.io/library/{ref}"
    return (f"localhost/{ref}", hub, ref)


def find_image(engine: Engine, ref: str) -> ImageInfo | None:
    """The image `ref` names on this engine, whatever prefix the engine gave it; None when absent."""
    for candidate in reference_candidates(ref):
        if engine.image_exists(candidate):
            return engine.inspect_image(candidate)
    return None


def create(options: RuntimeOptions) -> PodmanRuntime:
    """Connect to Podman (starting its service when none answers), then make the job's image there."""
    engine, service = open_engine(options.engine)
    try:
        image = job_image(engine, options)
        return PodmanRuntime(image, engine=engine, service=service)
    except BaseException:
        if service is not None:
            service.stop()
        raise


class PodmanRuntime(DockerRuntime):
    """Runs each plan in a new hardened Podman container of one image and removes it afterwards."""

    name = "podman"

    def __init__(
        self,
        image: ImageInfo,
        *,
        engine: Engine,
        service: PodmanService | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(image, engine=engine)
        self.service = service
        self.facts = dict(facts or engine_facts(engine, started=service is not None))
        self.rootless = bool(self.facts["rootless"])
        # This process's hard limits: those a Podman service started from it has too.
        limits = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}
        self.ulimits = container_ulimits({name: resource.getrlimit(kind)[1] for name, kind in limits.items()})

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        described["engine"] = {**described["engine"], **self.facts}
        return described

    def fingerprint(self) -> dict[str, Any]:
        return image_fingerprint(self.engine, self.image, extra={"ulimits": [dict(u) for u in self.ulimits]})

    def job_ids(self) -> tuple[int, int]:
        """Rootless, the caller is root in Podman's user namespace, so the image's non-root user runs
        the job, as under a root controller."""
        return (0, 0) if self.rootless else (self.host_uid, self.host_gid)

    def settings(self, plan: RunPlan) -> dict[str, Any]:
        """The docker runtime's create arguments (variation included) plus the rlimits."""
        created = super().settings(plan)
        created["ulimits"] = [dict(limit) for limit in self.ulimits]
        return created

    def loan(self, plan: RunPlan) -> RunDirLoan | None:
        """Rootless, the run dir is lent inside Podman's user namespace, where the caller is root; the
        docker runtime's clean-up gives it back, as it removes the container, through any signal."""
        return _UnsharedLoan(plan.run_dir) if self.rootless else super().loan(plan)

    def close(self) -> None:
        """Stop the Podman service this runtime started, if any (also done when the command ends)."""
        if self.service is not None:
            self.service.stop()


class PodmanService:
    """`podman system service` started for the length of one command, on a socket of its own."""

    def __init__(self, process: subprocess.Popen[bytes], folder: Path) -> None:
        self.process, self.folder = process, folder
        self.socket = folder / "podman.sock"
        atexit.register(self.stop)

    @classmethod
    def start(cls, podman: str) -> tuple[Engine, PodmanService]:
        """Start the service and connect to it; EnvironmentProblem with its log when it does not answer."""
        folder = Path(tempfile.mkdtemp(prefix="reprobox-podman-"))
        with (folder / "service.log").open("wb") as log:
            process = subprocess.Popen(
                [podman, "system", "service", "--time=0", f"unix://{folder / 'podman.sock'}"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to reprobox, which stops the job and then the service
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, before exec
            )
        service = cls(process, folder)
        try:
            engine = service.wait_until_answering()
        except BaseException:
            service.stop()
            raise
        # Stopped with the last use of its engine: a program that runs many commands in one process
        # (a notebook, a test run) does not keep a service per command until it exits.
        weakref.finalize(engine, service.stop)
        return engine, service

    def wait_until_answering(self) -> Engine:
        deadline = time.monotonic() + SERVICE_START_SECONDS
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.folder / "service.log").read_text(errors="replace")[-4000:]
                last = (log.strip().splitlines() or ["no output"])[-1]
                raise EnvironmentProblem(
                    f"Podman's API service did not start ({last}); `podman info` says why, e.g. a kernel "
                    "that refuses user namespaces: run as root, or use --runtime docker",
                    log_tail=log,
                )
            if self.socket.exists():
                with contextlib.suppress(EnvironmentProblem):
                    return connect(timeout=3, base_url=f"unix://{self.socket}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL; the containers are already gone (each run removes its own)."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(SERVICE_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def open_engine(
    engine: Engine | None = None, *, uid: int | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Engine, PodmanService | None]:
    """The Podman engine that answers on this user's socket, else one started for this command."""
    if engine is not None:
        return engine, None
    environ = os.environ if environ is None else environ
    socket = socket_path(os.geteuid() if uid is None else uid, environ)
    if socket.exists():
        with contextlib.suppress(EnvironmentProblem):
            return connect(timeout=3, base_url=f"unix://{socket}"), None
    podman = shutil.which("podman", path=environ.get("PATH"))
    if podman is None:
        raise EnvironmentProblem(f"Podman is not installed here (no `podman` on PATH); {SETUP_HINT}")
    return PodmanService.start(podman)


def engine_facts(engine: Engine, *, started: bool) -> dict[str, Any]:
    """What the records say about the engine: Podman, its version, rootless or not, cgroups, storage."""
    try:
        info: dict[str, Any] = engine.client.info()
    except OSError as exc:  # the SDK's errors (and requests') are OSErrors
        raise EnvironmentProblem(f"asking Podman for its facts failed ({exc}); run `podman info`") from exc
    return {
        "name": "podman",
        "version": str(info.get("ServerVersion") or engine.engine_version()),
        "rootless": bool(info.get("Rootless")),
        "cgroup_version": str(info.get("CgroupVersion") or ""),
        "storage_driver": str(info.get("Driver") or ""),
        "service": "started for this command" if started else "already running",
    }


def job_image(engine: Engine, options: RuntimeOptions) -> ImageInfo:
    """An image as is (`options.image` or the job's), else the job's reprobox image: found in Podman,
    moved over from Docker, or built here through the same build path as for Docker."""
    spec = options.job.image if options.job is not None else ImageSpec()
    if options.image:
        spec = ImageSpec(reference=options.image)
    if spec.reference:
        found = find_image(engine, spec.reference) or from_docker(engine, spec.reference)
        return found or ensure_image(spec, engine=engine)
    plan = plan_build(spec, base_image=options.base_image, lock=options.lock, wheelhouse=options.wheelhouse)
    found = find_image(engine, plan.tag)
    if found is not None:
        progress.say(f"image {plan.tag} is up to date; no build needed")
        return found
    moved = from_docker(engine, plan.tag)
    if moved is not None:
        return moved
    # What the build starts from, moved over from Docker when Podman lacks it: a job's extras build on
    # the shared image (moved whole when Docker has it), which builds on the base.
    shared = plan.shared
    if shared is not None and find_image(engine, shared.tag) is None:
        from_docker(engine, shared.tag)
    needs_base = shared is None or find_image(engine, shared.tag) is None
    if needs_base and find_image(engine, plan.base_image) is None:
        from_docker(engine, plan.base_image)
    return ensure_image(
        spec,
        engine=engine,
        base_image=options.base_image,
        wheelhouse=options.wheelhouse,
        lock=options.lock,
    )


def from_docker(podman: Engine, ref: str) -> ImageInfo | None:
    """`docker save REF | podman load` when a Docker engine answers and holds REF; the loaded image."""
    try:
        docker = connect(timeout=3)
    except EnvironmentProblem:
        return None
    try:
        if not docker.image_exists(ref):  # also when DOCKER_HOST names this same Podman
            return None
        wanted = docker.inspect_image(ref).id
        progress.say(
            f"image {ref} is in Docker, not in Podman: moving it over (docker save | podman load) ..."
        )
        with tempfile.TemporaryFile() as archive:
            save_image(docker, ref, archive)
            archive.seek(0)
            loaded = load_image(podman, archive)
    finally:
        docker.client.close()
    return next((info for info in loaded if info.id == wanted), loaded[0])


class _UnsharedLoan:
    """The run dir chowned to the image's user inside Podman's user namespace, then back to the caller."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.lent = False

    def lend(self, user: str) -> None:
        self.lent = True  # before the chown: a signal while it runs still gets the dir given back
        _unshare_chown(self.run_dir, user)

    def restore(self) -> None:
        if self.lent:
            _unshare_chown(self.run_dir, "0:0")  # root in the namespace: the caller outside it


def _unshare_chown(run_dir: Path, owner: str) -> None:
    """chown the run dir inside Podman's user namespace (symlinks untouched)."""
    command = ["podman", "unshare", "chown", "-R", "-h", owner, str(run_dir)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise EnvironmentProblem(f"rootless Podman needs `podman` here ({exc}); {SETUP_HINT}") from exc
    if done.returncode != 0:
        raise EnvironmentProblem(f"`{' '.join(command)}` failed: {done.stderr.strip()}")


def _die_with_parent() -> None:
    """In the child before exec: end the service if reprobox itself is killed (SIGKILL skips atexit)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
