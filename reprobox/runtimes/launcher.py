"""The command a run actually starts: the job's own, or the job's under PyTorch's torchrun.

Rank layout is part of what makes a distributed run reproducible: global RANK decides each process's
seed (seed + RANK, see `guest.settings.seed_for_process`) and, through a DistributedSampler, its data
shard. So the launcher pins it:

- one node: `torchrun --standalone`, a private c10d rendezvous on a free local port (no clash between
  runs side by side on one host), bound to the loopback address (`--local-addr=127.0.0.1`): a hardened
  container has no network and its hostname resolves to nothing; local ranks 0..N-1 are RANK 0..N-1;
- several nodes (under Slurm): the static rendezvous, node rank = the Slurm task's SLURM_PROCID (one
  task per node), RANK = node rank * N + local rank, rank 0 on the job's first node. A c10d rendezvous
  would number nodes in the order they arrive, which differs from run to run.

Both use `--max-restarts=0`: a restarted worker group would replay training from a different point
with a different history, so a failure must end the run, not be hidden by it.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from reprobox.jobfile import JobSpec

MAX_RESTARTS = "--max-restarts=0"
# Set by the Slurm batch script (reprobox.runtimes.slurm) for multi-node jobs; expanded by the guest.
MASTER_ADDR_VARIABLE = "REPROBOX_MASTER_ADDR"
MASTER_PORT_VARIABLE = "REPROBOX_MASTER_PORT"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


def launch_command(job: JobSpec) -> tuple[str, ...]:
    """The job's command, wrapped for its launcher; `none` runs it as written."""
    if job.launcher.type == "none":
        return job.command
    if job.launcher.nnodes > 1:
        return multinode_command(job)
    return torchrun_command(job)


def torchrun_command(job: JobSpec) -> tuple[str, ...]:
    """Single-node torchrun (`--standalone`): one process per rank, each seeded with seed + RANK."""
    launcher = job.launcher
    return (
        "torchrun",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={launcher.nproc_per_node}",
        "--local-addr=127.0.0.1",
        MAX_RESTARTS,
        *training_arguments(job.command),
    )


def multinode_command(job: JobSpec) -> tuple[str, ...]:
    """One torchrun agent per node through `srun`, with the static rendezvous on the job's first node.

    The node rank must be read on each node, so `srun` starts a shell that exports it for torchrun
    (`PET_NODE_RANK` is torchrun's environment form of `--node-rank`); `$$` keeps the guest from
    expanding it on the batch host. Needs REPROBOX_MASTER_ADDR/PORT, which the Slurm runtime sets.
    """
    launcher = job.launcher
    return (
        "srun",
        f"--ntasks={launcher.nnodes}",
        "--kill-on-bad-exit=1",
        "bash",
        "-c",
        'PET_NODE_RANK="$$SLURM_PROCID" exec "$$@"',
        "torchrun",
        "torchrun",
        f"--nnodes={launcher.nnodes}",
        f"--nproc-per-node={launcher.nproc_per_node}",
        "--rdzv-backend=static",
        f"--master-addr=${{{MASTER_ADDR_VARIABLE}}}",
        f"--master-port=${{{MASTER_PORT_VARIABLE}}}",
        MAX_RESTARTS,
        *training_arguments(job.command),
    )


def training_arguments(command: tuple[str, ...]) -> tuple[str, ...]:
    """What follows torchrun's own options: `python X.py ARGS` and `python -m M ARGS` run in torchrun's
    interpreter; anything else (a shell script, python with its own flags) runs as is (`--no-python`)."""
    if command and _PYTHON.match(PurePath(command[0]).name):
        rest = command[1:]
        if rest and (not rest[0].startswith("-") or (rest[0] == "-m" and len(rest) > 1)):
            return rest
    return ("--no-python", *command)
