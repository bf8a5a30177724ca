"""Choose and prepare a runtime: `docker` (the default when an engine answers), `local`, `podman`, `slurm`."""

from __future__ import annotations

from collections.abc import Callable

from reprobox.errors import EnvironmentProblem
from reprobox.jobfile import JobSpec
from reprobox.runtimes.base import ImageChoice, Runtime, RuntimeOptions
from reprobox.runtimes.local import LocalRuntime

Progress = Callable[[str], None]


def open_runtime(
    name: str,
    job: JobSpec,
    image: ImageChoice,
    progress: Progress,
    build_progress: Progress | None = None,
) -> Runtime:
    """The runtime to use; for docker, the job's image is built first (or reused when unchanged)."""
    if name == "local":
        return LocalRuntime()
    if name == "slurm":
        from reprobox.runtimes.slurm import SlurmRuntime

        return SlurmRuntime.for_job(job, image, progress)
    if name == "podman":
        from reprobox.runtimes import podman

        options = RuntimeOptions(
            base_image=image.base_image, wheelhouse=image.wheelhouse, lock=image.lock, job=job
        )
        return podman.create(options, progress=build_progress or progress)
    from reprobox import engine

    if name == "auto" and not engine.engine_available():
        progress("no Docker engine answers; running on the local runtime (use --runtime docker to insist)")
        return LocalRuntime()
    if name not in ("auto", "docker"):
        raise EnvironmentProblem(f"unknown runtime {name!r}; use docker, local, podman or slurm")
    from reprobox.runtimes.docker import DockerRuntime

    return DockerRuntime.for_job(
        job,
        base_image=image.base_image,
        wheelhouse=image.wheelhouse,
        lock=image.lock,
        progress=build_progress or progress,
    )
