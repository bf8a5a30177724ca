"""The command a run actually starts: the job's own, or the job's under PyTorch's torchrun."""

from __future__ import annotations

from reprobox.job import JobSpec


def launch_command(job: JobSpec) -> tuple[str, ...]:
    """The job's command, wrapped for its launcher; `none` runs it as written."""
    if job.launcher.type == "none":
        return job.command
    return torchrun_command(job)


def torchrun_command(job: JobSpec) -> tuple[str, ...]:
    """Single-node torchrun (`--standalone`): one process per rank, each seeded with seed + RANK."""
    launcher = job.launcher
    command = list(job.command)
    if command and command[0] in ("python", "python3"):
        command = command[1:]  # torchrun starts the interpreter itself
    return (
        "torchrun",
        "--standalone",
        f"--nnodes={launcher.nnodes}",
        f"--nproc-per-node={launcher.nproc_per_node}",
        *command,
    )
